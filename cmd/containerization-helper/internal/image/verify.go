package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"slices"

	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"
	"hostkit.dev/lib/wire"
)

// Limits caps what Verify reads. A zero field means its default.
type Limits struct {
	// MaxDocBytes caps oci-layout, index.json, the manifest and the config
	// (bytes; default 4 MiB).
	MaxDocBytes int64
	// MaxIndexEntries caps the descriptors in index.json (default 1024).
	MaxIndexEntries int
	// MaxLayers caps a manifest's layers (default 128).
	MaxLayers int
	// MaxLayerBytes caps one layer's declared size (bytes; default 8 GiB).
	MaxLayerBytes int64
	// MaxTotalBytes caps manifest + config + layers (bytes; default 16 GiB).
	MaxTotalBytes int64
	// MaxUnpackedBytes caps what an unpack may write (bytes; default
	// DefaultMaxUnpackedBytes, 4 GiB): every layer is decompressed and
	// its tar stream walked as it is copied into the staging layout, and
	// an image whose layers together would unpack to more (the larger of
	// the decompressed length and the entries' sizes in whole 4 KiB
	// blocks, at least one per entry) is CodeTooLarge before umoci runs.
	// Verify alone does not decompress, so it does not apply there.
	MaxUnpackedBytes int64
}

// withDefaults fills zero fields.
func (l Limits) withDefaults() Limits {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxDocBytes, 4<<20)
	def(&l.MaxLayerBytes, 8<<30)
	def(&l.MaxTotalBytes, 16<<30)
	def(&l.MaxUnpackedBytes, DefaultMaxUnpackedBytes)
	if l.MaxIndexEntries <= 0 {
		l.MaxIndexEntries = 1024
	}
	if l.MaxLayers <= 0 {
		l.MaxLayers = 128
	}
	return l
}

// Layer is one verified layer blob.
type Layer struct {
	Digest    digest.Digest // the blob's digest, recomputed from its bytes
	Size      int64         // bytes, as declared and as read
	MediaType string        // an OCI tar or tar+gzip layer media type
}

// Platform is the os/architecture (and variant) from the image config.
type Platform struct {
	OS           string // GOOS values, e.g. "linux"
	Architecture string // GOARCH values, e.g. "amd64"
	Variant      string // CPU variant, e.g. "v8"; "" when the config has none
}

// Evidence is what Verify proved about one image; it feeds the
// `image.evidence` op. Every digest was recomputed from the bytes on disk.
type Evidence struct {
	ManifestDigest digest.Digest // the manifest's digest, recomputed
	ManifestSize   int64         // bytes
	ConfigDigest   digest.Digest // the image config's digest, recomputed
	Layers         []Layer       // in manifest order (lowest first)
	Platform       Platform      // from the image config
	// TotalSize is manifest + config + layers, in bytes.
	TotalSize int64
	// Refs are the index's org.opencontainers.image.ref.name values on
	// entries with this digest, sorted: information only, never used to
	// select.
	Refs []string
}

// blobSink receives a verified copy of each blob (the private staging
// layout of Unpack); nil discards.
type blobSink interface {
	// create returns a writer for d's bytes, or nil when d is already
	// there (a blob listed twice).
	create(d v1.Descriptor) (io.WriteCloser, error)
}

// Verify opens the OCI image layout at dir, selects a manifest (by want,
// or the only one when want is ""), and verifies the manifest, its config
// and every layer blob by blob (package doc). Errors: CodeNotFound,
// CodeAmbiguous, CodeInvalid, CodeUnsupported, CodeTooLarge,
// CodeBlobMissing, CodeBlobUnsafe, CodeSizeMismatch, CodeDigestMismatch,
// CodeCancelled (ctx ended; checked between chunks).
func Verify(ctx context.Context, dir string, want digest.Digest, lim Limits) (*Evidence, error) {
	l, err := openLayout(dir)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	ev, _, err := verify(ctx, l, want, lim.withDefaults(), nil, nil)
	return ev, withRetry(err)
}

// Verify is the package's Verify with u's limits, remembering the layers
// it hashed (by device, inode, size, mtime and ctime) so that a later
// verification of unchanged files only opens and stats them. Errors: as
// Verify.
func (u *Unpacker) Verify(ctx context.Context, dir string, want digest.Digest) (*Evidence, error) {
	return u.VerifyFor(ctx, nil, dir, want)
}

// VerifyFor is Unpacker.Verify reading dir for r (Reader: as far as r
// could read it itself; nil is the helper itself). Errors: as Verify; for
// a non-root r, a layout path or file it may not read is the same error
// as a missing one.
func (u *Unpacker) VerifyFor(ctx context.Context, r *Reader, dir string, want digest.Digest) (*Evidence, error) {
	l, err := openLayoutFor(dir, r)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	ev, _, err := verify(ctx, l, want, u.limits, nil, u.hashed)
	return ev, withRetry(err)
}

// withRetry sets the retry hint docs/protocol.md gives each code:
// after_observe for a failed unpack (umoci may have written part of a
// bundle before it was removed), safe for a cancellation, never otherwise.
func withRetry(err error) error {
	var we *wire.Error
	if !errors.As(err, &we) {
		return err
	}
	switch we.Code {
	case CodeUnpackFailed:
		we.Retry = wire.RetryAfterObserve
	case CodeCancelled:
		we.Retry = wire.RetrySafe
	}
	return err
}

// verify is Verify on an open layout; it also returns the selected index
// descriptor and copies every blob into sink when sink is not nil. hc,
// when not nil, is consulted for layers only when there is no sink, and
// learns every layer that hashed right.
func verify(ctx context.Context, l *layoutDir, want digest.Digest, lim Limits, sink blobSink, hc *hashCache) (*Evidence, v1.Descriptor, error) {
	var none v1.Descriptor
	b, err := l.readSmall(v1.ImageLayoutFile, lim.MaxDocBytes)
	if err != nil {
		return nil, none, err
	}
	if err := decodeLayoutFile(b); err != nil {
		return nil, none, err
	}
	if b, err = l.readSmall(v1.ImageIndexFile, lim.MaxDocBytes); err != nil {
		return nil, none, err
	}
	idx, err := decodeIndex(b, lim.MaxIndexEntries)
	if err != nil {
		return nil, none, err
	}
	desc, refs, err := selectManifest(idx, want)
	if err != nil {
		return nil, none, err
	}
	if desc.Size > lim.MaxDocBytes {
		return nil, none, wire.Errorf(CodeTooLarge, "the manifest is larger than %d bytes", lim.MaxDocBytes)
	}
	mb, err := readBlob(ctx, l, desc, sink, true, nil)
	if err != nil {
		return nil, none, err
	}
	m, err := decodeManifest(mb, lim.MaxLayers)
	if err != nil {
		return nil, none, err
	}
	total := desc.Size + m.Config.Size
	for _, ld := range m.Layers {
		if ld.Size > lim.MaxLayerBytes {
			return nil, none, wire.Errorf(CodeTooLarge, "a layer is larger than %d bytes", lim.MaxLayerBytes)
		}
		total += ld.Size
	}
	if m.Config.Size > lim.MaxDocBytes || total > lim.MaxTotalBytes || total < 0 {
		return nil, none, wire.Errorf(CodeTooLarge, "the image is larger than the limits allow")
	}
	cb, err := readBlob(ctx, l, m.Config, sink, true, nil)
	if err != nil {
		return nil, none, err
	}
	cfg, err := decodeConfig(cb, len(m.Layers))
	if err != nil {
		return nil, none, err
	}
	ev := &Evidence{
		ManifestDigest: desc.Digest,
		ManifestSize:   desc.Size,
		ConfigDigest:   m.Config.Digest,
		Layers:         make([]Layer, 0, len(m.Layers)),
		Platform:       Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant},
		TotalSize:      total,
		Refs:           refs,
	}
	for _, ld := range m.Layers {
		if _, err := readBlob(ctx, l, ld, sink, false, hc); err != nil {
			return nil, none, err
		}
		ev.Layers = append(ev.Layers, Layer{Digest: ld.Digest, Size: ld.Size, MediaType: ld.MediaType})
	}
	return ev, desc, nil
}

// selectManifest picks the index entry by digest, never by tag (package
// doc), and returns it with its tags. An index may list one manifest under
// several tags; those entries must agree.
func selectManifest(idx *v1.Index, want digest.Digest) (v1.Descriptor, []string, error) {
	var none v1.Descriptor
	if len(idx.Manifests) == 0 {
		return none, nil, wire.Errorf(CodeNotFound, "index.json lists no manifests")
	}
	if want == "" {
		want = idx.Manifests[0].Digest
		for _, d := range idx.Manifests[1:] {
			if d.Digest != want {
				return none, nil, wire.Errorf(CodeAmbiguous, "index.json lists several manifests: name one by digest")
			}
		}
	} else if err := checkDigest(want, "the requested manifest"); err != nil {
		return none, nil, err
	}
	var sel *v1.Descriptor
	var refs []string
	for i := range idx.Manifests {
		d := &idx.Manifests[i]
		if d.Digest != want {
			continue
		}
		if sel != nil && (sel.Size != d.Size || sel.MediaType != d.MediaType) {
			return none, nil, wire.Errorf(CodeInvalid, "index.json lists one digest with different sizes or media types")
		}
		sel = d
		if r := refName(*d); r != "" {
			refs = append(refs, r)
		}
	}
	if sel == nil {
		return none, nil, wire.Errorf(CodeNotFound, "index.json has no manifest with the requested digest")
	}
	switch sel.MediaType {
	case v1.MediaTypeImageManifest:
	case v1.MediaTypeImageIndex:
		return none, nil, wire.Errorf(CodeUnsupported, "the selected entry is a nested index; name a manifest digest")
	default:
		return none, nil, wire.Errorf(CodeUnsupported, "the selected entry is not an OCI image manifest")
	}
	slices.Sort(refs)
	return *sel, slices.Compact(refs), nil
}

// copyBuf is the streaming chunk size.
const copyBuf = 256 << 10

// readBlob streams d's blob through SHA-256 (and into sink), reading at
// most d.Size+1 bytes, and checks its size and digest. With keep it
// returns the bytes (callers bound d.Size first). Without a sink, a blob
// hc says is unchanged since it hashed to d.Digest is not read again.
// Errors: CodeBlobMissing, CodeBlobUnsafe, CodeSizeMismatch,
// CodeDigestMismatch, CodeCancelled.
func readBlob(ctx context.Context, l *layoutDir, d v1.Descriptor, sink blobSink, keep bool, hc *hashCache) ([]byte, error) {
	f, err := l.openBlob(d.Digest)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, wire.Wrap(CodeBlobUnsafe, "cannot stat a blob", err)
	}
	if st.Size != d.Size {
		return nil, wire.Errorf(CodeSizeMismatch, "blob %s has %d bytes, its descriptor says %d", d.Digest, st.Size, d.Size)
	}
	if sink == nil && !keep && hc.hit(&st, d.Digest) {
		return nil, nil
	}
	var out io.WriteCloser
	if sink != nil {
		if out, err = sink.create(d); err != nil {
			return nil, err
		}
	}
	h := sha256.New()
	var kept []byte
	if keep {
		kept = make([]byte, 0, d.Size)
	}
	buf := make([]byte, min(copyBuf, d.Size+1))
	var n int64
	for n <= d.Size {
		if err := ctx.Err(); err != nil {
			closeSink(out)
			return nil, &wire.Error{Code: CodeCancelled, Msg: "cancelled while reading a blob", Retry: wire.RetrySafe, Err: err}
		}
		k, err := f.Read(buf)
		if k > 0 {
			chunk := buf[:k]
			h.Write(chunk)
			if keep {
				kept = append(kept, chunk...)
			}
			if out != nil {
				if _, werr := out.Write(chunk); werr != nil {
					closeSink(out)
					return nil, sinkErr(werr)
				}
			}
			n += int64(k)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			closeSink(out)
			return nil, wire.Wrap(CodeBlobUnsafe, "cannot read a blob", err)
		}
	}
	var closeErr error
	if out != nil {
		closeErr = out.Close()
	}
	if n != d.Size {
		return nil, wire.Errorf(CodeSizeMismatch, "blob %s changed size while it was read", d.Digest)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != d.Digest.Encoded() {
		return nil, wire.Errorf(CodeDigestMismatch, "blob %s does not hash to its digest", d.Digest)
	}
	if closeErr != nil { // the staging copy, or the layer's measurement
		return nil, sinkErr(closeErr)
	}
	if !keep {
		hc.put(&st, d.Digest)
	}
	return kept, nil
}

// sinkErr is a staging write's error: the layer measurement's own
// (CodeTooLarge, CodeInvalid) as it is, a file error as
// CodeUnpackFailed.
func sinkErr(err error) error {
	var we *wire.Error
	if errors.As(err, &we) {
		return err
	}
	return wire.Wrap(CodeUnpackFailed, "cannot write the staging copy of a blob", err)
}

// closeSink closes a staging writer after a failure; the staging layout is
// removed as a whole, so its error does not matter.
func closeSink(w io.WriteCloser) {
	if w != nil {
		w.Close()
	}
}
