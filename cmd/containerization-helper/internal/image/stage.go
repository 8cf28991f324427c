package image

import (
	"encoding/json"
	"errors"
	"io"
	"os"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"
	"hostkit.dev/lib/wire"
)

// stage is the private staging layout: a 0700 directory under the root
// with blobs/sha256, filled by verify through blobSink. It measures every
// layer as it is copied (layerMeter) and refuses, with CodeTooLarge, an
// image whose layers together unpack to more than budget bytes.
type stage struct {
	dir, sha *os.File
	budget   int64                   // Limits.MaxUnpackedBytes
	used     int64                   // bytes charged so far, all layers
	charged  map[digest.Digest]int64 // each layer's charge, for a layer listed twice
}

// newStage makes root/name/blobs/sha256, each 0700; the image's layers
// may unpack to at most budget bytes.
func newStage(rootfd int, name string, budget int64) (*stage, error) {
	fail := func(err error) (*stage, error) {
		return nil, wire.Wrap(CodeUnpackFailed, "cannot make the staging layout", err)
	}
	if err := unix.Mkdirat(rootfd, name, 0o700); err != nil {
		return fail(err)
	}
	dir, err := openAt(rootfd, name, true, CodeUnpackFailed)
	if err != nil {
		return fail(err)
	}
	s := &stage{dir: dir, budget: budget, charged: map[digest.Digest]int64{}}
	if err := unix.Mkdirat(int(dir.Fd()), "blobs", 0o700); err != nil {
		dir.Close()
		return fail(err)
	}
	blobs, err := openAt(int(dir.Fd()), "blobs", true, CodeUnpackFailed)
	if err != nil {
		dir.Close()
		return fail(err)
	}
	defer blobs.Close()
	if err := unix.Mkdirat(int(blobs.Fd()), "sha256", 0o700); err != nil {
		dir.Close()
		return fail(err)
	}
	if s.sha, err = openAt(int(blobs.Fd()), "sha256", true, CodeUnpackFailed); err != nil {
		dir.Close()
		return fail(err)
	}
	return s, nil
}

// Close releases the staging descriptors (the caller removes the tree).
func (s *stage) Close() error {
	s.sha.Close()
	return s.dir.Close()
}

// create implements blobSink. A layer's writer measures it (layerMeter);
// a layer listed again is charged again (umoci applies it again).
// Errors: CodeUnpackFailed, CodeTooLarge.
func (s *stage) create(d v1.Descriptor) (io.WriteCloser, error) {
	layer := layerTypes[d.MediaType]
	f, err := createAt(int(s.sha.Fd()), d.Digest.Encoded())
	if errors.Is(err, unix.EEXIST) {
		if n, ok := s.charged[d.Digest]; ok && layer {
			return nil, s.charge(d.Digest, n)
		}
		return nil, nil // listed twice; the first copy was verified
	}
	if err != nil {
		return nil, wire.Wrap(CodeUnpackFailed, "cannot write the staging layout", err)
	}
	if !layer {
		return f, nil
	}
	m := newLayerMeter(d.MediaType, s.budget-s.used)
	return &meteredFile{f: f, m: m, charge: func(n int64) error { return s.charge(d.Digest, n) }}, nil
}

// charge adds n bytes of layer d to the image's total. Errors:
// CodeTooLarge.
func (s *stage) charge(d digest.Digest, n int64) error {
	s.charged[d] = n
	s.used += n
	if s.used > s.budget || s.used < 0 {
		return wire.Errorf(CodeTooLarge, "the image's layers unpack to more than %d bytes", s.budget)
	}
	return nil
}

// writeIndex writes the staging oci-layout and an index.json holding only
// desc, tagged tag.
func (s *stage) writeIndex(desc v1.Descriptor, tag string) error {
	idx := v1.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: v1.MediaTypeImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType:   desc.MediaType,
			Digest:      desc.Digest,
			Size:        desc.Size,
			Annotations: map[string]string{v1.AnnotationRefName: tag},
		}},
	}
	ib, err := json.Marshal(idx)
	if err != nil {
		return wire.Wrap(CodeUnpackFailed, "cannot encode the staging index", err)
	}
	lb, _ := json.Marshal(v1.ImageLayout{Version: v1.ImageLayoutVersion})
	for _, f := range []struct {
		name string
		b    []byte
	}{{v1.ImageLayoutFile, lb}, {v1.ImageIndexFile, ib}} {
		w, err := createAt(int(s.dir.Fd()), f.name)
		if err == nil {
			_, err = w.Write(f.b)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return wire.Wrap(CodeUnpackFailed, "cannot write the staging layout", err)
		}
	}
	return nil
}

// createAt creates name in dirfd exclusively, 0600, never through a
// symlink.
func createAt(dirfd int, name string) (*os.File, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}
