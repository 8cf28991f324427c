package image

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"testing"

	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"hostkit.dev/cmd/containerization-helper/internal/image/imagetest"
)

// benchPayload makes the fixture about 2 MB: busybox's ~1.1 MB gzip
// layer plus 1 MiB of incompressible payload.
const benchPayload = 1 << 20

// BenchmarkVerify verifies a ~2 MB image blob by blob (hashing every byte).
func BenchmarkVerify(b *testing.B) {
	l, d := imagetest.BuildWith(b, b.TempDir(), imagetest.Options{PayloadBytes: benchPayload})
	ev, err := Verify(context.Background(), l, d, Limits{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(ev.TotalSize)
	b.ReportMetric(float64(ev.TotalSize), "image_bytes")
	for b.Loop() {
		if _, err := Verify(context.Background(), l, d, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnpack runs the whole Unpack of a ~2 MB image: verify with the
// staging copy, umoci unpack, umoci.json check, config.json patch.
func BenchmarkUnpack(b *testing.B) {
	l, d := imagetest.BuildWith(b, b.TempDir(), imagetest.Options{PayloadBytes: benchPayload})
	u := newUnpacker(b)
	root := b.TempDir()
	i := 0
	for b.Loop() {
		i++
		bd, err := u.Unpack(context.Background(), Request{Layout: l, Manifest: d, Root: root, Name: "b" + strconv.Itoa(i),
			Patch: Patch{Annotations: map[string]string{"io.hostkit.project": "x"}}})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := os.RemoveAll(bd.Path); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkMeasureLayer decompresses and walks the ~2 MB image's layer
// as a fill does while copying it (the unpacked-size cap); compare with
// BenchmarkUnpack for what the cap adds to a fill.
func BenchmarkMeasureLayer(b *testing.B) {
	l, d := imagetest.BuildWith(b, b.TempDir(), imagetest.Options{PayloadBytes: benchPayload})
	var m struct {
		Layers []struct {
			Digest    digest.Digest `json:"digest"`
			MediaType string        `json:"mediaType"`
		} `json:"layers"`
	}
	mb, err := os.ReadFile(imagetest.BlobPath(l, d))
	if err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(mb, &m); err != nil || len(m.Layers) != 1 {
		b.Fatalf("manifest: %v", err)
	}
	layer, err := os.ReadFile(imagetest.BlobPath(l, m.Layers[0].Digest))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(layer)))
	for b.Loop() {
		if _, err := measureLayer(bytes.NewReader(layer), m.Layers[0].MediaType == v1.MediaTypeImageLayerGzip, DefaultMaxUnpackedBytes); err != nil {
			b.Fatal(err)
		}
	}
}
