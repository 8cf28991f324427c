// Package imagetest builds tiny OCI image layouts at test time with umoci
// (run through lib/procexec) and busybox-static, with pinned timestamps so
// that their digests are stable from run to run on one host. Other
// packages' tests and benchmarks use it (Build, BuildWith); it imports
// package testing and is for tests only.
//
// What is pinned, and why it is enough: the image config's "created" and
// every history entry's "created" are set with umoci's --created and
// --history.created to Epoch; every file, symlink and directory of the
// rootfs gets Epoch as its mtime (lutimes(2), so symlinks themselves)
// before `umoci repack`, whose tar headers carry only mode, uid/gid,
// size, mtime and link target (no atime/ctime PAX records) and whose gzip
// stream has no timestamp or name; `umoci gc` then removes the blobs of
// the intermediate steps (the first config from `umoci new` holds the
// wall-clock time). The remaining inputs are this host's /bin/busybox and
// uid 0, so the digests are byte-stable across runs on one host but not
// across hosts with another busybox build: tests compare two builds, they
// never hard-code a digest.
package imagetest

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"
	"hostkit.dev/lib/procexec"
)

// Epoch is the pinned time of every timestamp in a fixture image.
var Epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// DefaultTag is the fixture's ref name in index.json.
const DefaultTag = "fixture"

// Busybox is the static busybox the fixture copies into rootfs/bin.
const Busybox = "/bin/busybox"

// Umoci is the umoci the fixture builder runs.
const Umoci = "/usr/bin/umoci"

// Applets are the symlinks to busybox made in rootfs/bin.
var Applets = []string{"sh", "echo", "cat", "sleep", "true", "false", "ls", "env"}

// Options shape a fixture image; the zero value is Build's image.
type Options struct {
	// Tag is the ref name annotation in index.json; "" means DefaultTag.
	Tag string
	// Cmd is the image config's Cmd; nil means ["/bin/sh"].
	Cmd []string
	// Labels are image config labels (umoci copies them into the bundle's
	// annotations).
	Labels map[string]string
	// PayloadBytes, when positive, adds /data/payload: that many
	// deterministic pseudo-random (incompressible) bytes, to make the
	// image bigger for benchmarks.
	PayloadBytes int
	// ZeroBytes, when positive, adds /data/zeros: that many zero bytes,
	// which gzip compresses about a thousandfold (a small "gzip bomb"
	// for the unpacked-size cap).
	ZeroBytes int
}

// Available reports whether fixtures can be built here (Linux, root,
// umoci and busybox present), with the reason when not.
func Available() (bool, string) {
	switch {
	case runtime.GOOS != "linux":
		return false, "fixture images need Linux"
	case os.Geteuid() != 0:
		return false, "umoci unpack needs root"
	}
	for _, p := range []string{Umoci, Busybox} {
		if _, err := os.Stat(p); err != nil {
			return false, p + " is missing"
		}
	}
	return true, ""
}

// Build makes the default fixture in dir/layout and returns the layout
// path and its manifest digest. It fails the test when Available says no.
func Build(t testing.TB, dir string) (string, digest.Digest) {
	t.Helper()
	return BuildWith(t, dir, Options{})
}

// BuildWith makes a fixture shaped by o in dir/layout (dir/work is the
// scratch bundle) and returns the layout path and its manifest digest.
func BuildWith(t testing.TB, dir string, o Options) (string, digest.Digest) {
	t.Helper()
	if ok, why := Available(); !ok {
		// A missing tool fails loudly: scripts/setup installs umoci and
		// busybox-static, and no test is skipped silently.
		t.Fatalf("cannot build the fixture image: %s (scripts/setup installs it)", why)
	}
	if o.Tag == "" {
		o.Tag = DefaultTag
	}
	if o.Cmd == nil {
		o.Cmd = []string{"/bin/sh"}
	}
	layout, work := filepath.Join(dir, "layout"), filepath.Join(dir, "work")
	image := layout + ":" + o.Tag
	created := Epoch.Format(time.RFC3339)
	r := newRunner(t)
	r.umoci("init", "--layout", layout)
	r.umoci("new", "--image", image)
	r.umoci("config", "--image", image, "--created", created, "--no-history")
	r.umoci("unpack", "--image", image, work)
	rootfs := filepath.Join(work, "rootfs")
	fill(t, rootfs, o.PayloadBytes, o.ZeroBytes)
	pinTimes(t, rootfs)
	r.umoci("repack", "--history.created", created, "--image", image, work)
	args := []string{"config", "--image", image, "--created", created, "--history.created", created}
	for _, c := range o.Cmd {
		args = append(args, "--config.cmd", c)
	}
	labels := make([]string, 0, len(o.Labels))
	for k, v := range o.Labels {
		labels = append(labels, k+"="+v)
	}
	sort.Strings(labels)
	for _, l := range labels {
		args = append(args, "--config.label", l)
	}
	r.umoci(args...)
	r.umoci("gc", "--layout", layout)
	idx := ReadIndex(t, layout)
	if len(idx.Manifests) != 1 {
		t.Fatalf("imagetest: the fixture index has %d manifests", len(idx.Manifests))
	}
	return layout, idx.Manifests[0].Digest
}

// runner runs umoci through lib/procexec with a test-only policy.
type runner struct {
	t testing.TB
	r *procexec.Runner
}

func newRunner(t testing.TB) *runner {
	t.Helper()
	const kind = "fixture.build"
	rule := func(args ...string) procexec.Rule {
		return procexec.Rule{Executable: Umoci, Args: args, Class: procexec.ClassMutating, Mutation: kind}
	}
	arg := procexec.AnyArg
	pol, err := procexec.NewPolicy([]procexec.Rule{
		rule("init", "--layout", arg),
		rule("new", "--image", arg),
		rule("config", procexec.RestArgs),
		rule("unpack", "--image", arg, arg),
		rule("repack", "--history.created", arg, "--image", arg, arg),
		rule("gc", "--layout", arg),
	}, []string{kind})
	if err != nil {
		t.Fatalf("imagetest: policy: %v", err)
	}
	r, err := procexec.NewRunner(procexec.Config{Policy: pol})
	if err != nil {
		t.Fatalf("imagetest: runner: %v", err)
	}
	return &runner{t: t, r: r}
}

// umoci runs one umoci command or fails the test.
func (r *runner) umoci(args ...string) {
	r.t.Helper()
	res, err := r.r.Run(context.Background(), &procexec.CommandSpec{
		Executable: Umoci,
		Args:       args,
		Timeout:    2 * time.Minute,
		Class:      procexec.ClassMutating,
		Mutation:   "fixture.build",
		Purpose:    "build a fixture image",
	})
	if err != nil {
		stderr := ""
		if res != nil {
			stderr = string(res.Stderr)
		}
		r.t.Fatalf("imagetest: umoci %s: %v\n%s", args[0], err, stderr)
	}
}

// fill puts busybox, its applet symlinks and the optional payload and
// zeros into rootfs.
func fill(t testing.TB, rootfs string, payload, zeros int) {
	t.Helper()
	bin := filepath.Join(rootfs, "bin")
	must(t, os.MkdirAll(bin, 0o755))
	copyFile(t, Busybox, filepath.Join(bin, "busybox"), 0o755)
	for _, a := range Applets {
		must(t, os.Symlink("busybox", filepath.Join(bin, a)))
	}
	if payload > 0 {
		data := filepath.Join(rootfs, "data")
		must(t, os.MkdirAll(data, 0o755))
		b := make([]byte, payload)
		rng := rand.NewChaCha8([32]byte{'h', 'o', 's', 't', 'k', 'i', 't'})
		rng.Read(b)
		must(t, os.WriteFile(filepath.Join(data, "payload"), b, 0o644))
		must(t, os.Chmod(filepath.Join(data, "payload"), 0o644))
	}
	if zeros > 0 {
		data := filepath.Join(rootfs, "data")
		must(t, os.MkdirAll(data, 0o755))
		must(t, os.WriteFile(filepath.Join(data, "zeros"), make([]byte, zeros), 0o644))
		must(t, os.Chmod(filepath.Join(data, "zeros"), 0o644))
	}
}

// pinTimes sets atime and mtime of everything under root (root included,
// symlinks themselves) to Epoch.
func pinTimes(t testing.TB, root string) {
	t.Helper()
	tv := []unix.Timeval{unix.NsecToTimeval(Epoch.UnixNano()), unix.NsecToTimeval(Epoch.UnixNano())}
	var paths []string
	must(t, filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		paths = append(paths, p)
		return err
	}))
	// Children first: changing a child's times does not touch its
	// directory's mtime, but this order stays right if that ever changes.
	for i := len(paths) - 1; i >= 0; i-- {
		must(t, unix.Lutimes(paths[i], tv))
	}
}

// copyFile copies src to dst with mode perm.
func copyFile(t testing.TB, src, dst string, perm os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	must(t, err)
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	must(t, err)
	_, err = io.Copy(out, in)
	must(t, err)
	must(t, out.Close())
	must(t, os.Chmod(dst, perm))
}

// ReadIndex decodes layout/index.json or fails the test.
func ReadIndex(t testing.TB, layout string) v1.Index {
	t.Helper()
	var idx v1.Index
	b, err := os.ReadFile(filepath.Join(layout, v1.ImageIndexFile))
	must(t, err)
	must(t, json.Unmarshal(b, &idx))
	return idx
}

// BlobPath returns the path of d's blob in layout.
func BlobPath(layout string, d digest.Digest) string {
	return filepath.Join(layout, v1.ImageBlobsDir, d.Algorithm().String(), d.Encoded())
}

// AddManifest writes, in pure Go, a second image into layout that shares
// base's layers but whose config Cmd is cmd, appends its manifest to
// index.json tagged ref ("" for no tag), and returns its digest. Tests use
// it for multi-manifest indexes and tags that point elsewhere.
func AddManifest(t testing.TB, layout string, base digest.Digest, ref string, cmd []string) digest.Digest {
	t.Helper()
	var m v1.Manifest
	must(t, readJSON(BlobPath(layout, base), &m))
	var cfg v1.Image
	must(t, readJSON(BlobPath(layout, m.Config.Digest), &cfg))
	cfg.Config.Cmd = cmd
	m.Config = writeBlob(t, layout, v1.MediaTypeImageConfig, &cfg)
	desc := writeBlob(t, layout, v1.MediaTypeImageManifest, &m)
	if ref != "" {
		desc.Annotations = map[string]string{v1.AnnotationRefName: ref}
	}
	idx := ReadIndex(t, layout)
	idx.Manifests = append(idx.Manifests, desc)
	WriteIndex(t, layout, idx)
	return desc.Digest
}

// WriteIndex replaces layout/index.json with idx.
func WriteIndex(t testing.TB, layout string, idx v1.Index) {
	t.Helper()
	if idx.SchemaVersion == 0 {
		idx.Versioned = specs.Versioned{SchemaVersion: 2}
	}
	b, err := json.Marshal(idx)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(layout, v1.ImageIndexFile), b, 0o600))
}

// writeBlob stores v's JSON as a blob and returns its descriptor.
func writeBlob(t testing.TB, layout, mediaType string, v any) v1.Descriptor {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	d := digest.FromBytes(b)
	must(t, os.WriteFile(BlobPath(layout, d), b, 0o600))
	return v1.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(b))}
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("imagetest: %v", err)
	}
}

// OpenToAll makes every directory under dir (dir included) 0755 and every
// file 0644, for tests of peers that are not root.
func OpenToAll(t testing.TB, dir string) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return os.Chmod(p, 0o755)
		}
		return os.Chmod(p, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
