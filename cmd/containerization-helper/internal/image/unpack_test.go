package image

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/matryer/is"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/runtime-spec/specs-go"
	"hostkit.dev/cmd/containerization-helper/internal/image/imagetest"
	"hostkit.dev/lib/procexec"
	"hostkit.dev/lib/wire"
)

// newUnpacker returns an Unpacker whose runner's policy holds exactly
// Rule(DefaultUmoci).
func newUnpacker(t testing.TB) *Unpacker {
	t.Helper()
	pol, err := procexec.NewPolicy([]procexec.Rule{Rule(DefaultUmoci)}, []string{MutationUnpack})
	if err != nil {
		t.Fatal(err)
	}
	r, err := procexec.NewRunner(procexec.Config{Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	u, err := NewUnpacker(Config{Runner: r})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// readSpec decodes bundle/config.json.
func readSpec(t *testing.T, bundle string) specs.Spec {
	t.Helper()
	var s specs.Spec
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	must(t, err)
	must(t, json.Unmarshal(b, &s))
	return s
}

// unpackedDigest reads the manifest digest umoci recorded in the bundle.
func unpackedDigest(t *testing.T, bundle string) digest.Digest {
	t.Helper()
	var m umociMeta
	b, err := os.ReadFile(filepath.Join(bundle, "umoci.json"))
	must(t, err)
	must(t, json.Unmarshal(b, &m))
	if len(m.From.Walk) != 1 {
		t.Fatalf("descriptor walk has %d steps", len(m.From.Walk))
	}
	return m.From.Walk[0].Digest
}

// entries lists the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	must(t, err)
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

const prefix = "io.hostkit."

func TestUnpack(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l, d := imagetest.BuildWith(t, t.TempDir(), imagetest.Options{
		Labels: map[string]string{prefix + "project": "forged", prefix + "other": "forged", "keep": "me",
			"run.oci.pidfd_receiver": "/tmp/evil.sock", ImageAnnotationPrefix + "title": "t"},
	})
	u := newUnpacker(t)
	root := t.TempDir()
	own := map[string]string{prefix + "project": "0b6e3c1e-8f0a-4e0e-9d51-1f7a8b2c3d4e", prefix + "fence": "7"}
	b, err := u.Unpack(context.Background(), Request{Layout: l, Manifest: d, Root: root, Name: "c1",
		Patch: Patch{Annotations: own, OwnedPrefix: prefix}})
	is.NoErr(err)
	is.Equal(b.Path, filepath.Join(root, "c1"))
	is.Equal(b.Evidence.ManifestDigest, d)
	is.Equal(entries(t, root), []string{"c1"}) // the staging layout is gone

	st, err := os.Lstat(filepath.Join(b.Path, "rootfs", "bin", "busybox"))
	is.NoErr(err)
	is.True(st.Mode().IsRegular())
	target, err := os.Readlink(filepath.Join(b.Path, "rootfs", "bin", "sh"))
	is.NoErr(err)
	is.Equal(target, "busybox")
	cst, err := os.Stat(filepath.Join(b.Path, "config.json"))
	is.NoErr(err)
	is.Equal(cst.Mode().Perm(), os.FileMode(0o600))

	s := readSpec(t, b.Path)
	is.Equal(s.Process.Terminal, false)
	is.Equal(s.Process.Args, []string{"/bin/sh"})
	is.Equal(s.Annotations[prefix+"project"], own[prefix+"project"])
	is.Equal(s.Annotations[prefix+"fence"], "7")
	_, forged := s.Annotations[prefix+"other"]
	is.True(!forged) // the image's label under our prefix was dropped
	// No image label may configure the runtime (crun obeys run.oci.*);
	// only the informational OCI image keys stay.
	_, kept := s.Annotations["keep"]
	is.True(!kept)
	_, receiver := s.Annotations["run.oci.pidfd_receiver"]
	is.True(!receiver)
	is.Equal(s.Annotations[ImageAnnotationPrefix+"title"], "t")
	is.Equal(unpackedDigest(t, b.Path), d)
}

func TestUnpackPatch(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l, _ := imagetest.Build(t, t.TempDir())
	u := newUnpacker(t)
	b, err := u.Unpack(context.Background(), Request{Layout: l, Root: t.TempDir(), Patch: Patch{
		Terminal: true, Args: []string{"/bin/echo", "hi"}, Env: []string{"A=1"}, Cwd: "/bin",
	}})
	is.NoErr(err)
	is.True(validName(b.Name))
	s := readSpec(t, b.Path)
	is.Equal(s.Process.Terminal, true)
	is.Equal(s.Process.Args, []string{"/bin/echo", "hi"})
	is.Equal(s.Process.Env, []string{"A=1"})
	is.Equal(s.Process.Cwd, "/bin")
}

// The caller's layout tags another manifest "latest" (umoci's default tag)
// and "fixture"; asking for the fixture's digest unpacks the fixture: its
// Cmd, and umoci.json names its digest.
func TestUnpackTagNeverSelects(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newFixture(t)
	l := f.clone(t)
	other := imagetest.AddManifest(t, l, f.manifest, "latest", []string{"/bin/false"})
	idx := imagetest.ReadIndex(t, l)
	idx.Manifests[0].Annotations = nil // the fixture itself is untagged now
	imagetest.WriteIndex(t, l, idx)
	u := newUnpacker(t)
	b, err := u.Unpack(context.Background(), Request{Layout: l, Manifest: f.manifest, Root: t.TempDir(), Name: "a"})
	is.NoErr(err)
	is.Equal(unpackedDigest(t, b.Path), f.manifest)
	is.Equal(readSpec(t, b.Path).Process.Args, []string{"/bin/sh"})
	b, err = u.Unpack(context.Background(), Request{Layout: l, Manifest: other, Root: t.TempDir(), Name: "b"})
	is.NoErr(err)
	is.Equal(unpackedDigest(t, b.Path), other)
	is.Equal(readSpec(t, b.Path).Process.Args, []string{"/bin/false"})
}

// Refusals leave the root as it was.
func TestUnpackRefuses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	m := manifestOf(t, f.layout, f.manifest)
	u := newUnpacker(t)
	noRule, err := procexec.NewPolicy(nil, nil)
	must(t, err)
	r, err := procexec.NewRunner(procexec.Config{Policy: noRule})
	must(t, err)
	denied, err := NewUnpacker(Config{Runner: r})
	must(t, err)
	tests := []struct {
		name  string
		u     *Unpacker
		setup func(t *testing.T, req *Request)
		code  string
		left  []string // what the root holds afterwards
	}{
		{"tampered layer", u, func(t *testing.T, req *Request) {
			req.Layout = f.clone(t)
			p := imagetest.BlobPath(req.Layout, m.Layers[0].Digest)
			b := must1(t)(os.ReadFile(p))
			b[100] ^= 0xff
			must(t, os.WriteFile(p, b, 0o600))
		}, CodeDigestMismatch, nil},
		{"bundle exists", u, func(t *testing.T, req *Request) {
			must(t, os.Mkdir(filepath.Join(req.Root, "c"), 0o700))
		}, CodeBundleExists, []string{"c"}},
		{"name traversal", u, func(t *testing.T, req *Request) { req.Name = "../evil" }, CodePathUnsafe, nil},
		{"name with slash", u, func(t *testing.T, req *Request) { req.Name = "a/b" }, CodePathUnsafe, nil},
		{"name upper case", u, func(t *testing.T, req *Request) { req.Name = "Abc" }, CodePathUnsafe, nil},
		{"relative root", u, func(t *testing.T, req *Request) { req.Root = "tmp" }, CodePathUnsafe, nil},
		{"unclean root", u, func(t *testing.T, req *Request) { req.Root += "/../" + filepath.Base(req.Root) }, CodePathUnsafe, nil},
		{"world-writable root", u, func(t *testing.T, req *Request) { must(t, os.Chmod(req.Root, 0o777)) }, CodePathUnsafe, nil},
		{"symlinked root", u, func(t *testing.T, req *Request) {
			link := filepath.Join(t.TempDir(), "link")
			must(t, os.Symlink(req.Root, link))
			req.Root = link
		}, CodePathUnsafe, nil},
		{"relative cwd", u, func(t *testing.T, req *Request) { req.Patch.Cwd = "bin" }, CodeBundleInvalid, nil},
		{"empty args", u, func(t *testing.T, req *Request) { req.Patch.Args = []string{} }, CodeBundleInvalid, nil},
		{"env repeats a key", u, func(t *testing.T, req *Request) { req.Patch.Env = []string{"A=1", "A=2"} }, CodeBundleInvalid, nil},
		{"umoci not in the policy", denied, func(t *testing.T, req *Request) {}, CodeUnpackFailed, nil},
		{"cancelled", u, func(t *testing.T, req *Request) {}, CodeCancelled, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			req := Request{Layout: f.layout, Manifest: f.manifest, Root: t.TempDir(), Name: "c"}
			root := req.Root
			tt.setup(t, &req)
			ctx, cancel := context.WithCancel(context.Background())
			if tt.name == "cancelled" {
				cancel()
			}
			defer cancel()
			b, err := tt.u.Unpack(ctx, req)
			isCode(t, err, tt.code)
			switch tt.code {
			case CodeUnpackFailed:
				is.Equal(wire.AsError(err).Retry, wire.RetryAfterObserve)
			case CodeCancelled:
				is.Equal(wire.AsError(err).Retry, wire.RetrySafe)
			default:
				is.Equal(wire.AsError(err).Retry, wire.RetryNever)
			}
			is.Equal(b, nil)
			is.Equal(entries(t, root), tt.left)
		})
	}
}

// checkUmociJSON refuses any walk but the one verified manifest.
func TestCheckUmociJSON(t *testing.T) {
	t.Parallel()
	d := digest.FromString("m")
	other := digest.FromString("o")
	mt := `"application/vnd.oci.image.manifest.v1+json"`
	desc := func(x digest.Digest) string { return `{"mediaType":` + mt + `,"digest":"` + x.String() + `","size":1}` }
	tests := []struct {
		name, body string
		ok         bool
	}{
		{"match", `{"umoci_version":"2","from_descriptor_path":{"descriptor_walk":[` + desc(d) + `]}}`, true},
		{"other digest", `{"from_descriptor_path":{"descriptor_walk":[` + desc(other) + `]}}`, false},
		{"two steps", `{"from_descriptor_path":{"descriptor_walk":[` + desc(d) + `,` + desc(d) + `]}}`, false},
		{"empty walk", `{"from_descriptor_path":{"descriptor_walk":[]}}`, false},
		{"duplicate key", `{"from_descriptor_path":{"descriptor_walk":[` + desc(other) + `]},"from_descriptor_path":{"descriptor_walk":[` + desc(d) + `]}}`, false},
		{"not json", `umoci`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			must(t, os.WriteFile(filepath.Join(dir, "umoci.json"), []byte(tt.body), 0o600))
			f, err := os.Open(dir)
			must(t, err)
			defer f.Close()
			err = checkUmociJSON(f, d)
			if tt.ok {
				is.New(t).NoErr(err)
			} else {
				isCode(t, err, CodeUnpackMismatch)
			}
		})
	}
}
