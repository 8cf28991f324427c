package image

import (
	"sync"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"
)

// maxHashed bounds the hash cache (entries); a full cache starts over.
const maxHashed = 4096

// fileID identifies one file on one device.
type fileID struct{ dev, ino uint64 }

// fileStamp is what must not have changed since a file was hashed: its
// size, modification and status-change times (nanoseconds). Writing a
// file, or setting its times back with utimes(2), moves its ctime, which
// no caller can set.
type fileStamp struct {
	size         int64
	mtime, ctime int64
	digest       digest.Digest
}

// hashCache remembers the layer blobs that hashed to their digest, by
// file identity (device, inode) and stamp (size, mtime, ctime), so a
// verification that only checks an image (image.evidence, a create whose
// rootfs is already cached) need not hash an unchanged multi-megabyte
// layer again. It never vouches for bytes that are used: whatever is
// unpacked is hashed as it is copied (readBlob with a sink). Safe for
// concurrent use.
type hashCache struct {
	mu sync.Mutex
	m  map[fileID]fileStamp
}

func newHashCache() *hashCache { return &hashCache{m: map[fileID]fileStamp{}} }

func stampOf(st *unix.Stat_t, d digest.Digest) (fileID, fileStamp) {
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)},
		fileStamp{size: st.Size, mtime: unix.TimespecToNsec(st.Mtim), ctime: unix.TimespecToNsec(st.Ctim), digest: d}
}

// hit reports whether the file described by st hashed to d before and has
// not changed since.
func (c *hashCache) hit(st *unix.Stat_t, d digest.Digest) bool {
	if c == nil {
		return false
	}
	id, want := stampOf(st, d)
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.m[id]
	return ok && got == want
}

// put records that the file described by st hashed to d.
func (c *hashCache) put(st *unix.Stat_t, d digest.Digest) {
	if c == nil {
		return
	}
	id, s := stampOf(st, d)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxHashed {
		clear(c.m)
	}
	c.m[id] = s
}
