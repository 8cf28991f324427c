package image

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"hostkit.dev/cmd/containerization-helper/internal/image/imagetest"
)

// manifestOf reads d's manifest from layout.
func manifestOf(t *testing.T, layout string, d digest.Digest) v1.Manifest {
	t.Helper()
	var m v1.Manifest
	b, err := os.ReadFile(imagetest.BlobPath(layout, d))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestVerifyHappy(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newFixture(t)
	m := manifestOf(t, f.layout, f.manifest)
	for _, want := range []digest.Digest{"", f.manifest} {
		ev, err := Verify(context.Background(), f.layout, want, Limits{})
		is.NoErr(err)
		is.Equal(ev.ManifestDigest, f.manifest)
		is.Equal(ev.ConfigDigest, m.Config.Digest)
		is.Equal(len(ev.Layers), 1)
		is.Equal(ev.Layers[0], Layer{Digest: m.Layers[0].Digest, Size: m.Layers[0].Size, MediaType: v1.MediaTypeImageLayerGzip})
		is.Equal(ev.Platform, Platform{OS: "linux", Architecture: runtime.GOARCH})
		st, err := os.Stat(imagetest.BlobPath(f.layout, f.manifest))
		is.NoErr(err)
		is.Equal(ev.ManifestSize, st.Size())
		is.Equal(ev.TotalSize, st.Size()+m.Config.Size+m.Layers[0].Size)
		is.Equal(ev.Refs, []string{imagetest.DefaultTag})
	}
}

// Each row breaks a copy of the fixture and expects one code.
func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	m := manifestOf(t, f.layout, f.manifest)
	layer := m.Layers[0].Digest
	other := digest.FromString("not in the index")
	tests := []struct {
		name   string
		break_ func(t *testing.T, layout string) digest.Digest // returns the digest to ask for
		lim    Limits
		code   string
	}{
		{"tampered layer byte", func(t *testing.T, l string) digest.Digest {
			p := imagetest.BlobPath(l, layer)
			b := must1(t)(os.ReadFile(p))
			b[len(b)/2] ^= 0x01
			must(t, os.WriteFile(p, b, 0o600))
			return f.manifest
		}, Limits{}, CodeDigestMismatch},
		{"tampered config", func(t *testing.T, l string) digest.Digest {
			p := imagetest.BlobPath(l, m.Config.Digest)
			b := must1(t)(os.ReadFile(p))
			b[len(b)-2] = ' '
			must(t, os.WriteFile(p, b, 0o600))
			return ""
		}, Limits{}, CodeDigestMismatch},
		{"layer one byte longer", func(t *testing.T, l string) digest.Digest {
			p := imagetest.BlobPath(l, layer)
			b := must1(t)(os.ReadFile(p))
			must(t, os.WriteFile(p, append(b, 0), 0o600))
			return f.manifest
		}, Limits{}, CodeSizeMismatch},
		{"layer truncated", func(t *testing.T, l string) digest.Digest {
			must(t, os.Truncate(imagetest.BlobPath(l, layer), 10))
			return f.manifest
		}, Limits{}, CodeSizeMismatch},
		{"missing layer", func(t *testing.T, l string) digest.Digest {
			must(t, os.Remove(imagetest.BlobPath(l, layer)))
			return f.manifest
		}, Limits{}, CodeBlobMissing},
		{"missing manifest", func(t *testing.T, l string) digest.Digest {
			must(t, os.Remove(imagetest.BlobPath(l, f.manifest)))
			return f.manifest
		}, Limits{}, CodeBlobMissing},
		{"symlinked layer", func(t *testing.T, l string) digest.Digest {
			// Same bytes elsewhere: only the symlink itself is wrong.
			p := imagetest.BlobPath(l, layer)
			elsewhere := filepath.Join(t.TempDir(), "layer")
			must(t, os.Rename(p, elsewhere))
			must(t, os.Symlink(elsewhere, p))
			return f.manifest
		}, Limits{}, CodeBlobUnsafe},
		{"symlinked blobs/sha256", func(t *testing.T, l string) digest.Digest {
			dir := filepath.Join(l, "blobs", "sha256")
			elsewhere := filepath.Join(t.TempDir(), "sha256")
			must(t, os.Rename(dir, elsewhere))
			must(t, os.Symlink(elsewhere, dir))
			return f.manifest
		}, Limits{}, CodeBlobUnsafe},
		{"layer is a directory", func(t *testing.T, l string) digest.Digest {
			p := imagetest.BlobPath(l, layer)
			must(t, os.Remove(p))
			must(t, os.Mkdir(p, 0o700))
			return f.manifest
		}, Limits{}, CodeBlobUnsafe},
		{"two manifests, no digest", func(t *testing.T, l string) digest.Digest {
			imagetest.AddManifest(t, l, f.manifest, "other", []string{"/bin/true"})
			return ""
		}, Limits{}, CodeAmbiguous},
		{"digest not in the index", func(t *testing.T, l string) digest.Digest {
			return other
		}, Limits{}, CodeNotFound},
		{"tag name as digest", func(t *testing.T, l string) digest.Digest {
			return imagetest.DefaultTag
		}, Limits{}, CodeInvalid},
		{"sha512 digest", func(t *testing.T, l string) digest.Digest {
			return digest.Digest("sha512:" + strings.Repeat("ab", 64))
		}, Limits{}, CodeUnsupported},
		{"empty index", func(t *testing.T, l string) digest.Digest {
			imagetest.WriteIndex(t, l, v1.Index{Manifests: []v1.Descriptor{}})
			return ""
		}, Limits{}, CodeNotFound},
		{"nested index entry", func(t *testing.T, l string) digest.Digest {
			idx := imagetest.ReadIndex(t, l)
			idx.Manifests[0].MediaType = v1.MediaTypeImageIndex
			imagetest.WriteIndex(t, l, idx)
			return ""
		}, Limits{}, CodeUnsupported},
		{"descriptor with urls", func(t *testing.T, l string) digest.Digest {
			idx := imagetest.ReadIndex(t, l)
			idx.Manifests[0].URLs = []string{"https://example.com/x"}
			imagetest.WriteIndex(t, l, idx)
			return ""
		}, Limits{}, CodeUnsupported},
		{"index duplicate key", func(t *testing.T, l string) digest.Digest {
			b := must1(t)(os.ReadFile(filepath.Join(l, "index.json")))
			b = append([]byte(`{"schemaVersion":2,"SchemaVersion":2,`), b[len(`{"schemaVersion":2,`):]...)
			must(t, os.WriteFile(filepath.Join(l, "index.json"), b, 0o600))
			return ""
		}, Limits{}, CodeInvalid},
		{"index unknown field", func(t *testing.T, l string) digest.Digest {
			b := must1(t)(os.ReadFile(filepath.Join(l, "index.json")))
			b = append([]byte(`{"extra":1,`), b[1:]...)
			must(t, os.WriteFile(filepath.Join(l, "index.json"), b, 0o600))
			return ""
		}, Limits{}, CodeInvalid},
		{"index.json symlink", func(t *testing.T, l string) digest.Digest {
			p := filepath.Join(l, "index.json")
			elsewhere := filepath.Join(t.TempDir(), "index.json")
			must(t, os.Rename(p, elsewhere))
			must(t, os.Symlink(elsewhere, p))
			return ""
		}, Limits{}, CodeBlobUnsafe},
		{"missing oci-layout", func(t *testing.T, l string) digest.Digest {
			must(t, os.Remove(filepath.Join(l, "oci-layout")))
			return ""
		}, Limits{}, CodeNotFound},
		{"oci-layout version", func(t *testing.T, l string) digest.Digest {
			must(t, os.WriteFile(filepath.Join(l, "oci-layout"), []byte(`{"imageLayoutVersion":"2.0.0"}`), 0o600))
			return ""
		}, Limits{}, CodeUnsupported},
		{"missing layout", func(t *testing.T, l string) digest.Digest {
			must(t, os.RemoveAll(l))
			return ""
		}, Limits{}, CodeNotFound},
		{"layer over the limit", func(t *testing.T, l string) digest.Digest { return "" },
			Limits{MaxLayerBytes: 1000}, CodeTooLarge},
		{"index over the limit", func(t *testing.T, l string) digest.Digest { return "" },
			Limits{MaxDocBytes: 10}, CodeTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := f.clone(t)
			want := tt.break_(t, l)
			ev, err := Verify(context.Background(), l, want, tt.lim)
			isCode(t, err, tt.code)
			is.New(t).Equal(ev, nil)
		})
	}
}

// A tag never selects: with the other manifest tagged "latest" (umoci's
// default tag) and the fixture's, asking for the fixture's digest gets the
// fixture, and the tags are only reported.
func TestVerifyTagNeverSelects(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newFixture(t)
	l := f.clone(t)
	other := imagetest.AddManifest(t, l, f.manifest, "latest", []string{"/bin/true"})
	idx := imagetest.ReadIndex(t, l)
	idx.Manifests[0].Annotations[v1.AnnotationRefName] = "also-other"
	idx.Manifests = append(idx.Manifests, v1.Descriptor{MediaType: idx.Manifests[1].MediaType,
		Digest: other, Size: idx.Manifests[1].Size, Annotations: map[string]string{v1.AnnotationRefName: imagetest.DefaultTag}})
	imagetest.WriteIndex(t, l, idx)
	ev, err := Verify(context.Background(), l, f.manifest, Limits{})
	is.NoErr(err)
	is.Equal(ev.ManifestDigest, f.manifest)
	is.Equal(ev.Refs, []string{"also-other"})
	ev, err = Verify(context.Background(), l, other, Limits{})
	is.NoErr(err)
	is.Equal(ev.ManifestDigest, other)
	is.Equal(ev.Refs, []string{imagetest.DefaultTag, "latest"})
}

func TestVerifyCancelled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Verify(ctx, f.layout, "", Limits{})
	isCode(t, err, CodeCancelled)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// must1 returns a function that fails t on error and yields the value.
func must1(t *testing.T) func([]byte, error) []byte {
	return func(b []byte, err error) []byte {
		t.Helper()
		must(t, err)
		return b
	}
}
