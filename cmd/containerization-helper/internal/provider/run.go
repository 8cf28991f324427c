package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"hostkit.dev/cmd/containerization-helper/internal/codec"
	"hostkit.dev/lib/procexec"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

// run executes verb v with runtime arguments args (after the global
// flags; --version takes none) and returns procexec's result and the last
// error message of the command's own --log file (redacted, "" if none).
// console, when not nil, is the container's console log (create only):
// the runtime's stdout and stderr, handed over as descriptors 1 and 2
// (procexec's caller-supplied output files), so the container inherits
// the file itself, never a pipe.
//
// Each command gets a fresh log file in LogDir (O_EXCL, 0600), read back
// and removed after the run: runc and crun append to --log and never
// truncate it, so a shared file would mix commands. An output overflow is
// CodeDecode (the codec's cap); every other procexec error is returned as
// it is, CodeExitNonzero included, for the caller to classify.
func (p *cli) run(ctx context.Context, v verb, console *os.File, args []string) (*procexec.Result, string, error) {
	rt := []string{v.name}
	var logPath string
	if v.name != verbVersion.name {
		f, path, err := p.tempFile(v.name + ".log")
		if err != nil {
			return nil, "", err
		}
		f.Close()
		defer os.Remove(path)
		logPath = path
		rt = append(append(globals(p.root, logPath), v.name), args...)
	}
	exe, argv := p.t.command(v, rt)
	spec := &procexec.CommandSpec{
		Executable:  exe,
		Args:        argv,
		Timeout:     p.timeout,
		Class:       v.class,
		Mutation:    v.mutation,
		Purpose:     p.name + " " + v.name,
		StdoutLimit: v.stdout,
		StderrLimit: 64 << 10,
		Stdout:      console,
		Stderr:      console,
	}
	res, err := p.runner.Run(ctx, spec)
	msg := ""
	if err != nil && logPath != "" {
		msg = p.text(codec.RuntimeError(readTail(logPath, codec.MaxLog)))
	}
	if wire.HasCode(err, procexec.CodeOutputOverflow) {
		e := wire.Wrap(CodeDecode, p.name+" "+v.name+": output over the codec's cap", err)
		e.Retry = wire.RetryAfterObserve
		return res, msg, e
	}
	return res, msg, err
}

// tempPath returns a new path in LogDir: a random name ending in suffix.
func (p *cli) tempPath(suffix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return filepath.Join(p.logDir, hex.EncodeToString(b[:])+"-"+suffix)
}

// tempFile creates a new 0600 file in LogDir with a random name ending in
// suffix.
func (p *cli) tempFile(suffix string) (*os.File, string, error) {
	path := p.tempPath(suffix)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, "", wire.Wrap(CodeUnavailable, p.name+": cannot create a file in the log dir", err)
	}
	return f, path, nil
}

// readTail returns at most the last max bytes of the file at path; nil when
// it cannot be read (the log is a diagnostic).
func readTail(path string, limit int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	off := max(0, fi.Size()-limit)
	b, err := io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil
	}
	return b
}

// text redacts free text from a runtime (its log message) for an error
// message.
func (p *cli) text(s string) string {
	s = redact.String(s)
	if p.scrub != nil {
		s = p.scrub.Scrub(s)
	}
	return s
}

// containerText removes what a runtime quotes from the container's own
// process (`exec: "/path/arg": stat ...`) from a create or start message:
// the command line and environment are the caller's data and never appear
// in an error (docs/containerization-helper.md). Every double-quoted
// span becomes "…".
func (p *cli) containerText(v verb, msg string) string {
	if v.name != "create" && v.name != "start" {
		return msg
	}
	if i := strings.Index(msg, "exec: "); i >= 0 {
		// runc: `exec: "<argv0>": stat <argv0>: no such file or directory`
		return msg[:i] + "exec: the container's command could not be run"
	}
	if !strings.Contains(msg, `"`) {
		return msg
	}
	var b strings.Builder
	in := false
	for _, r := range msg {
		switch {
		case r == '"' && !in:
			in = true
			b.WriteString(`"…`)
		case r == '"':
			in = false
			b.WriteByte('"')
		case !in:
			b.WriteRune(r)
		}
	}
	if in {
		b.WriteByte('"')
	}
	return b.String()
}

// failure builds the error for a runtime command that failed and that the
// caller could not classify more precisely: CodeFailed with the runtime's
// own message, retry after observe.
func (p *cli) failure(v verb, id, msg string, cause error) error {
	msg = p.containerText(v, msg)
	text := p.name + " " + v.name
	if id != "" {
		text += " " + id
	}
	if msg != "" {
		text += ": " + msg
	} else if we := wire.AsError(cause); we != nil {
		text += ": " + we.Msg
	}
	e := wire.Wrap(CodeFailed, text, cause)
	e.Retry = wire.RetryAfterObserve
	return e
}

// classified builds a precise error (not found, exists, bad state) for a
// failed command, keeping the runtime's message.
func (p *cli) classified(code string, v verb, id, why, msg string, cause error) error {
	msg = p.containerText(v, msg)
	text := p.name + " " + v.name + " " + id + ": " + why
	if msg != "" {
		text += " (" + msg + ")"
	}
	e := wire.Wrap(code, text, cause)
	if code == CodeBadState {
		e.Retry = wire.RetryAfterObserve
	}
	return e
}
