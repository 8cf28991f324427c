package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"
	api "hostkit.dev/lib/api/helperapi"
	svapi "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/daemon"
)

// containerCmd is `hostctl container ...`: one subcommand per op of the
// containerization-helper (docs/containerization-helper.md). Mutations are
// plan-confirmed: `plan` prints a plan hash, and create, start, restart and
// delete carry it out with an idempotency key.
func containerCmd(g *globals) *ffcli.Command {
	return &ffcli.Command{
		Name:       "container",
		ShortUsage: "hostctl container <negotiate|observe|images|plan|create|start|restart|delete|logs|usage> ...",
		ShortHelp:  "drive containers through the containerization-helper",
		LongHelp: "The helper is the only process that runs the OCI runtime. A mutation is two steps:\n" +
			"`hostctl container plan --kind create --instance ID --image DIR --digest sha256:... -- CMD...`\n" +
			"prints a plan hash and a container id; `hostctl container create --plan HASH --instance ID --container CID` carries it out.\n" +
			"Images: docs/containerization-helper.md, \"Quick start\", builds one with umoci.",
		FlagSet: g.newFlagSet("container"),
		Subcommands: []*ffcli.Command{containerNegotiateCmd(g), containerObserveCmd(g), containerImagesCmd(g),
			containerPlanCmd(g), containerMutateCmd(g, api.KindCreate), containerMutateCmd(g, api.KindStart),
			containerMutateCmd(g, api.KindRestart), containerMutateCmd(g, api.KindDelete),
			containerLogsCmd(g), containerUsageCmd(g)},
		Exec: groupExec("container"),
	}
}

// helper returns a typed client for the containerization-helper; close
// with done.
func (g *globals) helper() (c *api.Client, done func(), err error) {
	rc, err := g.client(daemon.NameHelper)
	if err != nil {
		return nil, nil, err
	}
	return api.NewClient(rc), func() { rc.Close() }, nil
}

// ctxFlags are the mutation-context flags of plan and the mutations.
type ctxFlags struct {
	instance, project, capDigest *string
	fence                        *uint64
}

func addCtxFlags(fs *flag.FlagSet) ctxFlags {
	return ctxFlags{
		instance:  fs.String("instance", "", "owning instance id (a UUID; required)"),
		project:   fs.String("project", "", "the helper's project id (default: from runtime.negotiate)"),
		capDigest: fs.String("capability-digest", "", "capability digest planned against (default: from runtime.negotiate)"),
		fence:     fs.Uint64("fence", 1, "fence generation of the instance (≥ 1)"),
	}
}

// resolve fills the project id and capability digest from
// runtime.negotiate when they were not given.
func (f ctxFlags) resolve(ctx context.Context, c *api.Client) (api.Context, error) {
	if *f.instance == "" {
		return api.Context{}, usageError{"--instance is required"}
	}
	if _, err := svapi.CanonicalID(*f.instance); err != nil || *f.instance != strings.ToLower(*f.instance) {
		return api.Context{}, usageError{"--instance must be a lowercase UUID (e.g. from /proc/sys/kernel/random/uuid)"}
	}
	out := api.Context{InstanceID: *f.instance, ProjectID: *f.project, CapabilityDigest: *f.capDigest, Fence: *f.fence}
	if out.ProjectID == "" || out.CapabilityDigest == "" {
		n, err := c.Negotiate(ctx, nil)
		if err != nil {
			return api.Context{}, err
		}
		if out.ProjectID == "" {
			out.ProjectID = n.ProjectID
		}
		if out.CapabilityDigest == "" {
			out.CapabilityDigest = n.CapabilityDigest
		}
	}
	return out, nil
}

func containerNegotiateCmd(g *globals) *ffcli.Command {
	fs := g.newFlagSet("container negotiate")
	provider := fs.String("provider", "", "require this provider (runc or crun)")
	codec := fs.String("codec", "", "require this codec (e.g. runc-1.1)")
	return &ffcli.Command{
		Name:       "negotiate",
		ShortUsage: "hostctl container negotiate [--provider NAME] [--codec CODEC] [--json]",
		ShortHelp:  "the active runtime provider, its version, codec, capability snapshot and the project id",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageError{"container negotiate takes no arguments"}
			}
			c, done, err := g.helper()
			if err != nil {
				return err
			}
			defer done()
			out, err := c.Negotiate(ctx, &api.NegotiateRequest{Provider: *provider, Codec: *codec})
			if err != nil {
				return err
			}
			if g.json {
				return writeWireJSON(g.stdout, out)
			}
			return table(g.stdout, []string{"PROVIDER", "VERSION", "CODEC", "HOST_KIND", "WRAPPED", "CAPABILITIES", "CAPABILITY_DIGEST", "PROJECT"},
				[][]string{{out.Provider, out.Version, out.Codec, out.HostKind, strconv.FormatBool(out.Wrapped),
					strconv.Itoa(len(out.Capabilities)), out.CapabilityDigest, out.ProjectID}})
		},
	}
}

func containerObserveCmd(g *globals) *ffcli.Command {
	return &ffcli.Command{
		Name:       "observe",
		ShortUsage: "hostctl container observe [--json]",
		ShortHelp:  "containers this project owns (and the ids of foreign ones, never touched)",
		FlagSet:    g.newFlagSet("container observe"),
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageError{"container observe takes no arguments"}
			}
			c, done, err := g.helper()
			if err != nil {
				return err
			}
			defer done()
			out, err := c.Observe(ctx)
			if err != nil {
				return err
			}
			if g.json {
				return writeWireJSON(g.stdout, out)
			}
			rows := make([][]string, 0, len(out.Containers)+len(out.Foreign))
			for _, ct := range out.Containers {
				rows = append(rows, []string{ct.ContainerID, ct.InstanceID, ct.Status, ct.Phase, strconv.FormatInt(ct.Pid, 10),
					strconv.FormatUint(ct.Fence, 10), strconv.FormatBool(ct.Orphan)})
			}
			for _, id := range out.Foreign {
				rows = append(rows, []string{id, "-", "foreign", "-", "-", "-", "-"})
			}
			return table(g.stdout, []string{"CONTAINER", "INSTANCE", "STATUS", "PHASE", "PID", "FENCE", "ORPHAN"}, rows)
		},
	}
}

func containerImagesCmd(g *globals) *ffcli.Command {
	fs := g.newFlagSet("container images")
	layout := fs.String("image", "", "OCI image layout directory (required)")
	digest := fs.String("digest", "", "manifest digest (sha256:...; required when the layout holds several)")
	return &ffcli.Command{
		Name:       "images",
		ShortUsage: "hostctl container images --image DIR [--digest sha256:...] [--json]",
		ShortHelp:  "verify a local OCI image layout blob by blob and print its evidence (image.evidence)",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 || *layout == "" {
				return usageError{"container images wants --image DIR and no arguments"}
			}
			abs, err := filepath.Abs(*layout)
			if err != nil {
				return usageError{err.Error()}
			}
			c, done, err := g.helper()
			if err != nil {
				return err
			}
			defer done()
			out, err := c.Evidence(ctx, api.ImageRef{Layout: abs, ManifestDigest: *digest})
			if err != nil {
				return err
			}
			if g.json {
				return writeWireJSON(g.stdout, out)
			}
			return table(g.stdout, []string{"MANIFEST", "CONFIG", "PLATFORM", "LAYERS", "BYTES"},
				[][]string{{out.ManifestDigest, out.ConfigDigest, out.OS + "/" + out.Architecture,
					strconv.Itoa(len(out.Layers)), strconv.FormatInt(out.TotalSize, 10)}})
		},
	}
}

func containerPlanCmd(g *globals) *ffcli.Command {
	fs := g.newFlagSet("container plan")
	kind := fs.String("kind", "", "create, start, restart or delete (required)")
	id := fs.String("container", "", "container id (start, restart, delete)")
	layout := fs.String("image", "", "create: OCI image layout directory")
	digest := fs.String("digest", "", "create: manifest digest (sha256:...)")
	force := fs.Bool("force", false, "delete: stop a running container first")
	stopTimeout := fs.Duration("stop-timeout", 0, "restart, forced delete: wait after SIGTERM before SIGKILL (default 10s)")
	var env stringsFlag
	fs.Var(&env, "env", "create: environment entry K=V for the container (repeatable)")
	cf := addCtxFlags(fs)
	return &ffcli.Command{
		Name:       "plan",
		ShortUsage: "hostctl container plan --kind KIND --instance ID [--container ID] [--image DIR --digest D] [--json] [-- CMD ARGS...]",
		ShortHelp:  "confirm a mutation: prints the plan hash (and, for create, the container id the helper chose)",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			switch {
			case *kind == "":
				return usageError{"--kind is required (create, start, restart or delete)"}
			case !slices.Contains(api.MutationKinds, *kind):
				return usageError{"--kind " + *kind + " is not one of create, start, restart, delete"}
			case *kind == api.KindCreate && (*layout == "" || *digest == ""):
				return usageError{"--kind create needs --image DIR and --digest sha256:..."}
			case *kind == api.KindCreate && len(args) == 0:
				return usageError{"--kind create needs the container's command after --"}
			case *kind != api.KindCreate && *id == "":
				return usageError{"--kind " + *kind + " needs --container ID"}
			}
			req := &api.PlanRequest{Kind: *kind, ContainerID: *id, Command: args, Env: env, Force: *force,
				StopTimeoutMS: stopTimeout.Milliseconds()}
			if *layout != "" {
				abs, err := filepath.Abs(*layout)
				if err != nil {
					return usageError{err.Error()}
				}
				req.Image = &api.ImageRef{Layout: abs, ManifestDigest: *digest}
			}
			c, done, err := g.helper()
			if err != nil {
				return err
			}
			defer done()
			if req.Context, err = cf.resolve(ctx, c); err != nil {
				return err
			}
			out, err := c.Plan(ctx, req)
			if err != nil {
				return err
			}
			if g.json {
				return writeWireJSON(g.stdout, out)
			}
			return table(g.stdout, []string{"KIND", "CONTAINER", "PLAN_HASH", "EXPIRES"},
				[][]string{{out.Kind, out.ContainerID, out.PlanHash, time.UnixMilli(out.ExpiresAt).UTC().Format(time.RFC3339)}})
		},
	}
}

// mutationCallTimeout is the least deadline of a container mutation call:
// the longest stop timeout a plan may carry, the SIGKILL wait (10 s) and a
// margin.
const mutationCallTimeout = api.MaxStopTimeoutMS*time.Millisecond + 30*time.Second

// containerMutateCmd is create, start, restart or delete: one plan carried
// out under an idempotency key (a fresh one unless --idem names one, so a
// retried command with the same --idem gets the same answer).
func containerMutateCmd(g *globals, kind string) *ffcli.Command {
	fs := g.newFlagSet("container " + kind)
	plan := fs.String("plan", "", "plan `HASH` from hostctl container plan (required)")
	id := fs.String("container", "", "container id (as planned)")
	idem := fs.String("idem", "", "idempotency key (default: a fresh random key)")
	cf := addCtxFlags(fs)
	return &ffcli.Command{
		Name:       kind,
		ShortUsage: "hostctl container " + kind + " --plan HASH --instance ID --container ID [--idem KEY] [--json]",
		ShortHelp:  "carry out a " + kind + " plan (container." + kind + ")",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 || *plan == "" || *id == "" {
				return usageError{"container " + kind + " wants --plan HASH, --container ID (both from `hostctl container plan`) and no arguments"}
			}
			key := *idem
			if key == "" {
				var b [16]byte
				_, _ = rand.Read(b[:])
				key = hex.EncodeToString(b[:])
			}
			// A forced delete or a restart waits the plan's stop timeout
			// (up to 300 s) before SIGKILL: the call must outlive it, or
			// the answer is cut off mid-stop. Create may unpack an image.
			g.timeout = max(g.timeout, mutationCallTimeout)
			c, done, err := g.helper()
			if err != nil {
				return err
			}
			defer done()
			req := &api.MutationRequest{ContainerID: *id, PlanHash: *plan}
			if req.Context, err = cf.resolve(ctx, c); err != nil {
				return err
			}
			if kind == api.KindDelete {
				out, err := c.Delete(ctx, key, req)
				if err != nil {
					return err
				}
				if g.json {
					return writeWireJSON(g.stdout, out)
				}
				// The console log's tail, read after the stop: its size here
				// (--json carries the bytes, base64).
				logTail := "-"
				if out.HasLogTail {
					logTail = strconv.Itoa(len(out.LogTail)) + " bytes"
					if out.LogTruncated {
						logTail += " (truncated)"
					}
				}
				return table(g.stdout, []string{"CONTAINER", "DELETED", "LOG_TAIL"}, [][]string{{out.ContainerID, strconv.FormatBool(out.Deleted), logTail}})
			}
			mutate := map[string]func(context.Context, string, *api.MutationRequest) (*api.Container, error){
				api.KindCreate: c.Create, api.KindStart: c.Start, api.KindRestart: c.Restart}[kind]
			out, err := mutate(ctx, key, req)
			if err != nil {
				return err
			}
			if g.json {
				return writeWireJSON(g.stdout, out)
			}
			return table(g.stdout, []string{"CONTAINER", "INSTANCE", "STATUS", "PHASE", "PID"},
				[][]string{{out.ContainerID, out.InstanceID, out.Status, out.Phase, strconv.FormatInt(out.Pid, 10)}})
		},
	}
}

// containerIDCmd is a command that takes one container id (flags may
// follow it) and calls fn with a helper client.
func containerIDCmd(g *globals, fs *flag.FlagSet, name, usage, short string, fn func(ctx context.Context, c *api.Client, id string) error) *ffcli.Command {
	return &ffcli.Command{
		Name:       name,
		ShortUsage: usage,
		ShortHelp:  short,
		FlagSet:    fs,
		Exec:       idExec(fs, "container "+name, "a container id", g.helper, fn),
	}
}

func containerLogsCmd(g *globals) *ffcli.Command {
	fs := g.newFlagSet("container logs")
	maxBytes := fs.Int64("max-bytes", 0, fmt.Sprintf("tail size in bytes (default %d, at most %d)", api.DefaultLogBytes, api.MaxLogBytes))
	return containerIDCmd(g, fs, "logs", "hostctl container logs [--max-bytes N] CONTAINER",
		"the tail of an owned container's console log (stdout and stderr)",
		func(ctx context.Context, c *api.Client, id string) error {
			out, err := c.Logs(ctx, &api.LogsRequest{ContainerID: id, MaxBytes: *maxBytes})
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, map[string]any{"data": string(out.Data), "size": out.Size, "truncated": out.Truncated})
			}
			_, err = g.stdout.Write(out.Data)
			return err
		})
}

func containerUsageCmd(g *globals) *ffcli.Command {
	return containerIDCmd(g, g.newFlagSet("container usage"), "usage", "hostctl container usage CONTAINER [--json]",
		"one resource-usage sample of an owned container (CPU ns, memory bytes, pids)",
		func(ctx context.Context, c *api.Client, id string) error {
			out, err := c.Usage(ctx, id)
			if err != nil {
				return err
			}
			if g.json {
				return writeWireJSON(g.stdout, out)
			}
			return table(g.stdout, []string{"CONTAINER", "STATUS", "CPU_NS", "MEMORY_BYTES", "PIDS"},
				[][]string{{out.ContainerID, out.Status, strconv.FormatUint(out.CPUTotalNS, 10),
					strconv.FormatUint(out.MemoryBytes, 10), strconv.FormatUint(out.Pids, 10)}})
		})
}
