package buildtest

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// prune removes every entry of root unused for longer than MaxAge (its
// directory's modification time, which Binary sets on each use), with
// its lock file, and lock files older than that whose entry is gone (a
// build that failed). It takes each entry's lock without waiting and
// checks the age again under it, so an entry that a Binary call holds
// or has just used stays. Failures leave the entry for a later call.
func (c *Cache) prune(root string, now time.Time) {
	maxAge := c.maxAge()
	if maxAge < 0 {
		return
	}
	names, err := os.ReadDir(root)
	if err != nil {
		return
	}
	keys := map[string]bool{}
	for _, e := range names {
		k := strings.TrimSuffix(e.Name(), lockSuffix)
		if isKey(k) {
			keys[k] = true
		}
	}
	for k := range keys {
		entry := filepath.Join(root, k)
		lockPath := entry + lockSuffix
		if !stale(entry, lockPath, now, maxAge) {
			continue
		}
		f, _, err := tryLock(lockPath)
		if f == nil || err != nil {
			continue
		}
		// Entry first, lock file last: a caller that opens the lock file
		// after its removal finds no entry, not half of one.
		if stale(entry, lockPath, now, maxAge) && os.RemoveAll(entry) == nil {
			_ = os.Remove(lockPath)
			c.log().Info("buildtest.prune", fieldPath, entry)
		}
		f.Close()
	}
}

// stale reports whether an entry was last used more than maxAge before
// now, or, when it does not exist, whether its lock file is that old.
func stale(entry, lockPath string, now time.Time, maxAge time.Duration) bool {
	fi, err := os.Stat(entry)
	if os.IsNotExist(err) {
		fi, err = os.Stat(lockPath)
	}
	return err == nil && now.Sub(fi.ModTime()) > maxAge
}

// isKey reports whether name is a key as key.hash makes them: 32
// lowercase hex digits. Anything else in the cache directory is left
// alone.
func isKey(name string) bool {
	if len(name) != 32 {
		return false
	}
	for _, r := range name {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}
