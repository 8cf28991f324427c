package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/peterbourgon/ff/v3/ffcli"
	"hostkit.dev/lib/daemon"
)

// helpTopics are the texts of `hostctl help TOPIC`; layout also prints the
// paths this invocation resolves.
var helpTopics = map[string]string{
	"exit-codes": `hostctl exit codes (every command)

  0  ok           the command did what it says; also an explicit help request
                  (-h, -help or --help after any command: the usage on stderr)
  1  failure      anything else: a daemon refused the request, an audit chain is
                  broken (audit verify), a file could not be read
  2  usage        a bad command line: unknown command or flag, missing or extra
                  arguments, a missing command (bare hostctl or hostctl secret;
                  the usage is printed)
  3  not found    the named thing does not exist: a *.not_found or *.unknown code
                  (credential.not_found, ...), no audit log (audit tail/verify)
  4  denied       peer.denied (your user holds no role for that op), or a
                  permission error reading a file (the system audit logs are root's)
  5  unavailable  a daemon is not reachable (daemon.unavailable), or doctor found an
                  expected daemon down
125  attach       instance attach failed after the session began: stream.slow_client
                  (it fell 4 MiB behind the output at the holder, at supervisord or
                  on hostctl's own stdout; the instance runs on), an error frame, a
                  connection cut inside a frame or closed without an exit, detach or
                  error frame, a frame that does not decode. A refusal before the
                  session began (instance.not_found, ...) keeps its code above

Errors print "hostctl: <code>: <message>" on stderr, plus a "hint:" line where
one helps.
`,
	"roles": `hostkit roles (docs/design.md, "Peers and roles")

Every daemon reads the peer's UID from the kernel (SO_PEERCRED) on each
connection and allows each op to some roles; each role is a list of users
(names or UIDs) set by the daemon's -<role>-users flags (env <PREFIX>_<ROLE>_USERS,
or its config file). By default, in a same-user deployment, the daemon's own
user holds every role. Anything else gets peer.denied (exit 4) and an audit
record. Agent UIDs are never in any role.

  daemon       op                                            roles
  every        health                                        any role of that daemon
  secretd      credential.put, credential.delete,            admin
               credential.list
  secretd      lease.stage, lease.revoke, lease.lookup       stager (supervisord's user)
  secretd      lease.list                                    admin, stager
  secretd      lease.consume                                 consumer (egressd's user)
  egressd      bundle.register, bundle.drop, egress.info     stager (supervisord's user)
  egressd      egress.request                                client (local services)
  egressd      egress.stats                                  admin, stager
  supervisord  instance.*                                    admin
  helper       all                                           client (admins, supervisord's
                                                             user) + executable allowlist

The systemd units (systemd/) set: secretd admin=root stager=root
consumer=hostkit-egressd; egressd stager=root client=root admin=root;
supervisord admin=root; helper client=root. To let alice administer without
root, add her to each daemon's admin users (systemctl edit, e.g.
Environment=SECRETD_ADMIN_USERS=root,alice) and to the hostkit group, which may
reach the group sockets. See docs/operators.md and docs/threat-model.md.
`,
	"layout": `hostkit layout (docs/design.md, "Paths")

                 Linux system (root, or -layout system)   Linux user         macOS
  sockets        /run/hostkit/<name>/api.sock              $XDG_RUNTIME_DIR/  $TMPDIR/io.hostkit/
                                                           hostkit/<name>/    <name>/api.sock
  public files   /run/hostkit/public/                      .../hostkit/public .../io.hostkit/public
  state          /var/lib/hostkit/<name>/                  $XDG_STATE_HOME/   ~/Library/Application
                                                           hostkit/<name>/    Support/io.hostkit/<name>/
  audit and logs /var/log/hostkit/<name>/                  $XDG_STATE_HOME/   ~/Library/Logs/
                                                           hostkit/log/<name>/ io.hostkit/<name>/
  config         /etc/hostkit/<binary>.conf                flags / env        flags / env

With -root R: sockets R/run/<name>/api.sock, public files R/run/public/, state
R/state/<name>/, audit and logs R/log/<name>/, config R/etc/<binary>.conf.
<name> is secretd, egressd, supervisord or helper. The audit log of a daemon is
<log>/<name>/audit.jsonl, rotated to audit.jsonl.1 (newest) ... audit.jsonl.N;
hostctl audit reads those files directly, so it works while a daemon is down.
`,
}

// topicSummaries are the one-line descriptions of helpTopics in the
// overview (`hostctl help`, `hostctl -h`); a test keeps the keys equal.
var topicSummaries = map[string]string{
	"exit-codes": "what each exit code (0-5, 125) means",
	"layout":     "where sockets, state and logs live; the paths this invocation resolves",
	"roles":      "which users may call which op of each daemon",
}

// overviewUsage is the root command's usage (`hostctl -h`, `hostctl help`,
// bare `hostctl`): ffcli's default (description, usage, one line per
// command, global flags) followed by the help topics.
func overviewUsage(c *ffcli.Command) string {
	var b strings.Builder
	b.WriteString(ffcli.DefaultUsageFunc(c))
	b.WriteString("\nTOPICS\n")
	tw := tabwriter.NewWriter(&b, 0, 2, 2, ' ', 0)
	for _, n := range topicNames() {
		fmt.Fprintf(tw, "  %s\t%s\n", n, topicSummaries[n])
	}
	tw.Flush()
	b.WriteString("\n`hostctl help TOPIC` explains a topic; `hostctl help COMMAND...` or\n`hostctl COMMAND... -h` prints a command's usage and flags.\n")
	return b.String()
}

// helpCmd is `hostctl help [TOPIC | COMMAND...]`.
func helpCmd(g *globals) *ffcli.Command {
	return &ffcli.Command{
		Name:       "help",
		ShortUsage: "hostctl help [TOPIC | COMMAND...]",
		ShortHelp:  "explain a topic (" + strings.Join(topicNames(), ", ") + ") or a command",
		FlagSet:    g.newFlagSet("help"),
		Exec: func(ctx context.Context, args []string) error {
			if len(args) == 0 {
				return g.helpIndex(ctx)
			}
			if text, ok := helpTopics[args[0]]; ok && len(args) == 1 {
				if _, err := io.WriteString(g.stdout, text); err != nil {
					return err
				}
				if args[0] == "layout" {
					return g.printLayout()
				}
				return nil
			}
			// A command: its own usage, on stdout.
			if !isCommand(ctx, args) {
				return usageError{fmt.Sprintf("help: no topic or command %q (topics: %s)", strings.Join(args, " "), strings.Join(topicNames(), ", "))}
			}
			var usage bytes.Buffer
			Run(ctx, append(append([]string(nil), args...), "-h"), bytes.NewReader(nil), io.Discard, &usage)
			_, err := io.Copy(g.stdout, &usage)
			return err
		},
	}
}

// isCommand reports whether path names one of hostctl's commands.
func isCommand(ctx context.Context, path []string) bool {
	tree, err := commandTree(ctx, nil)
	if err != nil {
		return false
	}
	for _, n := range tree {
		if slices.Equal(n.path, path) {
			return true
		}
	}
	return false
}

func topicNames() []string {
	names := make([]string, 0, len(helpTopics))
	for n := range helpTopics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// helpIndex prints the overview (the root usage: commands and topics) on
// stdout.
func (g *globals) helpIndex(ctx context.Context) error {
	var usage bytes.Buffer
	Run(ctx, []string{"-h"}, bytes.NewReader(nil), io.Discard, &usage)
	_, err := io.Copy(g.stdout, &usage)
	return err
}

// printLayout prints the paths this invocation (its -root, euid and
// environment) resolves.
func (g *globals) printLayout() error {
	l, err := g.layout()
	if err != nil {
		_, werr := fmt.Fprintf(g.stdout, "\nThis invocation resolves no layout: %v\n", err)
		return werr
	}
	var b strings.Builder
	how := "default paths for this user"
	if g.root != "" {
		how = "-root " + g.root
	}
	fmt.Fprintf(&b, "\nThis invocation (%s):\n", how)
	rows := [][]string{}
	for _, n := range daemon.Names {
		rows = append(rows, []string{n, l.Socket(n), l.StateDir(n), l.LogDir(n)})
	}
	if _, err := io.WriteString(g.stdout, b.String()); err != nil {
		return err
	}
	if err := table(g.stdout, []string{"DAEMON", "SOCKET", "STATE", "AUDIT AND LOGS"}, rows); err != nil {
		return err
	}
	_, err = fmt.Fprintf(g.stdout, "public files: %s\n", l.Public)
	return err
}
