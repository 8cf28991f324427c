package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/matryer/is"
	"github.com/opencontainers/go-digest"
	"hostkit.dev/cmd/containerization-helper/internal/image/imagetest"
	"hostkit.dev/lib/procexec"
)

// newUnpackerWith is newUnpacker with limits.
func newUnpackerWith(t *testing.T, lim Limits) *Unpacker {
	t.Helper()
	pol, err := procexec.NewPolicy([]procexec.Rule{Rule(DefaultUmoci)}, []string{MutationUnpack})
	must(t, err)
	r, err := procexec.NewRunner(procexec.Config{Policy: pol})
	must(t, err)
	u, err := NewUnpacker(Config{Runner: r, Limits: lim})
	must(t, err)
	return u
}

// The unpacked-size cap, through umoci on real fixture images: an image
// whose layer decompresses past the cap (16 MiB of zeros in about 1 MiB
// gzipped next to busybox) is refused before umoci runs, by Prepare and Unpack, and
// leaves no cache entry, fill, staging layout or bundle; the same image
// under a larger cap, and a small image under the small cap, unpack.
func TestUnpackedSizeCap(t *testing.T) {
	t.Parallel()
	const zeros = 16 << 20
	bomb, bombDigest := imagetest.BuildWith(t, t.TempDir(), imagetest.Options{ZeroBytes: zeros})
	small, smallDigest := imagetest.Build(t, t.TempDir())
	var layerBytes int64
	for _, l := range manifestOf(t, bomb, bombDigest).Layers {
		layerBytes += l.Size
	}
	if layerBytes >= zeros/8 {
		t.Fatalf("the fixture's layer is %d bytes: not a bomb", layerBytes)
	}
	tests := []struct {
		name     string
		layout   string
		manifest digest.Digest
		cap      int64
		code     string // "" allowed
	}{
		{"bomb over the cap", bomb, bombDigest, 8 << 20, CodeTooLarge},
		{"bomb under a larger cap", bomb, bombDigest, 64 << 20, ""},
		{"small image under the small cap", small, smallDigest, 8 << 20, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			u := newUnpackerWith(t, Limits{MaxUnpackedBytes: tc.cap})
			base := t.TempDir()
			bundles, cache := filepath.Join(base, "bundles"), filepath.Join(base, "rootfs")
			is.NoErr(os.Mkdir(bundles, 0o700))
			is.NoErr(os.Mkdir(cache, 0o700))
			ctx := context.Background()
			req := Request{Layout: tc.layout, Manifest: tc.manifest, Root: bundles, Name: "hk-a",
				Patch: Patch{CgroupsPath: "/hostkit/hk-a"}}
			_, err := u.Prepare(ctx, req, cache)
			req.Name = "hk-b"
			_, uerr := u.Unpack(ctx, req)
			if tc.code != "" {
				isCode(t, err, tc.code)
				isCode(t, uerr, tc.code)
				is.Equal(entries(t, cache), nil)   // no entry, no .fill-, no .stage-
				is.Equal(entries(t, bundles), nil) // no bundle, no staging layout
				return
			}
			is.NoErr(err)
			is.NoErr(uerr)
			is.Equal(entries(t, cache), []string{req.Manifest.Encoded()})
			is.Equal(entries(t, bundles), []string{"hk-a", "hk-b"})
		})
	}
}

// measureLayer charges the larger of the decompressed length and the
// entries' sizes in whole blocks: a gzip bomb, a sparse entry whose
// logical size is 1 GiB in a 2 KiB tar, and a stream of empty entries
// are refused under a cap their compressed size would pass.
func TestMeasureLayer(t *testing.T) {
	t.Parallel()
	files := func(n, size int) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for i := range n {
			must(t, tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("f%d", i), Mode: 0o644, Size: int64(size), Typeflag: tar.TypeReg}))
			_, err := tw.Write(make([]byte, size))
			must(t, err)
		}
		must(t, tw.Close())
		return b.Bytes()
	}
	gz := func(b []byte) []byte {
		var out bytes.Buffer
		zw := gzip.NewWriter(&out)
		_, err := zw.Write(b)
		must(t, err)
		must(t, zw.Close())
		return out.Bytes()
	}
	tests := []struct {
		name   string
		layer  []byte
		gz     bool
		budget int64
		code   string
		charge int64 // when allowed
	}{
		{"small files: blocks", files(10, 100), false, 1 << 20, "", 10 * 4096},
		{"one big file: stream", files(1, 1<<20), false, 2 << 20, "", 1<<20 + 512 + 1024},
		{"gzip under the budget", gz(files(1, 1<<20)), true, 2 << 20, "", 1<<20 + 512 + 1024},
		{"gzip bomb", gz(files(1, 4<<20)), true, 1 << 20, CodeTooLarge, 0},
		{"empty entries", files(300, 0), false, 1 << 20, CodeTooLarge, 0},
		{"sparse entry", sparseTar(t, 1<<30), false, 64 << 20, CodeTooLarge, 0},
		{"trailing bytes after gzip", append(gz(files(1, 10)), "junk"...), true, 1 << 20, "", 4096},
		{"not gzip", files(1, 10), true, 1 << 20, CodeInvalid, 0},
		{"not tar", bytes.Repeat([]byte{1}, 1024), false, 1 << 20, CodeInvalid, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			n, err := measureLayer(bytes.NewReader(tc.layer), tc.gz, tc.budget)
			if tc.code != "" {
				isCode(t, err, tc.code)
				return
			}
			is.NoErr(err)
			is.Equal(n, tc.charge)
		})
	}
}

// sparseTar is a PAX (GNU sparse 1.0) tar of one file with no data whose
// logical size is size bytes. archive/tar does not write sparse files, so
// the PAX header block is made by hand.
func sparseTar(t *testing.T, size int64) []byte {
	t.Helper()
	rec := func(k, v string) string {
		for l := len(k) + len(v) + 3; ; l++ {
			if r := fmt.Sprintf("%d %s=%s\n", l, k, v); len(r) == l {
				return r
			}
		}
	}
	recs := rec("GNU.sparse.major", "1") + rec("GNU.sparse.minor", "0") + rec("GNU.sparse.name", "f") +
		rec("GNU.sparse.realsize", fmt.Sprint(size))
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	must(t, tw.WriteHeader(&tar.Header{Name: "pax", Typeflag: tar.TypeReg, Size: int64(len(recs)), Format: tar.FormatUSTAR}))
	_, err := tw.Write([]byte(recs))
	must(t, err)
	must(t, tw.Flush())
	raw := b.Bytes()
	raw[156] = tar.TypeXHeader // typeflag; then the header checksum again
	copy(raw[148:156], "        ")
	sum := 0
	for _, c := range raw[:512] {
		sum += int(c)
	}
	copy(raw[148:156], fmt.Sprintf("%06o\x00 ", sum))
	sparseMap := make([]byte, 512)
	copy(sparseMap, "1\n0\n0\n") // one region, at 0, of 0 bytes
	must(t, tw.WriteHeader(&tar.Header{Name: "GNUSparseFile.0/f", Mode: 0o644, Size: 512, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}))
	_, err = tw.Write(sparseMap)
	must(t, err)
	must(t, tw.Close())
	return b.Bytes()
}
