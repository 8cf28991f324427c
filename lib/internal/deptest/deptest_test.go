package deptest

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/matryer/is"
)

func TestRepository(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := repoRoot(t)
	dirs, err := Modules(root)
	is.NoErr(err)
	is.True(len(dirs) > 1) // the workspace has lib and the binaries at least

	type result struct {
		pkgs []Package
		err  error
	}
	// Every platform hostkit builds for: a file built for one only
	// keeps the rules too.
	goos := []string{"linux", "darwin"}
	results := make([]result, len(dirs)*len(goos))
	sem := make(chan struct{}, 4) // a few go list at a time: each is cheap, the machine shared
	var wg sync.WaitGroup
	for i, dir := range dirs {
		for j, g := range goos {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				pkgs, err := Load(t.Context(), dir, g)
				results[i*len(goos)+j] = result{pkgs, err}
			})
		}
	}
	wg.Wait()
	var graph []Package
	for _, r := range results {
		is.NoErr(r.err)
		graph = append(graph, r.pkgs...)
	}
	t.Logf("%d modules, %d packages", len(dirs), len(graph)/len(goos))

	// The loader found what is known to be there, so an empty graph
	// cannot pass.
	is.True(hasImport(graph, "hostkit.dev/cmd/egressd", "hostkit.dev/lib/daemon"))
	is.True(hasImport(graph, "hostkit.dev/lib/daemon", "github.com/coreos/go-systemd/v22/daemon"))
	is.True(hasImport(graph, "hostkit.dev/lib/api/egressdapi", "hostkit.dev/lib/rpc"))

	for _, v := range Check(graph, policy()) {
		t.Errorf("%s (lib/internal/deptest: fix the import, or allow it with a reason in policy)", v)
	}
}

// policy is what hostkit allows beyond the fixed rules: per module, the
// third-party modules it imports directly, each with why. Every module of
// the repository has an entry, empty meaning the standard library and
// hostkit only.
func policy() Policy {
	const (
		assert     = "assertions in table tests (house style)"
		leak       = "tests fail on a leaked goroutine"
		sys        = "system calls the standard library lacks (prctl, pidfd, SO_PEERCRED, ...)"
		codec      = "MessagePack bodies mapped to Go structs, the codec lib/wire validates"
		flags      = "flags > environment > config file (house style)"
		pty        = "a pseudo-terminal for an agent's interactive session"
		rate       = "a token bucket bounding what a flood of refusals records"
		idna       = "IDNA host names (UTS #46) for canonical hosts"
		httpguts   = "HTTP field syntax (httpguts) and HTTP/2 inside intercepted tunnels"
		ociSpec    = "OCI image and runtime spec types and digests, not hand-copied"
		mountTable = "the mount table parser runc and containerd use (proc(5) mountinfo), not one of our own"
	)
	return Policy{
		ThirdParty: map[string]map[string]string{
			"hostkit.dev/lib": {
				"github.com/coreos/go-systemd/v22":  "sd_notify and socket activation under systemd",
				"github.com/matryer/is":             assert,
				"github.com/oklog/run":              "the run group of a daemon's actors (house style)",
				"github.com/peterbourgon/ff/v3":     flags,
				"github.com/vmihailenco/msgpack/v5": codec,
				"go.uber.org/goleak":                leak,
				"golang.org/x/net":                  idna,
				"golang.org/x/sys":                  sys,
			},
			"hostkit.dev/cmd/containerization-helper": {
				"github.com/matryer/is":                  assert,
				"github.com/moby/sys/mountinfo":          mountTable,
				"github.com/opencontainers/go-digest":    ociSpec,
				"github.com/opencontainers/image-spec":   ociSpec,
				"github.com/opencontainers/runtime-spec": ociSpec,
				"github.com/vmihailenco/msgpack/v5":      "an idempotent reply replayed as the raw body it was",
				"go.uber.org/goleak":                     leak,
				"golang.org/x/sys":                       sys,
			},
			"hostkit.dev/cmd/egressd": {
				"github.com/matryer/is": assert,
				"go.uber.org/goleak":    leak,
				"golang.org/x/net":      httpguts,
				"golang.org/x/sys":      "the owner of a loopback connection (netlink sock_diag)",
				"golang.org/x/time":     rate,
			},
			"hostkit.dev/cmd/hostctl": {
				"github.com/matryer/is":             assert,
				"github.com/peterbourgon/ff/v3":     "subcommands (ffcli) and flags > environment (house style)",
				"github.com/vmihailenco/msgpack/v5": "a daemon's answer printed as JSON",
				"golang.org/x/sys":                  sys,
				"golang.org/x/term":                 "raw mode for an attached terminal",
			},
			"hostkit.dev/cmd/secretd": {
				"github.com/matryer/is":             assert,
				"github.com/vmihailenco/msgpack/v5": "a secret value encoded straight from locked memory (CustomEncoder)",
				"go.uber.org/goleak":                leak,
				"golang.org/x/sys":                  "locked, undumpable memory for secrets (mmap, mlock, madvise)",
			},
			"hostkit.dev/cmd/supervisord": {
				"github.com/creack/pty":              pty,
				"github.com/google/nftables":         "an instance's firewall, set over netlink",
				"github.com/jsimonetti/rtnetlink/v2": "an instance's links, addresses and routes over netlink",
				"github.com/matryer/is":              assert,
				"github.com/mdlayher/netlink":        "the netlink connection nftables and rtnetlink share",
				"golang.org/x/net":                   "DNS messages for an instance's resolver (dnsmessage)",
				"golang.org/x/sys":                   sys,
				"golang.org/x/time":                  rate,
			},
			"hostkit.dev/conformance": {
				"github.com/matryer/is":         assert,
				"github.com/moby/sys/mountinfo": mountTable,
			},
			"hostkit.dev/bench/egress": {},
			"hostkit.dev/bench/helper": {
				"golang.org/x/sys": "pidfd_open to wait for a child it did not start",
			},
			"hostkit.dev/bench/proxy": {
				"golang.org/x/sys": "CLOCK_MONOTONIC stamps compared across processes",
			},
			"hostkit.dev/bench/reregister": {},
			"hostkit.dev/bench/rpc":        {},
			"hostkit.dev/bench/secretd":    {},
			"hostkit.dev/bench/supervisor": {
				"github.com/creack/pty": pty,
			},
		},
		// None today: lib/api packages import only the standard library,
		// lib/wire and lib/rpc. Their tests also use lib/sock and
		// matryer/is, which the rule leaves to tests.
		APIExceptions: map[string]string{},
	}
}

// repoRoot returns the directory holding go.work above the test's
// directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test's directory: the import rules need the whole repository")
		}
		dir = parent
	}
}

func hasImport(graph []Package, from, to string) bool {
	for _, p := range graph {
		if p.Path == from && slices.ContainsFunc(p.Imports, func(i Import) bool { return i.Path == to }) {
			return true
		}
	}
	return false
}
