package procexec

import (
	"os"
	"sync"
)

// outDir is a Runner's private output directory: made 0700 under parent at
// the first run and reused by every later one, so a run costs two unnamed
// files (O_TMPFILE) and no directory of its own. It is held open; each run
// re-checks the open directory (fstat: still a 0700 directory of this user
// with a link) and makes a new one when it is gone.
type outDir struct {
	parent string

	mu   sync.Mutex
	path string   // "" until made
	f    *os.File // the open directory
}

// close removes the directory (if made) and forgets it.
func (d *outDir) close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		return nil
	}
	d.f.Close()
	err := os.Remove(d.path)
	d.f, d.path = nil, ""
	if os.IsNotExist(err) {
		return nil
	}
	return err
}
