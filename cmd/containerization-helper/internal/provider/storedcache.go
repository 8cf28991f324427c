package provider

import (
	"path/filepath"

	"hostkit.dev/cmd/containerization-helper/internal/codec"
)

// storedFile is one decoded record and the identity of the file it came
// from: device, inode, size, mtime and ctime (runc replaces state.json
// with a rename, so any rewrite is a new inode; ctime moves with any
// change in place).
type storedFile struct {
	dev, ino           uint64
	size, mtime, ctime int64
	stored             codec.Stored
}

// forgetStored drops the cached record of a deleted container, so that
// one made again under the same id (restart) is never matched against
// the old record, even if its state.json got the old inode number back
// within one timestamp tick.
func (p *cli) forgetStored(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for path := range p.stored {
		if filepath.Base(filepath.Dir(path)) == id {
			delete(p.stored, path)
		}
	}
}
