package holder

import (
	"time"

	api "hostkit.dev/lib/api/supervisordapi"
)

// Restart is the holder's job, not the manager's: the holder sees the
// exit first, keeps restarting while supervisord is down, and restarts only
// once the whole tree is gone (leader reaped and no descendant left), so a
// new agent never starts on top of the old one's leftovers. A stop closes
// stopCh, which ends a backoff wait and prevents any further start.

// Backoff bounds of restart on-failure.
const (
	restartBase   = time.Second
	restartCap    = 60 * time.Second
	restartStable = 60 * time.Second // a run this long resets the backoff and the count
)

// backoff is on-failure's exponential backoff: 1 s, 2 s, 4 s … capped, for
// at most max consecutive failures.
type backoff struct {
	base, cap, stable time.Duration
	max               int
	consecutive       int // failures restarted since the last stable run
}

func newBackoff(max int) backoff {
	if max <= 0 {
		max = api.DefaultMaxRestarts
	}
	return backoff{base: restartBase, cap: restartCap, stable: restartStable, max: max}
}

// next returns the delay before the next start after a failed run that
// lasted ran, and false when the restarts are spent.
func (b *backoff) next(ran time.Duration) (time.Duration, bool) {
	if ran >= b.stable {
		b.consecutive = 0
	}
	if b.consecutive >= b.max {
		return 0, false
	}
	d := b.cap
	if b.consecutive < 30 {
		d = min(b.base<<b.consecutive, b.cap)
	}
	b.consecutive++
	return d, true
}

// failed reports whether an exit asks for a restart under on-failure: a
// non-zero code, a signal, or an end that was not observed.
func failed(e *api.ExitStatus) bool {
	return e == nil || e.Unknown || e.Signal != "" || e.Code != 0
}
