package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/opencontainers/go-digest"
	"hostkit.dev/cmd/containerization-helper/internal/capability"
	"hostkit.dev/cmd/containerization-helper/internal/image"
	"hostkit.dev/cmd/containerization-helper/internal/provider"
	"hostkit.dev/cmd/containerization-helper/internal/state"
	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/procexec"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

// Options are what Open needs from the daemon: everything else is
// derived from StateDir.
type Options struct {
	Runtime     string           // provider.Runc or provider.Crun
	StateDir    string           // the helper's state directory (layout State/helper), 0700
	Epoch       string           // this process's epoch: 16 lowercase hex
	Started     time.Time        // when the process started (health's uptime)
	IdleTimeout time.Duration    // reported by health; 0 = never exits when idle
	Logger      *slog.Logger     // the daemon's redacting logger
	Scrubber    *redact.Scrubber // the logger's scrubber: runtime output is redacted through it
	Audit       *audit.Log       // the helper's audit log
}

// Paths under the state directory. The runtime's --root is private to
// the helper: containers of other tools (podman's live in runc's default
// root) are never seen.
const (
	dirRuntimeRoot = "runtime"     // --root of runc/crun
	dirRuntimeLog  = "runtime-log" // the provider's per-command --log files
	dirStore       = "store"       // package state's files
	dirRootfs      = "rootfs"      // the read-only rootfs cache, one entry per manifest digest
)

// cgroupParent is the cgroup under which every container's own cgroup
// lies (linux.cgroupsPath /hostkit/<id>): one place to find, account and
// limit the helper's containers, never a cgroup another tool named after
// one of its own containers.
const cgroupParent = "/hostkit"

// Open builds the helper's server over the real packages: the provider
// (helper-private root under StateDir), the image unpacker (umoci through
// its own procexec runner), the persistent store and the capability
// snapshots. It makes this process a child subreaper and reconciles the
// records with the runtime (Recover) before returning.
func Open(ctx context.Context, o Options) (*Server, error) {
	if err := BecomeSubreaper(); err != nil {
		return nil, fmt.Errorf("server.Open: %w", err)
	}
	if err := os.MkdirAll(o.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("server.Open: %w", err)
	}
	rt, err := provider.New(o.Runtime, provider.Config{
		Root:     filepath.Join(o.StateDir, dirRuntimeRoot),
		LogDir:   filepath.Join(o.StateDir, dirRuntimeLog),
		Logger:   o.Logger,
		Scrubber: o.Scrubber,
	})
	if err != nil {
		return nil, err
	}
	pol, err := procexec.NewPolicy([]procexec.Rule{image.Rule(image.DefaultUmoci)}, []string{image.MutationUnpack})
	if err != nil {
		return nil, err
	}
	runner, err := procexec.NewRunner(procexec.Config{Policy: pol, Logger: o.Logger, Scrubber: o.Scrubber})
	if err != nil {
		return nil, err
	}
	unp, err := image.NewUnpacker(image.Config{Runner: runner})
	if err != nil {
		return nil, err
	}
	store, err := state.Open(filepath.Join(o.StateDir, dirStore), state.Options{})
	if err != nil {
		return nil, err
	}
	s, err := New(Config{
		Runtime: rt, Lookup: lookupSnapshot, Store: store,
		Images:   &images{u: unp, bundles: bundlesDir(o.StateDir), cache: rootfsDir(o.StateDir)},
		StateDir: o.StateDir, Epoch: o.Epoch, Started: o.Started, IdleTimeout: o.IdleTimeout, Logger: o.Logger, Audit: o.Audit,
	})
	if err != nil {
		store.Close()
		return nil, err
	}
	s.closer = store.Close
	if err := s.Recover(ctx); err != nil {
		store.Close()
		return nil, fmt.Errorf("server.Open: recover: %w", err)
	}
	return s, nil
}

// lookupSnapshot is capability.Lookup as a Snapshot.
func lookupSnapshot(codec, hostKind string) (Snapshot, error) {
	s, err := capability.Lookup(codec, hostKind)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// images adapts package image to Images: every bundle runs its image from
// the shared read-only rootfs cache (image.Unpacker.Prepare).
type images struct {
	u       *image.Unpacker
	bundles string
	cache   string
}

func (im *images) Evidence(ctx context.Context, ref helperapi.ImageRef) (*helperapi.Evidence, error) {
	r, err := readerFrom(ctx, true)
	if err != nil {
		return nil, err
	}
	ev, err := im.u.VerifyFor(ctx, r, ref.Layout, digest.Digest(ref.ManifestDigest))
	if err != nil {
		return nil, err
	}
	return evidenceOf(ev), nil
}

func (im *images) Unpack(ctx context.Context, ref helperapi.ImageRef, bundle string, p BundlePatch) error {
	if filepath.Dir(bundle) != im.bundles {
		return wire.Errorf(CodePathUnsafe, "bundle is not under the helper's bundle root")
	}
	name := filepath.Base(bundle)
	r, err := readerFrom(ctx, false)
	if err != nil {
		return err
	}
	_, err = im.u.Prepare(ctx, image.Request{
		Layout:   ref.Layout,
		Manifest: digest.Digest(ref.ManifestDigest),
		Root:     im.bundles,
		Name:     name,
		// An image's labels become annotations: none may claim ownership.
		Patch: image.Patch{Args: p.Args, Env: p.Env, Annotations: p.Annotations, OwnedPrefix: "dev.hostkit.",
			CgroupsPath: cgroupParent + "/" + name},
		Reader: r,
	}, im.cache)
	return err
}

// Prune removes rootfs cache entries that no bundle runs from and that
// were not used for a day, and leftovers of unfinished fills.
func (im *images) Prune(now time.Time) ([]string, error) {
	inUse := map[string]bool{}
	ents, err := os.ReadDir(im.bundles)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if n := image.CacheEntryOf(filepath.Join(im.bundles, e.Name(), "config.json"), im.cache); n != "" {
			inUse[n] = true
		}
	}
	return image.PruneCache(im.cache, inUse, cacheIdle, now)
}

// cacheIdle is how long an unused rootfs cache entry is kept.
const cacheIdle = 24 * time.Hour

func evidenceOf(ev *image.Evidence) *helperapi.Evidence {
	out := &helperapi.Evidence{
		Architecture:   ev.Platform.Architecture,
		ConfigDigest:   ev.ConfigDigest.String(),
		ManifestDigest: ev.ManifestDigest.String(),
		OS:             ev.Platform.OS,
		TotalSize:      ev.TotalSize,
		Layers:         make([]helperapi.Layer, 0, len(ev.Layers)),
	}
	for _, l := range ev.Layers {
		out.Layers = append(out.Layers, helperapi.Layer{Digest: l.Digest.String(), MediaType: l.MediaType, Size: l.Size})
	}
	return out
}
