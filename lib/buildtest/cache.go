package buildtest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"hostkit.dev/lib/wire"
)

// DefaultMaxAge is how long an entry may go unused before a Binary call
// removes it: a week keeps the binaries of the branches one works on
// while the cache does not grow without bound (a daemon is 10-20 MB).
const DefaultMaxAge = 7 * 24 * time.Hour

// dirName is the cache directory's name under os.UserCacheDir.
const dirName = "hostkit-test-bin"

// Log field names.
const (
	fieldPkg     = "pkg"
	fieldPath    = "path"
	fieldElapsed = "elapsed_ms"
)

// Cache is a directory of binaries keyed by what they are built from.
// The zero Cache is the default one: os.UserCacheDir()/hostkit-test-bin,
// entries kept for DefaultMaxAge, no log. A Cache is safe for concurrent
// use by goroutines and by processes.
type Cache struct {
	// Dir is the cache directory; "" means hostkit-test-bin under
	// os.UserCacheDir ($XDG_CACHE_HOME or ~/.cache on Linux,
	// ~/Library/Caches on macOS). It is created with mode 0700.
	Dir string
	// MaxAge is how long an entry may go unused before Binary removes
	// it; 0 means DefaultMaxAge, a negative value never removes one.
	MaxAge time.Duration
	// Log gets a buildtest.build line for each binary built, a
	// buildtest.reuse line for each reused, a buildtest.wait line when a
	// call waits for another's build of the same key and a
	// buildtest.prune line for each entry removed; nil logs nothing.
	Log *slog.Logger
}

// Binary is Binary of the zero (default) Cache.
func Binary(ctx context.Context, pkg string, flags ...string) (string, error) {
	return (&Cache{}).Binary(ctx, pkg, flags...)
}

// Install links the binary of each pkg, built by the default Cache
// without flags (Binaries), into dir under its own name (Link), for
// tests that need binaries side by side or reachable by another uid. dir
// must exist and must not hold those names yet.
//
// Errors: as Binaries and Link.
func Install(ctx context.Context, dir string, pkgs ...string) error {
	paths, err := (&Cache{}).Binaries(ctx, pkgs)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if err := Link(p, filepath.Join(dir, filepath.Base(p))); err != nil {
			return err
		}
	}
	return nil
}

// Binary returns the path of the binary of the main package pkg built
// with the go build flags (for example "-race" or "-tags", "faultinject"),
// building it only if the cache holds none for the same key. pkg is an
// import path, resolved from the current directory, or a directory (".",
// "./x", "../x" or absolute), in which the go command then runs: that
// resolves the package in its own module even when the workspace is off
// (GOWORK=off). -buildvcs=false comes before flags: a VCS stamp is not
// part of the key, so it must not be part of the binary.
//
// The file is named as go build names it (the last element of the import
// path), is read-only and must not be changed: tests that run it share
// it. It stays until MaxAge after its last use.
//
// Errors: CodeInvalid for an empty pkg, an -o flag or a pkg that is not
// one main package; CodeBuild when go list or go build fail (the message
// has their output); CodeIO when the cache cannot be written; the
// context's error when ctx ends while waiting for another process's
// build of the same key.
func (c *Cache) Binary(ctx context.Context, pkg string, flags ...string) (string, error) {
	paths, err := c.Binaries(ctx, []string{pkg}, flags...)
	if err != nil {
		return "", err
	}
	return paths[0], nil
}

// Binaries is Binary for several packages built with the same flags,
// returning their paths in the order of pkgs; it asks the go command for
// all their keys at once where it can (see keys), which is cheaper than
// one Binary call each.
//
// Errors: as Binary; CodeInvalid for no package.
func (c *Cache) Binaries(ctx context.Context, pkgs []string, flags ...string) ([]string, error) {
	if len(pkgs) == 0 {
		return nil, wire.Errorf(CodeInvalid, "no package")
	}
	for _, f := range flags {
		if f == "-o" || f == "--o" || strings.HasPrefix(f, "-o=") || strings.HasPrefix(f, "--o=") {
			return nil, wire.Errorf(CodeInvalid, "-o is chosen by the cache, not a flag")
		}
	}
	ts := make([]*target, len(pkgs))
	for i, pkg := range pkgs {
		if pkg == "" {
			return nil, wire.Errorf(CodeInvalid, "no package")
		}
		t, err := newTarget(pkg, flags)
		if err != nil {
			return nil, err
		}
		ts[i] = t
	}
	ks, err := keys(ctx, ts)
	if err != nil {
		return nil, err
	}
	root, err := c.root()
	if err != nil {
		return nil, err
	}
	c.prune(root, time.Now())
	paths := make([]string, len(ts))
	for i, t := range ts {
		if paths[i], err = c.get(ctx, root, t, ks[i]); err != nil {
			return nil, err
		}
	}
	return paths, nil
}

// get returns the binary of key k, building t under the key's lock if
// the cache does not hold it yet.
func (c *Cache) get(ctx context.Context, root string, t *target, k key) (string, error) {
	unlock, err := lock(ctx, filepath.Join(root, k.hash+lockSuffix), func() {
		c.log().Info("buildtest.wait", fieldPkg, t.pkg) // another process or goroutine builds it
	})
	if err != nil {
		return "", err
	}
	defer unlock()
	entry := filepath.Join(root, k.hash)
	bin := filepath.Join(entry, k.name)
	if _, err := os.Stat(bin); err == nil {
		touch(entry)
		c.log().Debug("buildtest.reuse", fieldPkg, t.pkg, fieldPath, bin)
		return bin, nil
	}
	start := time.Now()
	if err := t.build(ctx, entry, k.name); err != nil {
		return "", err
	}
	touch(entry)
	c.log().Info("buildtest.build", fieldPkg, t.pkg, fieldPath, bin, fieldElapsed, time.Since(start).Milliseconds())
	return bin, nil
}

// root returns the cache directory, created.
func (c *Cache) root() (string, error) {
	dir := c.Dir
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", wire.Wrap(CodeIO, "no user cache directory: "+err.Error(), err)
		}
		dir = filepath.Join(base, dirName)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", wire.Wrap(CodeIO, "cache directory: "+err.Error(), err)
	}
	return dir, nil
}

// maxAge returns MaxAge with its zero value resolved.
func (c *Cache) maxAge() time.Duration {
	if c.MaxAge == 0 {
		return DefaultMaxAge
	}
	return c.MaxAge
}

// log returns Log, or a logger that discards.
func (c *Cache) log() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c.Log
}

// build links the binary into entry/name: into a temporary name first,
// renamed into place once complete, so that no one ever runs a binary
// half written by a build that was killed. The caller holds the key's
// lock, so no other process builds into entry meanwhile.
func (t *target) build(ctx context.Context, entry, name string) error {
	if err := os.MkdirAll(entry, 0o755); err != nil {
		return wire.Wrap(CodeIO, "cache entry: "+err.Error(), err)
	}
	tmp := filepath.Join(entry, "."+name+".tmp")
	// A build killed before its rename left this; go build refuses to
	// overwrite a file it cannot tell is a binary.
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return wire.Wrap(CodeIO, "stale temporary binary: "+err.Error(), err)
	}
	args := append([]string{"build", "-o", tmp}, t.flags...)
	cmd := exec.CommandContext(ctx, "go", append(args, t.arg)...)
	cmd.Dir = t.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return wire.Wrap(CodeBuild, "go build "+t.pkg+": "+err.Error()+"\n"+string(out), err)
	}
	// Read-only: a test that wrote into its hard link would change the
	// binary every other test shares.
	if err := os.Chmod(tmp, 0o555); err != nil {
		return wire.Wrap(CodeIO, "binary mode: "+err.Error(), err)
	}
	if err := os.Rename(tmp, filepath.Join(entry, name)); err != nil {
		return wire.Wrap(CodeIO, "binary rename: "+err.Error(), err)
	}
	return nil
}

// touch marks an entry used now, which keeps prune away from it.
func touch(entry string) {
	now := time.Now()
	_ = os.Chtimes(entry, now, now)
}
