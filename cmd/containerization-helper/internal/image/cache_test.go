package image

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/opencontainers/go-digest"
	"hostkit.dev/lib/wire"
)

// Prepare unpacks an image once into the rootfs cache and gives every
// bundle its own config.json over the shared, read-only rootfs.
func TestPrepareSharesRootfs(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newFixture(t)
	u := newUnpacker(t)
	base := t.TempDir()
	bundles, cache := filepath.Join(base, "bundles"), filepath.Join(base, "rootfs")
	is.NoErr(os.Mkdir(bundles, 0o700))
	is.NoErr(os.Mkdir(cache, 0o700))
	ctx := context.Background()
	req := func(name string) Request {
		return Request{Layout: f.layout, Manifest: f.manifest, Root: bundles, Name: name, Patch: Patch{
			Args: []string{"/bin/sleep", "1"}, Env: []string{"A=1"}, CgroupsPath: "/hostkit/" + name,
			Annotations: map[string]string{prefix + "project": "p"}, OwnedPrefix: prefix}}
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = u.Prepare(ctx, req("hk-"+string(rune('a'+i))), cache)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		is.NoErr(err)
	}
	is.Equal(entries(t, cache), []string{f.manifest.Encoded()}) // one fill, no leftovers
	rootfs := filepath.Join(cache, f.manifest.Encoded(), "rootfs")
	for _, d := range []string{"proc", "dev", "sys", "tmp"} {
		fi, err := os.Lstat(filepath.Join(rootfs, d))
		is.NoErr(err)
		is.True(fi.IsDir()) // mount points made at fill time
	}

	b := filepath.Join(bundles, "hk-a")
	is.Equal(entries(t, b), []string{"config.json"})
	fi, err := os.Stat(filepath.Join(b, "config.json"))
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o600))
	spec := readSpec(t, b)
	is.Equal(spec.Root.Path, rootfs)
	is.True(spec.Root.Readonly)
	is.Equal(spec.Process.Args, []string{"/bin/sleep", "1"})
	is.Equal(spec.Process.Env, []string{"A=1"})
	is.True(!spec.Process.Terminal)
	is.Equal(spec.Linux.CgroupsPath, "/hostkit/hk-a")
	is.Equal(*spec.Linux.Resources.Pids.Limit, int64(DefaultPidsLimit)) // a fork bomb cannot exhaust the host
	is.Equal(spec.Annotations[prefix+"project"], "p")
	tmp := 0
	for _, m := range spec.Mounts {
		if m.Destination == "/tmp" {
			tmp++
			is.Equal(m.Type, "tmpfs")
		}
	}
	is.Equal(tmp, 1)
	is.Equal(CacheEntryOf(filepath.Join(b, "config.json"), cache), f.manifest.Encoded())
	is.Equal(CacheEntryOf(filepath.Join(b, "config.json"), bundles), "")

	_, err = u.Prepare(ctx, req("hk-a"), cache)
	is.Equal(wire.CodeOf(err), CodeBundleExists)

	// An entry whose umoci.json no longer names its digest is refused.
	meta := filepath.Join(cache, f.manifest.Encoded(), "umoci.json")
	orig, err := os.ReadFile(meta)
	is.NoErr(err)
	is.NoErr(os.WriteFile(meta, []byte(`{"from_descriptor_path":{"descriptor_walk":[]}}`), 0o600))
	_, err = u.Prepare(ctx, req("hk-x"), cache)
	is.Equal(wire.CodeOf(err), CodeUnpackMismatch)
	is.NoErr(os.WriteFile(meta, orig, 0o600))

	// A layer changed on disk is hashed again, and refused.
	l := f.clone(t)
	_, err = u.Verify(ctx, l, f.manifest)
	is.NoErr(err)
	corruptLayer(t, l, f.manifest)
	_, err = u.Verify(ctx, l, f.manifest)
	is.Equal(wire.CodeOf(err), CodeDigestMismatch)
}

func TestPruneCache(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := t.TempDir()
	old, used, fresh := "aa", "bb", "cc"
	hex := func(c string) string { return c + repeat(c[:1], 62) }
	for _, n := range []string{hex(old), hex(used), hex(fresh), ".fill-1", ".stage-2", "other"} {
		is.NoErr(os.Mkdir(filepath.Join(dir, n), 0o700))
	}
	now := time.Now()
	past := now.Add(-48 * time.Hour)
	for _, n := range []string{hex(old), hex(used), "other"} {
		is.NoErr(os.Chtimes(filepath.Join(dir, n), past, past))
	}
	removed, err := PruneCache(dir, map[string]bool{hex(used): true}, 24*time.Hour, now)
	is.NoErr(err)
	is.Equal(len(removed), 3)
	is.Equal(entries(t, dir), []string{hex(used), hex(fresh), "other"})
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}

// corruptLayer flips one byte of the manifest's first layer in place (same
// inode, same size) and sets its mtime back: only its ctime tells.
func corruptLayer(t *testing.T, layout string, d digest.Digest) {
	t.Helper()
	m := manifestOf(t, layout, d)
	p := filepath.Join(layout, "blobs", "sha256", m.Layers[0].Digest.Encoded())
	fi, err := os.Stat(p)
	must(t, err)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	must(t, err)
	b := make([]byte, 1)
	_, err = f.ReadAt(b, 100)
	must(t, err)
	b[0] ^= 0xff
	_, err = f.WriteAt(b, 100)
	must(t, err)
	must(t, f.Close())
	must(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
}
