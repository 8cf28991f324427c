package buildtest

import (
	"context"
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"hostkit.dev/lib/wire"
)

// lockSuffix ends the name of a key's lock file, <root>/<key>.lock. The
// lock lives beside the entry, not in it, so that prune can remove the
// entry while it holds the lock.
const lockSuffix = ".lock"

// lockPoll is how often lock retries a held lock: flock(2) itself cannot
// wait on a context, and a build takes seconds, so 20 ms costs nothing.
const lockPoll = 20 * time.Millisecond

// lock takes the exclusive flock(2) on path, creating the file, and waits
// while another open file holds it (another process, or another call in
// this one: flock locks belong to the open file, not the process) until
// ctx ends, calling waiting (if not nil) once when it starts to wait. It
// returns the function that releases the lock.
//
// Errors: CodeIO when the file cannot be opened or locked; ctx's error.
func lock(ctx context.Context, path string, waiting func()) (unlock func(), err error) {
	for {
		f, held, err := tryLock(path)
		if err != nil {
			return nil, err
		}
		if f != nil {
			return func() { f.Close() }, nil
		}
		if !held {
			// The file was removed under us: open the new one.
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			continue
		}
		if waiting != nil {
			waiting()
			waiting = nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(lockPoll):
		}
	}
}

// tryLock takes the lock on path if it is free and returns the open,
// locked file. It returns a nil file and held true when another open file
// holds the lock, and a nil file and held false when the file at path was
// removed or replaced before the lock was taken: prune removes a lock
// file while it holds it, and a lock on a file no longer at path guards
// nothing.
func tryLock(path string) (f *os.File, held bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, wire.Wrap(CodeIO, "lock file: "+err.Error(), err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if errors.Is(err, unix.EWOULDBLOCK) {
		f.Close()
		return nil, true, nil
	}
	if err != nil {
		f.Close()
		return nil, false, wire.Wrap(CodeIO, "flock: "+err.Error(), err)
	}
	var open, named unix.Stat_t
	if unix.Fstat(int(f.Fd()), &open) != nil || unix.Stat(path, &named) != nil ||
		open.Dev != named.Dev || open.Ino != named.Ino {
		f.Close()
		return nil, false, nil
	}
	return f, false, nil
}
