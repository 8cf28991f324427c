package holder

import (
	"fmt"
	"os"
)

// rotator is a size-capped, count-capped log writer: when the current file
// would pass max bytes it is renamed to <path>.1 (older ones shift up, the
// oldest beyond files-1 is removed) and a new file starts. Rotation is
// synchronous, so disk use never passes files × max plus one write.
// (lumberjack removes old files in a background goroutine, which a fast
// writer outruns: 30 MiB on disk under a 2 MiB cap in our test.)
type rotator struct {
	path  string
	max   int64
	files int
	f     *os.File
	size  int64
}

func newRotator(path string, max int64, files int) *rotator {
	return &rotator{path: path, max: max, files: max1(files)}
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

func (r *rotator) open() error {
	f, err := os.OpenFile(r.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	r.f, r.size = f, fi.Size()
	return nil
}

// Write appends p, rotating first when it would pass the cap.
func (r *rotator) Write(p []byte) (int, error) {
	if r.f == nil {
		if err := r.open(); err != nil {
			return 0, err
		}
	}
	if r.size+int64(len(p)) > r.max && r.size > 0 {
		if err := r.rotate(); err != nil {
			return 0, err
		}
	}
	n, err := r.f.Write(p)
	r.size += int64(n)
	return n, err
}

func (r *rotator) rotate() error {
	r.f.Close()
	r.f = nil
	if r.files == 1 {
		os.Remove(r.path)
	} else {
		os.Remove(fmt.Sprintf("%s.%d", r.path, r.files-1))
		for i := r.files - 2; i >= 1; i-- {
			os.Rename(fmt.Sprintf("%s.%d", r.path, i), fmt.Sprintf("%s.%d", r.path, i+1))
		}
		os.Rename(r.path, r.path+".1")
	}
	return r.open()
}

// Close closes the current file, if one was opened.
func (r *rotator) Close() error {
	if r.f == nil {
		return nil
	}
	return r.f.Close()
}
