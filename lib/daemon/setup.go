package daemon

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/rpc"
)

// Env is what Setup hands a daemon's run function: its parsed common flags,
// layout, logger, scrubber, start time and epoch.
type Env struct {
	Common   Common           // the flags every daemon takes
	Layout   Layout           // the resolved run, state, log and public directories
	Logger   *slog.Logger     // JSON to stderr through the redacting handler
	Scrubber *redact.Scrubber // the logger's scrubber: register held values with it
	Epoch    string           // 16 lowercase hex, new at every process start (health's epoch)
	Started  time.Time        // when Setup ran, with its monotonic reading (health's uptime_ms)
}

// Setup parses args into fs (with the common flags added), resolves the
// layout, and builds the redacting logger on stderr and a fresh epoch.
// binary is the program name ("secretd"), daemonName its directory name
// ("secretd", or "helper" for containerization-helper), envPrefix its
// environment prefix ("SECRETD"). ErrVersionShown and flag errors are
// returned as they are.
func Setup(fs *flag.FlagSet, args []string, binary, daemonName, envPrefix string, stdout, stderr io.Writer) (*Env, error) {
	env := &Env{}
	env.Common.Register(fs)
	fs.SetOutput(stderr)
	if err := Parse(fs, &env.Common, args, binary, envPrefix, stdout); err != nil {
		return nil, err
	}
	level, err := env.Common.Level()
	if err != nil {
		return nil, err
	}
	if env.Layout, err = env.Common.ResolveLayout(); err != nil {
		return nil, err
	}
	env.Scrubber = redact.NewScrubber()
	env.Logger = NewLogger(stderr, level, env.Scrubber, daemonName)
	if env.Epoch, err = NewEpoch(); err != nil {
		return nil, err
	}
	env.Started = time.Now()
	return env, nil
}

// RoleFlags registers -<role>-users flags (comma-separated user names or
// UIDs; empty = the daemon's own user) for each role and returns a function
// that resolves them once flags are parsed.
func RoleFlags(fs *flag.FlagSet, roles ...rpc.Role) func() (rpc.Roles, error) {
	lists := make(map[rpc.Role]*StringList, len(roles))
	for _, r := range roles {
		l := &StringList{}
		lists[r] = l
		fs.Var(l, string(r)+"-users", fmt.Sprintf("users (names or uids, comma-separated) holding the %s role; default: this daemon's own user", r))
	}
	return func() (rpc.Roles, error) {
		out := rpc.Roles{}
		for r, l := range lists {
			uids, err := rpc.ResolveUsers(*l, uint32(os.Geteuid()))
			if err != nil {
				return nil, err
			}
			out[r] = uids
		}
		return out, nil
	}
}
