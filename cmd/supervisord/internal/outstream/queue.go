package outstream

import (
	"sync"
	"time"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// A PTY read returns at most 4 KiB (n_tty's buffer): when a coalescing
// queue's sender wakes to between coalesceBurst and coalesceTarget bytes,
// it waits coalesceWait once for more, so bulk output does not go out as a
// frame per read. Interactive output (echo, short lines) is sent at once.
const (
	coalesceBurst  = 2 << 10
	coalesceTarget = 32 << 10
	coalesceWait   = time.Millisecond
)

// A client more than paceAbove bytes behind makes Add ask its producer to
// pause PaceStep (the holder's drain sleeps), so that on a busy machine
// the relay gets the CPU to catch up instead of losing the race to the
// agent. Each client can cost the agent at most paceBudget of such pauses
// in all (its output slows, it never stops); a client still behind after
// that is dropped at api.AttachBacklog as before.
const (
	paceAbove  = 1 << 20
	PaceStep   = time.Millisecond // the pause Add asks for
	paceBudget = 200 * time.Millisecond
)

// slowMsg is the message of the stream.slow_client frame a hop sends.
const slowMsg = "client fell behind the output and was dropped"

// Queue is one client's output that its connection has not taken yet:
// one byte buffer the producer appends to (no allocation or channel
// operation per append once it has grown) and a signal (capacity 1) that
// wakes the client's sender, which swaps the buffer for its own and sends
// all of it at once (Send). Past api.AttachBacklog bytes the client is
// slow: the queue drops what it holds and ends with a stream.slow_client
// frame. A Queue never blocks its producer.
//
// A stream ends in one of two ways: End (the pending output goes first,
// then the end frame) or Abort (the pending output is discarded and only
// the abort frame goes). The first Abort wins over everything else.
type Queue struct {
	coalesce bool
	kick     func()        // wakes a sender waiting in its Writer (Writer.Interrupt)
	ready    chan struct{} // capacity 1
	done     chan struct{} // closed by the first Abort

	mu      sync.Mutex
	pend    []byte            // output not yet taken by the sender
	state   queueState        // open, ended, aborted
	final   *wire.StreamFrame // sent after pend (ended) or instead of it (aborted); nil = none
	dropped int               // bytes behind when it was dropped as slow; 0 = not dropped
	paced   time.Duration     // pauses this client asked for

	spare []byte // the buffer take swaps in for pend; only the sender uses it
}

type queueState uint8

const (
	queueOpen queueState = iota
	queueEnded
	queueAborted
)

// NewQueue returns an empty, open queue. With coalesce its sender waits
// once for more output when it wakes to the start of a burst (for the
// holder, whose producer is a PTY read of at most 4 KiB). kick (nil = none)
// is called once, when the queue is aborted, to wake a sender blocked in
// its Writer: pass the sender's Writer.Interrupt.
func NewQueue(coalesce bool, kick func()) *Queue {
	if kick == nil {
		kick = func() {}
	}
	return &Queue{coalesce: coalesce, kick: kick, ready: make(chan struct{}, 1), done: make(chan struct{})}
}

// signal wakes q's sender (it may be awake already).
func (q *Queue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// Add appends a copy of p. ok is false when q no longer takes output:
// it ended, was aborted, or p would take it past api.AttachBacklog, in
// which case q is aborted now with stream.slow_client (Dropped reports
// it). pace asks the producer to pause PaceStep (see paceAbove).
func (q *Queue) Add(p []byte) (pace, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.state != queueOpen {
		return false, false
	}
	if len(q.pend)+len(p) > api.AttachBacklog {
		q.dropped = len(q.pend) + len(p)
		q.abortLocked(&wire.StreamFrame{T: wire.StreamError, Code: api.CodeStreamSlow, Msg: slowMsg})
		return false, false
	}
	q.pend = append(q.pend, p...)
	q.signal()
	if len(q.pend) > paceAbove && q.paced < paceBudget {
		q.paced += PaceStep
		pace = true
	}
	return pace, true
}

// End ends the stream after the pending output, with f (nil: no frame;
// the sender's caller may then send its own, as the holder's exit frame).
// No-op once q ended or was aborted.
func (q *Queue) End(f *wire.StreamFrame) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.state == queueOpen {
		q.state, q.final = queueEnded, f
		q.signal()
	}
}

// Abort ends the stream now: the pending output is discarded and f (nil:
// no frame) is the last frame. Only the first Abort counts; it closes
// Done and calls the queue's kick.
func (q *Queue) Abort(f *wire.StreamFrame) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.abortLocked(f)
}

func (q *Queue) abortLocked(f *wire.StreamFrame) {
	if q.state == queueAborted {
		return
	}
	q.state, q.final, q.pend = queueAborted, f, q.pend[:0]
	close(q.done)
	q.signal()
	q.kick()
}

// Done is closed when q is aborted.
func (q *Queue) Done() <-chan struct{} { return q.done }

// Dropped reports how many bytes behind the client was when q dropped it
// as slow, and 0 when it did not.
func (q *Queue) Dropped() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}

// take returns everything pending (the sender calls it when ready is
// signalled), the state after it and the final frame. When the pending
// bytes look like the start of bulk output (see coalesceBurst) it first
// waits coalesceWait once for more. b is valid until the next take: the
// two buffers alternate, so the producer appends to one while the sender
// writes the other.
func (q *Queue) take() (b []byte, st queueState, final *wire.StreamFrame) {
	q.mu.Lock()
	n, st := len(q.pend), q.state
	q.mu.Unlock()
	if q.coalesce && st == queueOpen && n >= coalesceBurst && n < coalesceTarget {
		time.Sleep(coalesceWait)
	}
	q.mu.Lock()
	b, st, final = q.pend, q.state, q.final
	q.pend = q.spare[:0]
	q.mu.Unlock()
	q.spare = b
	return b, st, final
}
