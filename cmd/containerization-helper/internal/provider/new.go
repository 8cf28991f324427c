package provider

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/moby/sys/mountinfo"
	"hostkit.dev/cmd/containerization-helper/internal/codec"
	"hostkit.dev/lib/procexec"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

// Runtime names New accepts.
const (
	Runc = "runc"
	Crun = "crun"
)

// Config configures one provider.
type Config struct {
	// Root is the helper-private --root of the runtime's state (absolute,
	// clean). New creates it 0700 if missing and refuses one that is not a
	// 0700 directory of this user, or lies under a directory others can
	// write (see ensurePrivateDir). Always passed, because even a
	// read-only `list` creates the runtime's default root otherwise (and
	// another tool's containers, podman's for one, live in runc's
	// default root).
	Root string
	// LogDir holds the per-command --log files and create's pid files
	// (absolute, clean, same checks as Root); it must not be inside Root,
	// where the runtime would take entries for containers.
	LogDir string
	// Binary is the runtime executable: "" looks the name up in
	// procexec.SearchPath; otherwise an absolute path. procexec.Resolve
	// checks it (root-owned, not group/world writable).
	Binary string
	// Timeout bounds each runtime command; 0 means procexec's default
	// (30 s), else 1 s to 300 s.
	Timeout time.Duration
	// Logger receives procexec's canonical line per command and the
	// provider's own; nil discards. Use the redacting handler.
	Logger *slog.Logger
	// Scrubber, when set, removes registered secret values from argv,
	// messages and logs.
	Scrubber *redact.Scrubber
}

// cli is a RuntimeProvider over runc or crun.
type cli struct {
	name    string
	root    string
	logDir  string
	kind    string
	mounts  []cgroupMount
	t       tools
	timeout time.Duration
	runner  *procexec.Runner
	log     *slog.Logger
	scrub   *redact.Scrubber

	mu    sync.Mutex
	info  *Info       // set once Negotiate succeeded
	codec codec.Codec // ditto
	inits map[string]initProc
	// stored caches decoded runtime records by path (readStored).
	stored map[string]storedFile
}

// New returns the provider for runtime name (Runc or Crun). It checks the
// config, makes Root and LogDir, resolves the runtime (and, for crun on a
// hybrid cgroup host, unshare(1), umount(8) and /bin/sh for the
// private-mount-namespace wrapper), reads the host kind from the mount
// table and builds the procexec policy that allows exactly the provider's
// command lines. It runs nothing: Negotiate does, and every
// method negotiates first if needed.
//
// Errors: CodeConfigInvalid (unknown name, malformed paths, timeout out of
// range), CodeUnavailable (a directory is unsafe, the runtime or a wrapper
// tool is missing or unsafe, the cgroup layout is unrecognised).
func New(name string, cfg Config) (RuntimeProvider, error) {
	bad := func(msg string) error { return wire.Errorf(CodeConfigInvalid, "%s", msg) }
	switch {
	case name != Runc && name != Crun:
		return nil, bad("runtime must be runc or crun")
	case !cleanAbs(cfg.Root) || cfg.Root == "/":
		return nil, bad("root must be an absolute, clean path other than /")
	case !cleanAbs(cfg.LogDir) || cfg.LogDir == "/":
		return nil, bad("log dir must be an absolute, clean path other than /")
	case within(cfg.LogDir, cfg.Root) || within(cfg.Root, cfg.LogDir):
		return nil, bad("root and log dir must not contain each other")
	case cfg.Binary != "" && !cleanAbs(cfg.Binary):
		return nil, bad("binary must be an absolute, clean path")
	case cfg.Timeout != 0 && (cfg.Timeout < procexec.MinTimeout || cfg.Timeout > procexec.MaxTimeout):
		return nil, bad("timeout must be 0 or between 1 s and 300 s")
	}
	for _, d := range []string{cfg.Root, cfg.LogDir} {
		if err := ensurePrivateDir(d); err != nil {
			return nil, err
		}
	}
	p := &cli{name: name, root: cfg.Root, logDir: cfg.LogDir, timeout: cfg.Timeout,
		log: cfg.Logger, scrub: cfg.Scrubber, inits: map[string]initProc{}, stored: map[string]storedFile{}}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	bin := cfg.Binary
	if bin == "" {
		bin = name
	}
	var err error
	if p.t.runtime, err = resolve(name, bin); err != nil {
		return nil, err
	}
	if p.t.sh, err = resolve(name, "/bin/sh"); err != nil {
		return nil, err
	}
	ms, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	p.mounts = cgroupMounts(ms)
	var v2 string
	if err == nil {
		p.kind, v2, err = hostKind(p.mounts)
	}
	if err != nil {
		return nil, wire.Wrap(CodeUnavailable, name+": cannot tell the cgroup layout of this host", err)
	}
	if name == Crun && p.kind == HostCgroupHybrid {
		// crun 1.8 refuses hybrid hosts; run it where the v2 mount is gone.
		if p.t.unshare, err = resolve(name, "unshare"); err != nil {
			return nil, err
		}
		if p.t.umount, err = resolve(name, "umount"); err != nil {
			return nil, err
		}
		p.t.v2 = v2
	}
	pol, err := procexec.NewPolicy(p.t.rules(p.root, name == Runc), mutations)
	if err != nil {
		return nil, wire.Wrap(CodeUnavailable, name+": cannot build the command policy", err)
	}
	p.runner, err = procexec.NewRunner(procexec.Config{Policy: pol, Logger: cfg.Logger, Scrubber: cfg.Scrubber})
	if err != nil {
		return nil, wire.Wrap(CodeUnavailable, name+": cannot build the process runner", err)
	}
	return p, nil
}

// resolve resolves a tool through procexec.Resolve; failures are
// CodeUnavailable carrying procexec's reason.
func resolve(runtime, tool string) (string, error) {
	path, err := procexec.Resolve(tool)
	if err != nil {
		return "", wire.Wrap(CodeUnavailable, runtime+": "+wire.AsError(err).Msg, err)
	}
	return path, nil
}

// Negotiate runs `<runtime> --version` (through the wrapper when there is
// one, which proves the wrapper works here), parses it strictly and picks
// the exact codec. Errors: CodeUnavailable (the command failed: missing
// privilege for the wrapper, a broken binary), CodeDecode,
// CodeIncompatible. A success is cached; a failure is retried next time.
func (p *cli) Negotiate(ctx context.Context) (Info, error) {
	p.mu.Lock()
	if p.info != nil {
		defer p.mu.Unlock()
		return *p.info, nil
	}
	p.mu.Unlock()
	res, _, err := p.run(ctx, verbVersion, nil, nil)
	if err != nil {
		if wire.HasCode(err, procexec.CodeExitNonzero) {
			return Info{}, wire.Wrap(CodeUnavailable, p.name+" --version failed: "+wire.AsError(err).Msg, err)
		}
		return Info{}, err
	}
	version, err := codec.ParseVersion(p.name, res.Stdout)
	if err != nil {
		return Info{}, err
	}
	c, err := codec.ForVersion(p.name, version)
	if err != nil {
		return Info{}, err
	}
	info := Info{Name: p.name, Path: p.t.runtime, Version: version, Codec: c.Line(),
		HostKind: p.kind, Wrapped: p.t.unshare != "", Root: p.root}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.info == nil {
		p.info, p.codec = &info, c
	}
	return *p.info, nil
}

// negotiated returns the codec, negotiating first if needed.
func (p *cli) negotiated(ctx context.Context) (codec.Codec, error) {
	p.mu.Lock()
	c := p.codec
	p.mu.Unlock()
	if c != nil {
		return c, nil
	}
	if _, err := p.Negotiate(ctx); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.codec, nil
}
