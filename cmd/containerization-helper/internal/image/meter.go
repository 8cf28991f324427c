package image

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"os"

	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"hostkit.dev/lib/wire"
)

// DefaultMaxUnpackedBytes is Limits.MaxUnpackedBytes's default: 4 GiB.
const DefaultMaxUnpackedBytes = 4 << 30

// entryBlock is what one tar entry is charged at least, and the unit its
// size is rounded up to (bytes): a file, directory or link takes at least
// one file-system block on disk, whatever its tar size.
const entryBlock = 4096

// errOverBudget stops a layer's measurement once it passes the budget.
var errOverBudget = errors.New("over the unpacked size budget")

// layerMeter measures one layer's uncompressed size while its bytes are
// copied into the staging layout: the copy feeds it through a pipe, and a
// goroutine decompresses (tar+gzip) and walks the tar stream, never
// writing anything. It charges the larger of the decompressed stream's
// length and the sum of the entries' sizes, each rounded up to whole
// entryBlock blocks with at least one block per entry (so a sparse entry
// counts its logical size, the size umoci writes, and a stream of empty
// entries counts what their inodes and directory blocks take). Once the
// charge passes the budget the goroutine stops reading, and the next
// write into the pipe fails with CodeTooLarge: umoci never runs on a layer
// that would unpack past the cap.
type layerMeter struct {
	pw   *io.PipeWriter
	done chan struct{} // closed when the measurement has ended
	used int64         // bytes charged; read after done
	err  error         // the measurement's error; read after done
}

// newLayerMeter starts measuring a layer of mediaType (tar or tar+gzip)
// against budget bytes.
func newLayerMeter(mediaType string, budget int64) *layerMeter {
	pr, pw := io.Pipe()
	m := &layerMeter{pw: pw, done: make(chan struct{})}
	go func() {
		m.used, m.err = measureLayer(pr, mediaType == v1.MediaTypeImageLayerGzip, budget)
		pr.CloseWithError(errOverBudget) // a writer still blocked gets an error, not a hang
		close(m.done)
	}()
	return m
}

// write feeds p to the measurement. Once the measurement has ended, it
// returns CodeTooLarge if that is why, so the copy stops at once;
// otherwise nil (bytes after the end of the layer's stream are not
// unpacked, and a layer that is not gzip or tar is reported by finish,
// after its digest was checked: a tampered layer is a digest mismatch).
func (m *layerMeter) write(p []byte) error {
	if _, err := m.pw.Write(p); err != nil {
		<-m.done
		if wire.HasCode(m.err, CodeTooLarge) {
			return m.err
		}
	}
	return nil
}

// finish ends the stream and returns the measurement's result.
func (m *layerMeter) finish() error {
	m.pw.Close()
	<-m.done
	return m.err
}

// measureLayer reads a layer (gzip-compressed when gz) to its end and
// returns its charge in bytes (see layerMeter). Errors: CodeTooLarge
// (the charge passes budget; reading stops there), CodeInvalid (not gzip,
// or not a tar stream).
func measureLayer(r io.Reader, gz bool, budget int64) (int64, error) {
	tooLarge := func() (int64, error) {
		return budget + 1, wire.Errorf(CodeTooLarge, "the image's layers unpack to more than %d bytes", budget)
	}
	src := r
	if gz {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return 0, wire.Wrap(CodeInvalid, "a tar+gzip layer is not gzip", err)
		}
		src = zr
	}
	cr := &budgetReader{r: src, left: budget}
	tr := tar.NewReader(cr)
	var entries int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if errors.Is(err, errOverBudget) {
			return tooLarge()
		}
		if err != nil {
			return 0, wire.Wrap(CodeInvalid, "a layer is not a tar stream", err)
		}
		size := max(h.Size, 0)
		entries += max(entryBlock, (size+entryBlock-1)/entryBlock*entryBlock)
		if entries > budget || entries < 0 {
			return tooLarge()
		}
	}
	// What follows the end of the archive is never unpacked, but it is
	// still decompressed: count it too, ignore its errors (umoci does not
	// read it either).
	if _, err := io.Copy(io.Discard, cr); errors.Is(err, errOverBudget) {
		return tooLarge()
	}
	return max(budget-cr.left, entries), nil
}

// budgetReader reads from r until left bytes have been read; the read
// that would pass it fails with errOverBudget.
type budgetReader struct {
	r    io.Reader
	left int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if int64(n) > b.left {
		b.left = -1
		return 0, errOverBudget
	}
	b.left -= int64(n)
	return n, err
}

// meteredFile is a staging blob writer that also feeds a layerMeter; the
// stage charges the layer's measurement when it is closed.
type meteredFile struct {
	f      *os.File
	m      *layerMeter
	charge func(int64) error // adds the layer's charge to the image's total
}

// Write writes p to the staging file and the measurement. Errors: the
// file's, or the measurement's (*wire.Error) once it has stopped.
func (w *meteredFile) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err != nil {
		return n, err
	}
	if err := w.m.write(p); err != nil {
		return n, err
	}
	return n, nil
}

// Close closes the file and ends the measurement; its error (a layer
// over the budget or not a tar stream) wins over the file's.
func (w *meteredFile) Close() error {
	ferr := w.f.Close()
	if err := w.m.finish(); err != nil {
		return err
	}
	if err := w.charge(w.m.used); err != nil {
		return err
	}
	return ferr
}
