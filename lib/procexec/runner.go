package procexec

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

// Log field names of the canonical "procexec.run" line.
const (
	logMsg         = "procexec.run"
	fieldPurpose   = "purpose"
	fieldExe       = "exe"
	fieldArgs      = "args"
	fieldEnvKeys   = "env_keys"
	fieldClass     = "class"
	fieldMutation  = "mutation"
	fieldPid       = "pid"
	fieldExit      = "exit"
	fieldOutcome   = "outcome"
	fieldDuration  = "duration_ms"
	fieldStdoutLen = "stdout_bytes"
	fieldStderrLen = "stderr_bytes"
)

// Config configures a Runner.
type Config struct {
	// Policy classifies every command; required.
	Policy *Policy
	// Logger receives one "procexec.run" line per Run (refusals included);
	// nil discards.
	Logger *slog.Logger
	// Scrubber, when set, removes registered secret values from arguments,
	// output tails, messages and logs (after redact.String).
	Scrubber *redact.Scrubber
}

// Runner runs CommandSpecs. It is safe for concurrent use.
type Runner struct {
	policy *Policy
	log    *slog.Logger
	scrub  *redact.Scrubber
}

// NewRunner returns a Runner; a nil Policy is CodeInvalidSpec.
func NewRunner(c Config) (*Runner, error) {
	if c.Policy == nil {
		return nil, wire.Errorf(CodeInvalidSpec, "a runner needs a policy")
	}
	r := &Runner{policy: c.Policy, log: c.Logger, scrub: c.Scrubber}
	if r.log == nil {
		r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return r, nil
}

// Result is what a started program did. Stdout and Stderr are the raw bytes,
// at most the spec's limits, for the caller's decoder: never log them; log
// the Result itself (String and LogValue give the redacted Summary).
type Result struct {
	// Path is the resolved executable; Pid its process id (and group id).
	Path string
	Pid  int // the leader's pid, also its process group id
	// ExitCode is the exit status, or -1 when the process was killed by a
	// signal (Signal names it).
	ExitCode int
	Signal   string // the terminating signal's name (e.g. "SIGKILL"); "" when it exited
	// Stdout and Stderr hold the output, truncated at the limits;
	// StdoutSize and StderrSize are the output files' sizes: how far the
	// program wrote into them (past the limit when it overflowed).
	Stdout, Stderr         []byte
	StdoutSize, StderrSize int64 // bytes
	// Duration runs from the start to the leader's exit.
	Duration time.Duration
	// Summary is a redacted one-line description.
	Summary string
}

// String returns the redacted summary.
func (r *Result) String() string { return r.Summary }

// LogValue returns the redacted summary.
func (r *Result) LogValue() slog.Value { return slog.StringValue(r.Summary) }

// Run checks spec and, if it passes, runs it and waits for it and its whole
// process group. It returns a nil Result when nothing ran (refusals,
// CodeExecFailed, CodeCancelled before the start). Once the program has
// started, the Result is always returned, with the error for
// CodeTimeout, CodeCancelled, CodeOutputOverflow, CodeExitNonzero and
// CodeCleanupFailed (which wins over the others: something may still run).
// Refusals: CodeInvalidSpec, CodeUnresolved, CodeExecutableUnsafe,
// CodeUnknown, CodeForbidden, CodeUnsupportedMutation, CodeWorkDirInvalid.
func (r *Runner) Run(ctx context.Context, spec *CommandSpec) (*Result, error) {
	p, err := r.prepare(spec)
	if err != nil {
		err = r.safe(err)
		r.logRefusal(spec, p, err)
		return nil, err
	}
	if ctx.Err() != nil {
		err := r.safe(wire.Wrap(CodeCancelled, r.text(spec.Purpose)+": cancelled before start", ctx.Err()))
		err.(*wire.Error).Retry = wire.RetrySafe
		r.logRefusal(spec, p, err)
		return nil, err
	}
	res, err := r.execute(ctx, p)
	if err != nil {
		err = r.safe(err)
	}
	r.logRun(p, res, err)
	return res, err
}

// prepared is a checked spec.
type prepared struct {
	spec *CommandSpec
	path string
	cls  Classification
}

// prepare runs every check that precedes execution.
func (r *Runner) prepare(spec *CommandSpec) (*prepared, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if err := checkOutputFiles(spec); err != nil {
		return nil, err
	}
	path, err := Resolve(spec.Executable)
	if err != nil {
		return nil, err
	}
	p := &prepared{spec: spec, path: path, cls: r.policy.Classify(path, spec.Args)}
	switch {
	case p.cls.Class == ClassForbidden || spec.class() == ClassForbidden:
		return p, wire.Errorf(CodeForbidden, "%s: the command is forbidden", spec.Purpose)
	case p.cls.Class == ClassUnknown || spec.class() == ClassUnknown:
		return p, wire.Errorf(CodeUnknown, "%s: the command is not classified", spec.Purpose)
	case p.cls.Class != spec.class() || p.cls.Mutation != spec.Mutation:
		return p, wire.Errorf(CodeInvalidSpec, "%s: declared %s, policy says %s", spec.Purpose,
			describe(spec.class(), spec.Mutation), describe(p.cls.Class, p.cls.Mutation))
	case p.cls.Class == ClassMutating && !r.policy.Supports(p.cls.Mutation):
		return p, wire.Errorf(CodeUnsupportedMutation, "%s: mutation %s is not supported", spec.Purpose, p.cls.Mutation)
	}
	return p, nil
}

// describe formats a classification for a message.
func describe(c Class, m string) string {
	if m != "" {
		return string(c) + " (" + m + ")"
	}
	return string(c)
}

// safe returns err as a *wire.Error whose message went through the
// redaction policy and the scrubber.
func (r *Runner) safe(err error) error {
	var we *wire.Error
	if !errors.As(err, &we) {
		return wire.Wrap(wire.CodeInternal, "procexec: internal error", err)
	}
	out := *we
	out.Msg = r.text(we.Msg)
	return &out
}

// text redacts free text.
func (r *Runner) text(s string) string { return r.scrub.Scrub(redact.String(s)) }
