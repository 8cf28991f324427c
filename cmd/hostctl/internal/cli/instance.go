package cli

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/daemon"
)

// instanceCmd is `hostctl instance ...`: agent instances in supervisord.
func instanceCmd(g *globals) *ffcli.Command {
	return &ffcli.Command{
		Name:       "instance",
		ShortUsage: "hostctl instance <provision|list|status|stop|destroy|logs|attach|signal> ...",
		ShortHelp:  "provision and manage agent instances (supervisord)",
		LongHelp:   "Instances are agent processes supervisord runs on the host, each under its own holder. See docs/supervisord.md.",
		FlagSet:    g.newFlagSet("instance"),
		Subcommands: []*ffcli.Command{instanceProvisionCmd(g), instanceListCmd(g), instanceStatusCmd(g), instanceStopCmd(g),
			instanceDestroyCmd(g), instanceLogsCmd(g), instanceAttachCmd(g), instanceSignalCmd(g)},
		Exec: groupExec("instance"),
	}
}

// supervisord returns a typed client for supervisord; close with done.
func (g *globals) supervisord() (c *api.Client, done func(), err error) {
	rc, err := g.client(daemon.NameSupervisord)
	if err != nil {
		return nil, nil, err
	}
	return api.NewClient(rc), func() { rc.Close() }, nil
}

// kvFlag collects repeatable K=V flags.
type kvFlag map[string]string

func (k kvFlag) String() string { return fmt.Sprint(map[string]string(k)) }

func (k kvFlag) Set(v string) error {
	key, val, ok := strings.Cut(v, "=")
	if !ok || key == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	k[key] = val
	return nil
}

// parseCreds parses --credential NAME=ENV[,target=T][,destination=O]
// values: the credential, the environment variable that holds its
// placeholder, and, for a credential with several targets or
// destinations, which one this lease is for (omitted: the credential's
// only one; supervisord and secretd refuse an ambiguous one with
// lease.ambiguous). A ',' that does not start another option belongs to
// the value before it (a body pointer or query parameter may hold one).
// Errors are usage errors.
func parseCreds(vals []string) ([]api.CredentialSpec, error) {
	var out []api.CredentialSpec
	for _, v := range vals {
		bad := func(why string) error {
			return usageError{fmt.Sprintf("--credential wants NAME=ENV[,target=T][,destination=O] (%s), got %q", why, v)}
		}
		head, rest, _ := strings.Cut(v, ",")
		name, env, ok := strings.Cut(head, "=")
		if !ok || name == "" || env == "" {
			return nil, bad("credential name, environment variable")
		}
		spec := api.CredentialSpec{Credential: name, Env: env}
		var cur *string
		seen := map[string]bool{}
		for rest != "" {
			var part string
			part, rest, _ = strings.Cut(rest, ",")
			key, val, _ := strings.Cut(part, "=")
			switch {
			case (key == "target" || key == "destination") && !seen[key]:
				seen[key] = true
				cur = &spec.Target
				if key == "destination" {
					cur = &spec.Destination
				}
				*cur = val
			case key == "target" || key == "destination":
				return nil, bad(key + " given twice")
			case cur != nil:
				*cur += "," + part
			default:
				return nil, bad("unknown option " + strconv.Quote(key))
			}
		}
		if seen["target"] && spec.Target == "" || seen["destination"] && spec.Destination == "" {
			return nil, bad("empty target or destination")
		}
		out = append(out, spec)
	}
	return out, nil
}

func instanceProvisionCmd(g *globals) *ffcli.Command {
	fs := g.newFlagSet("instance provision")
	name := fs.String("name", "", "instance name")
	id := fs.String("id", "", "instance id (a UUID; default: generated)")
	pty := fs.Bool("pty", false, "give the agent a terminal (attach with `hostctl instance attach`)")
	rows := fs.Uint("rows", 0, "terminal rows (with --pty; default 24)")
	cols := fs.Uint("cols", 0, "terminal columns (with --pty; default 80)")
	network := fs.String("network", "", "network mode: isolated (its own network and mount namespaces, egress only through egressd) or host (policy holds only for programs that honour the proxy variables); default: supervisord's -default-network, isolated unless changed")
	workDir := fs.String("working-dir", "", "working directory (default: supervisord's)")
	noStart := fs.Bool("no-start", false, "create the instance without starting it")
	stopTimeout := fs.Duration("stop-timeout", 0, "time between SIGTERM and the kill on stop (1s..300s; default 10s)")
	runtime := fs.String("runtime", "", "host (default) or container (through the containerization-helper; needs --image and --digest)")
	image := fs.String("image", "", "runtime container: OCI image layout directory")
	digest := fs.String("digest", "", "runtime container: the image's manifest digest (sha256:...)")
	var creds, allow stringsFlag
	env := kvFlag{}
	fs.Var(&creds, "credential", "credential NAME given to the agent (as a placeholder) under environment variable ENV: NAME=ENV[,target=T][,destination=O] (repeatable; target and destination pick one of a credential's several)")
	fs.Var(&allow, "allow", "origin the agent may reach through egressd, e.g. https://api.example.com (repeatable)")
	fs.Var(env, "env", "environment variable K=V for the agent (repeatable)")
	return &ffcli.Command{
		Name:       "provision",
		ShortUsage: "hostctl instance provision [--name N] [--pty [--rows R --cols C]] [--credential NAME=ENV[,target=T][,destination=O]]... [--network isolated|host] [--allow ORIGIN]... [--working-dir D] [--env K=V]... [--id UUID] [--runtime container --image DIR --digest sha256:...] -- CMD ARGS...",
		ShortHelp:  "create and start an instance",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) == 0 {
				return usageError{"instance provision needs a command after --"}
			}
			specs, err := parseCreds(creds)
			if err != nil {
				return err
			}
			if *rows > 65535 || *cols > 65535 {
				return usageError{"--rows and --cols must be at most 65535"}
			}
			req := &api.ProvisionRequest{Command: args, Credentials: specs, InstanceID: *id, Name: *name, PTY: *pty,
				PTYRows: uint16(*rows), PTYCols: uint16(*cols), Start: !*noStart, WorkingDir: *workDir,
				StopTimeoutMS: stopTimeout.Milliseconds()}
			if len(env) > 0 {
				req.Env = env
			}
			if *network != "" || len(allow) > 0 {
				req.Network = &api.Network{Mode: *network, Allow: allow}
			}
			if req.Runtime = *runtime; *image != "" || *digest != "" {
				if *image == "" || *digest == "" {
					return usageError{"--image and --digest go together"}
				}
				abs, err := filepath.Abs(*image)
				if err != nil {
					return usageError{err.Error()}
				}
				req.Image = &api.ImageRef{Layout: abs, ManifestDigest: *digest}
			}
			c, done, err := g.supervisord()
			if err != nil {
				return err
			}
			defer done()
			in, err := c.Provision(ctx, req)
			if err != nil {
				return err
			}
			return g.printInstance(in)
		},
	}
}

// idCmd is a command that takes one instance ID and calls fn.
func idCmd(g *globals, name, short string, fn func(ctx context.Context, c *api.Client, id string) error) *ffcli.Command {
	return idCmdDial(g, name, short, g.supervisord, fn)
}

// idCmdDial is idCmd with the client from dial.
func idCmdDial(g *globals, name, short string, dial func() (*api.Client, func(), error), fn func(ctx context.Context, c *api.Client, id string) error) *ffcli.Command {
	fs := g.newFlagSet("instance " + name)
	return &ffcli.Command{
		Name:       name,
		ShortUsage: "hostctl instance " + name + " ID [--json]",
		ShortHelp:  short,
		FlagSet:    fs,
		Exec:       idExec(fs, "instance "+name, "an instance ID", dial, fn),
	}
}

// idExec is the Exec of a command that takes one id (flags may follow
// it): it dials with dial and calls fn.
func idExec[C any](fs *flag.FlagSet, cmd, what string, dial func() (C, func(), error), fn func(ctx context.Context, c C, id string) error) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		id, err := oneArg(fs, args, cmd, what)
		if err != nil {
			return err
		}
		c, done, err := dial()
		if err != nil {
			return err
		}
		defer done()
		return fn(ctx, c, id)
	}
}

// stopDial is supervisord's client for stop and destroy: a stop waits the
// instance's stop timeout (up to 300 s) before it kills, so the call must
// outlive it, or the answer (and supervisord's audit "after" record) is
// cut off.
func (g *globals) stopDial() (*api.Client, func(), error) {
	g.timeout = max(g.timeout, stopCallTimeout)
	return g.supervisord()
}

// stopCallTimeout is the least deadline of a stop or destroy call: the
// longest stop timeout an instance may have, plus the kill and margin.
const stopCallTimeout = api.MaxStopTimeoutMS*time.Millisecond + 30*time.Second

// oneArg takes a single positional argument; flags may follow it.
func oneArg(fs *flag.FlagSet, args []string, cmd, what string) (string, error) {
	if len(args) == 0 {
		return "", usageError{cmd + " needs " + what}
	}
	if err := fs.Parse(args[1:]); err != nil {
		return "", usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return "", usageError{cmd + " takes " + what + " only"}
	}
	return args[0], nil
}

func instanceStatusCmd(g *globals) *ffcli.Command {
	return idCmd(g, "status", "show one instance", func(ctx context.Context, c *api.Client, id string) error {
		in, err := c.Status(ctx, id)
		if err != nil {
			return err
		}
		return g.printInstance(in)
	})
}

func instanceStopCmd(g *globals) *ffcli.Command {
	return idCmdDial(g, "stop", "stop an instance's whole process tree (SIGTERM, then kill)", g.stopDial, func(ctx context.Context, c *api.Client, id string) error {
		in, err := c.Stop(ctx, id)
		if err != nil {
			return err
		}
		return g.printInstance(in)
	})
}

func instanceDestroyCmd(g *globals) *ffcli.Command {
	return idCmdDial(g, "destroy", "stop an instance and remove its directory", g.stopDial, func(ctx context.Context, c *api.Client, id string) error {
		if err := c.Destroy(ctx, id); err != nil {
			return err
		}
		if g.json {
			return writeJSON(g.stdout, map[string]string{"instance_id": id, "state": "destroyed"})
		}
		_, err := fmt.Fprintf(g.stdout, "destroyed %s\n", id)
		return err
	})
}

func instanceListCmd(g *globals) *ffcli.Command {
	return &ffcli.Command{
		Name:       "list",
		ShortUsage: "hostctl instance list [--json]",
		ShortHelp:  "list instances",
		FlagSet:    g.newFlagSet("instance list"),
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageError{"instance list takes no arguments"}
			}
			c, done, err := g.supervisord()
			if err != nil {
				return err
			}
			defer done()
			l, err := c.List(ctx)
			if err != nil {
				return err
			}
			if g.json {
				out := struct {
					Instances []instanceJSON `json:"instances"`
					Warning   string         `json:"warning,omitempty"`
				}{Instances: []instanceJSON{}, Warning: l.Warning}
				for i := range l.Instances {
					out.Instances = append(out.Instances, toInstanceJSON(&l.Instances[i]))
				}
				return writeJSON(g.stdout, out)
			}
			rows := make([][]string, 0, len(l.Instances))
			for _, in := range l.Instances {
				rows = append(rows, []string{in.InstanceID, in.Name, in.State, pidStr(in.PID), in.Network,
					strings.Join(in.Command, " "), msTime(in.CreatedAt)})
			}
			if err := table(g.stdout, []string{"ID", "NAME", "STATE", "PID", "NETWORK", "COMMAND", "CREATED"}, rows); err != nil {
				return err
			}
			if l.Warning != "" {
				fmt.Fprintf(g.stderr, "warning: %s\n", l.Warning)
			}
			for _, in := range l.Instances {
				if in.Network == api.NetworkHost && strings.Contains(in.Warning, api.HostNetworkWarning) {
					fmt.Fprintf(g.stderr, "warning: %s: %s\n", in.InstanceID, api.HostNetworkWarning)
				}
			}
			return nil
		},
	}
}

func instanceSignalCmd(g *globals) *ffcli.Command {
	fs := g.newFlagSet("instance signal")
	return &ffcli.Command{
		Name:       "signal",
		ShortUsage: "hostctl instance signal ID SIG [--json]",
		ShortHelp:  "send a signal (TERM, HUP, SIGINT, 9...) to an instance's process group",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) < 2 {
				return usageError{"instance signal needs an instance ID and a signal"}
			}
			if err := fs.Parse(args[2:]); err != nil {
				return usageError{err.Error()}
			}
			if fs.NArg() > 0 {
				return usageError{"instance signal takes an instance ID and a signal only"}
			}
			c, done, err := g.supervisord()
			if err != nil {
				return err
			}
			defer done()
			if err := c.Signal(ctx, args[0], args[1]); err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, map[string]string{"instance_id": args[0], "signal": args[1]})
			}
			_, err = fmt.Fprintf(g.stdout, "sent %s to %s\n", args[1], args[0])
			return err
		},
	}
}

func pidStr(pid int64) string {
	if pid == 0 {
		return "-"
	}
	return strconv.FormatInt(pid, 10)
}
