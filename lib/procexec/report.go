package procexec

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"unicode/utf8"

	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

// tailLen is how many bytes of stderr an error message may quote.
const tailLen = 256

// redactArgs returns args redacted for display: each through the text
// policy and scrubber, and the value after a flag whose name is sensitive
// ("--password", "--token x") replaced whole.
func (r *Runner) redactArgs(args []string) []string {
	out := make([]string, len(args))
	hideNext := false
	for i, a := range args {
		switch {
		case hideNext:
			out[i] = redact.Redacted
		default:
			out[i] = r.text(a)
		}
		name := strings.TrimLeft(a, "-")
		hideNext = !hideNext && name != a && !strings.Contains(a, "=") && redact.IsSensitiveKey(name)
	}
	return out
}

// tail returns a redacted, printable tail of b for an error message. Beyond
// the text policy and the Runner's scrubber, the values of the spec's
// environment (and their encodings) are removed: a program may echo them.
func (r *Runner) tail(spec *CommandSpec, b []byte) string {
	if len(b) > tailLen {
		b = b[len(b)-tailLen:]
	}
	s := strings.Map(func(c rune) rune {
		if c == utf8.RuneError || c < 0x20 || c == 0x7f {
			return ' '
		}
		return c
	}, strings.ToValidUTF8(string(b), ""))
	envScrub := redact.NewScrubber()
	for _, kv := range spec.Env {
		if _, v, _ := strings.Cut(kv, "="); len(v) >= redact.MinValueLen {
			envScrub.Register([]byte(v))
		}
	}
	return strings.TrimSpace(envScrub.Scrub(r.text(s)))
}

// summary builds the redacted one-line Result.Summary.
func (r *Runner) summary(p *prepared, res *Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "purpose=%s exe=%s args=[%s] class=%s", strconv.Quote(r.text(p.spec.Purpose)),
		strconv.Quote(r.text(p.path)), quoteAll(r.redactArgs(p.spec.Args)), describe(p.cls.Class, p.cls.Mutation))
	fmt.Fprintf(&b, " pid=%d exit=%d", res.Pid, res.ExitCode)
	if res.Signal != "" {
		fmt.Fprintf(&b, " signal=%s", res.Signal)
	}
	fmt.Fprintf(&b, " stdout_bytes=%d stderr_bytes=%d duration_ms=%d", res.StdoutSize, res.StderrSize, res.Duration.Milliseconds())
	return b.String()
}

// quoteAll quotes and joins strings.
func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, " ")
}

// specAttrs are the log attributes that describe a spec.
func (r *Runner) specAttrs(spec *CommandSpec, p *prepared) []slog.Attr {
	if spec == nil {
		return nil
	}
	exe := spec.Executable
	if p != nil {
		exe = p.path
	}
	attrs := []slog.Attr{
		slog.String(fieldPurpose, r.text(spec.Purpose)),
		slog.String(fieldExe, r.text(exe)),
		slog.Any(fieldArgs, r.redactArgs(spec.Args)),
		slog.Any(fieldEnvKeys, r.redactArgs(envKeys(spec.Env))),
		slog.String(fieldClass, string(spec.class())),
	}
	if spec.Mutation != "" {
		attrs = append(attrs, slog.String(fieldMutation, spec.Mutation))
	}
	return attrs
}

// logRefusal writes the canonical line for a spec that did not run.
func (r *Runner) logRefusal(spec *CommandSpec, p *prepared, err error) {
	attrs := append(r.specAttrs(spec, p), slog.String(fieldOutcome, wire.CodeOf(err)))
	r.log.LogAttrs(context.Background(), slog.LevelWarn, logMsg, attrs...)
}

// logRun writes the canonical line for a spec that was executed.
func (r *Runner) logRun(p *prepared, res *Result, err error) {
	outcome := "ok"
	level := slog.LevelInfo
	if err != nil {
		outcome, level = wire.CodeOf(err), slog.LevelWarn
	}
	attrs := append(r.specAttrs(p.spec, p), slog.String(fieldOutcome, outcome))
	if res != nil {
		attrs = append(attrs, slog.Int(fieldPid, res.Pid), slog.Int(fieldExit, res.ExitCode),
			slog.Int64(fieldDuration, res.Duration.Milliseconds()),
			slog.Int64(fieldStdoutLen, res.StdoutSize), slog.Int64(fieldStderrLen, res.StderrSize))
	}
	r.log.LogAttrs(context.Background(), level, logMsg, attrs...)
}
