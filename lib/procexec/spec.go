package procexec

import (
	"os"
	"strings"
	"time"

	"hostkit.dev/lib/wire"
)

// Timeout bounds: a spec's Timeout of 0 means DefaultTimeout; anything else
// must lie in [MinTimeout, MaxTimeout].
const (
	DefaultTimeout = 30 * time.Second
	MinTimeout     = 1 * time.Second
	MaxTimeout     = 300 * time.Second
)

// Output limits in bytes: a limit of 0 means DefaultOutputLimit; the most a
// spec may ask for is MaxOutputLimit.
const (
	DefaultOutputLimit = 1 << 20
	MaxOutputLimit     = 64 << 20
)

// Argument and environment bounds (bytes and counts).
const (
	maxArgs       = 256
	maxEnv        = 128
	maxArgvBytes  = 128 << 10
	maxPurposeLen = 200
)

// Class is a command's classification.
type Class string

// Classes. The zero Class is treated as ClassUnknown.
const (
	// ClassReadOnly: observes state and changes nothing.
	ClassReadOnly Class = "read_only"
	// ClassMutating: changes state; a named mutation kind says which change.
	ClassMutating Class = "mutating"
	// ClassForbidden: never run.
	ClassForbidden Class = "forbidden"
	// ClassUnknown: not classified; never run.
	ClassUnknown Class = "unknown"
)

// CommandSpec is one command to run. A spec is plain data; the Runner
// resolves, classifies and checks it on every Run.
type CommandSpec struct {
	// Executable is an absolute path, or a bare name looked up in
	// SearchPath (never $PATH). It is resolved by Resolve; argv[0] of the
	// child is the resolved path.
	Executable string
	// Args are argv[1:], exactly; no element may contain NUL.
	Args []string
	// Env is the child's whole environment, "KEY=value" each; nil or empty
	// means an empty environment. Nothing is inherited; keys are unique.
	// Values are never logged.
	Env []string
	// Dir is the pinned working directory; nil means "/".
	Dir *WorkDir
	// Timeout bounds the run: 0 means DefaultTimeout (30 s); otherwise
	// MinTimeout (1 s) to MaxTimeout (300 s).
	Timeout time.Duration
	// Class is the caller's declared classification; it must equal the
	// Policy's. The zero value is ClassUnknown.
	Class Class
	// Mutation names the change a ClassMutating command makes (for example
	// "container.create"); empty for every other class.
	Mutation string
	// Purpose says why the command runs, for logs and errors (1 to 200
	// printable bytes; it is redacted like everything else).
	Purpose string
	// StdoutLimit and StderrLimit are byte limits: 0 means
	// DefaultOutputLimit (1 MiB), at most MaxOutputLimit (64 MiB).
	StdoutLimit int64 // bytes of stdout kept
	StderrLimit int64 // bytes of stderr kept
	// Stdout and Stderr, when not nil, are caller-supplied output files:
	// the child gets the file as descriptor 1 (or 2) instead of one of the
	// runner's unnamed temporary files, so what it writes (and what a
	// process that inherits the descriptor writes later, such as a
	// container's init) goes straight to it. Each must be an open regular
	// file whose status flags include O_APPEND and allow writing
	// (fstat(2), fcntl(2) F_GETFL); anything else is CodeInvalidSpec. The
	// same file may be given for both. The runner never closes it, never
	// reads it back (Result.Stdout or Result.Stderr stay empty and their
	// sizes 0 for that stream), and applies no byte limit or overflow
	// watch to it: the caller owns its growth. Policy, process-group kill
	// and cleanup are unchanged.
	Stdout, Stderr *os.File
}

// timeout returns the effective timeout.
func (s *CommandSpec) timeout() time.Duration {
	if s.Timeout == 0 {
		return DefaultTimeout
	}
	return s.Timeout
}

// limit returns the effective limit for a configured value.
func limit(v int64) int64 {
	if v == 0 {
		return DefaultOutputLimit
	}
	return v
}

// class returns the declared class, mapping the zero value to ClassUnknown.
func (s *CommandSpec) class() Class {
	if s.Class == "" {
		return ClassUnknown
	}
	return s.Class
}

// validate checks the spec's shape; messages never echo values.
func (s *CommandSpec) validate() error {
	bad := func(msg string) error { return wire.Errorf(CodeInvalidSpec, "%s", msg) }
	switch {
	case s == nil:
		return bad("no spec")
	case s.Purpose == "" || len(s.Purpose) > maxPurposeLen || !printable(s.Purpose):
		return bad("purpose must be 1 to 200 printable bytes")
	case s.Timeout != 0 && (s.Timeout < MinTimeout || s.Timeout > MaxTimeout):
		return bad("timeout must be 0 (30 s) or between 1 s and 300 s")
	case s.StdoutLimit < 0 || s.StdoutLimit > MaxOutputLimit ||
		s.StderrLimit < 0 || s.StderrLimit > MaxOutputLimit:
		return bad("output limits must be 0 (1 MiB) or between 1 byte and 64 MiB")
	case len(s.Args) > maxArgs:
		return bad("too many arguments")
	case len(s.Env) > maxEnv:
		return bad("too many environment entries")
	}
	switch s.class() {
	case ClassReadOnly, ClassMutating, ClassForbidden, ClassUnknown:
	default:
		return bad("unknown classification")
	}
	if (s.class() == ClassMutating) != (s.Mutation != "") {
		return bad("a mutation kind is required for, and only for, mutating commands")
	}
	if s.Mutation != "" && !validKind(s.Mutation) {
		return bad("mutation kind must match [a-z0-9._-]{1,64}")
	}
	total := len(s.Executable)
	for _, a := range s.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return bad("an argument contains NUL")
		}
		total += len(a) + 1
	}
	seen := make(map[string]bool, len(s.Env))
	for i, kv := range s.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.IndexByte(kv, 0) >= 0 {
			return wire.Errorf(CodeInvalidSpec, "environment entry %d is not KEY=value", i)
		}
		if seen[k] {
			return wire.Errorf(CodeInvalidSpec, "environment entry %d repeats a key", i)
		}
		seen[k] = true
		total += len(kv) + 1
	}
	if total > maxArgvBytes {
		return bad("arguments and environment exceed 128 KiB")
	}
	return nil
}

// printable reports whether s is printable ASCII.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// validKind reports whether k matches [a-z0-9._-]{1,64}.
func validKind(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// envKeys returns the keys of env, in order.
func envKeys(env []string) []string {
	keys := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		keys = append(keys, k)
	}
	return keys
}
