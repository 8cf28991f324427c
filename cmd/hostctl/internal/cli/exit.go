package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"hostkit.dev/lib/wire"
)

// Exit codes (documented in docs/operators.md and `hostctl help exit-codes`).
const (
	ExitOK          = 0 // success
	ExitFailure     = 1 // any other failure
	ExitUsage       = 2 // bad command line
	ExitNotFound    = 3 // the named thing does not exist
	ExitDenied      = 4 // peer.denied or a permission error
	ExitUnavailable = 5 // a daemon is not reachable or not healthy
	// ExitAttach: an attach session, once accepted, failed in hostctl's
	// hands: stream.slow_client (at any hop, hostctl's own standard output
	// included), an error frame, a connection cut mid-frame or closed
	// without an end, a frame that does not decode. As 125 in env(1) and
	// container CLIs: the tool failed, not the program it runs.
	ExitAttach = 125
)

// sessionError is a failure of an attach session after the server
// accepted it (ExitAttach). err is its cause: a *wire.Error for the stream
// (printed as its code and message), or a local failure (stdout).
type sessionError struct{ err error }

func (e sessionError) Error() string { return e.err.Error() }

// Unwrap returns the wire error, which printError prints.
func (e sessionError) Unwrap() error { return e.err }

// usageError marks a command-line mistake (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// exitError carries an explicit exit code for a result that is not a
// single typed error (e.g. doctor found an unreachable daemon).
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// bareGroupError is a group command (hostctl, hostctl container, ...) run
// without a subcommand: a usage error (exit 2). It wraps flag.ErrHelp so
// that ffcli prints the group's usage, which lists its commands.
type bareGroupError struct{ path string }

func (e bareGroupError) Error() string { return e.path + ": missing command" }

// Unwrap returns flag.ErrHelp, which makes ffcli print the usage.
func (e bareGroupError) Unwrap() error { return flag.ErrHelp }

// exitCode maps an error to the documented exit codes by its class. An
// explicit help request (-h, -help, --help: flag.ErrHelp) is a success.
func exitCode(err error) int {
	var ue usageError
	var ee exitError
	var be bareGroupError
	var se sessionError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &se):
		return ExitAttach
	case errors.As(err, &ue), errors.As(err, &be):
		return ExitUsage
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	}
	code := wire.CodeOf(err)
	switch {
	case code == wire.CodePeerDenied:
		return ExitDenied
	case code == wire.CodeUnavailable:
		return ExitUnavailable
	case strings.HasSuffix(code, ".not_found") || strings.HasSuffix(code, ".unknown"):
		return ExitNotFound
	}
	return ExitFailure
}

// hints gives a one-line hint for codes where one helps.
var hints = map[string]string{
	wire.CodeUnavailable: "is the daemon running? check with `hostctl doctor` (and -root)",
	wire.CodePeerDenied:  "your user holds no role for this op (see the daemon's -<role>-users flags), or, for the containerization-helper, this program is not on its executable allowlist (-allow-exe, -allow-exe-sha256)",
}

// printError writes `hostctl: <code>: <message>` and a hint line.
func printError(w io.Writer, err error) {
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(w, "hostctl: usage: %s\n", ue.msg)
		return
	}
	var ee exitError
	if errors.As(err, &ee) {
		fmt.Fprintf(w, "hostctl: %s\n", ee.msg)
		return
	}
	var we *wire.Error
	if errors.As(err, &we) {
		fmt.Fprintf(w, "hostctl: %s: %s\n", we.Code, we.Msg)
		if h, ok := hints[we.Code]; ok {
			fmt.Fprintf(w, "hint: %s\n", h)
		}
		return
	}
	fmt.Fprintf(w, "hostctl: %v\n", err)
}

// groupExec is the Exec of a command that only groups others (hostctl,
// hostctl container, ...): alone it prints its usage (bareGroupError, exit
// 2); with a word ffcli did not match, it names that word.
func groupExec(group string) func(context.Context, []string) error {
	return func(_ context.Context, args []string) error {
		path := strings.TrimSpace("hostctl " + group)
		if len(args) == 0 {
			return bareGroupError{path}
		}
		return usageError{fmt.Sprintf("unknown command %q for %s (%s -h lists them)", args[0], path, path)}
	}
}
