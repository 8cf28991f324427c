package holder

import (
	"io"
	"sync"
	"time"
)

// clientBacklog bounds each attached client's backlog in bytes: a client
// that falls this far behind is dropped; it never blocks the agent or
// other clients. A client's backlog is one byte buffer the drain appends
// to (no allocation or channel operation per PTY read); its sender swaps
// it for its own buffer and sends all of it at once, as data frames of at
// most FrameMax bytes (one writev, see DataWriter). So bulk output travels
// as large frames, as much as accumulated while the previous ones were
// written. A PTY read returns at most 4 KiB (n_tty's buffer): when the
// sender wakes to between coalesceBurst and coalesceTarget bytes, it
// waits coalesceWait once for more, so bulk output does not go out as a
// frame per read. Interactive output (echo, short lines) is sent at once.
const (
	clientBacklog  = 4 << 20
	coalesceBurst  = 2 << 10
	coalesceTarget = 32 << 10
	coalesceWait   = time.Millisecond
)

// A client more than paceAbove bytes behind makes the drain pause
// paceStep after a read (write reports it), so that on a busy machine the
// relay gets the CPU to catch up instead of losing the race to the agent.
// Each client can cost the agent at most paceBudget of such pauses in all
// (its output slows, it never stops); a client still behind after that
// is dropped at clientBacklog as before.
const (
	paceAbove  = 1 << 20
	paceStep   = time.Millisecond
	paceBudget = 200 * time.Millisecond
)

// The log is written through a buffer of logBufSize bytes, flushed when
// full, logFlushDelay after its first unflushed byte, and when the output
// ends (before exit.json), so a bulk writer costs one write(2) per 64 KiB
// instead of one per PTY read, and `logs` lags the terminal by at most
// logFlushDelay. The ring, not the log, is what attach replays.
const (
	logBufSize    = 64 << 10
	logFlushDelay = 20 * time.Millisecond
)

// hub fans the agent's output out to the ring buffer, the log and every
// attached client, in one order.
type hub struct {
	mu      sync.Mutex
	ring    *ring
	log     io.Writer
	clients map[*client]struct{}
	ended   bool // the output reached EOF
	logErr  error
	logBuf  []byte      // unflushed log bytes
	flushT  *time.Timer // armed while logBuf holds bytes
}

// client is one attached reader. ready (capacity 1) is signalled when
// pend gains bytes or the output ends; dropped is closed when the client
// fell behind.
type client struct {
	ready   chan struct{}
	dropped chan struct{}
	pend    []byte        // output not yet taken by the sender; guarded by the hub's mu
	ended   bool          // the output ended after pend; guarded by the hub's mu
	paced   time.Duration // pauses this client caused; guarded by the hub's mu
	spare   []byte        // the buffer take swaps in for pend; only the sender uses it
}

// signal wakes cl's sender (it may be awake already).
func (cl *client) signal() {
	select {
	case cl.ready <- struct{}{}:
	default:
	}
}

func newHub(size int, log io.Writer) *hub {
	return &hub{ring: newRing(size), log: log, clients: map[*client]struct{}{}}
}

// write records p (the hub copies it). It reports whether the caller
// should pause paceStep before reading more (see paceAbove).
func (h *hub) write(p []byte) (pace bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring.Write(p)
	if h.log != nil {
		if len(h.logBuf)+len(p) > logBufSize {
			h.flushLocked()
		}
		if len(p) >= logBufSize {
			h.writeLog(p)
		} else {
			if h.logBuf == nil {
				h.logBuf = make([]byte, 0, logBufSize)
			}
			h.logBuf = append(h.logBuf, p...)
			if h.flushT == nil {
				h.flushT = time.AfterFunc(logFlushDelay, h.flush)
			} else if len(h.logBuf) == len(p) {
				h.flushT.Reset(logFlushDelay)
			}
		}
	}
	for cl := range h.clients {
		if len(cl.pend)+len(p) > clientBacklog {
			delete(h.clients, cl)
			close(cl.dropped)
			continue
		}
		cl.pend = append(cl.pend, p...)
		cl.signal()
		if len(cl.pend) > paceAbove && cl.paced < paceBudget {
			cl.paced += paceStep
			pace = true
		}
	}
	return pace
}

// flush writes the buffered log bytes.
func (h *hub) flush() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.flushLocked()
}

func (h *hub) flushLocked() {
	if len(h.logBuf) > 0 {
		h.writeLog(h.logBuf)
		h.logBuf = h.logBuf[:0]
	}
}

func (h *hub) writeLog(p []byte) {
	if _, err := h.log.Write(p); err != nil && h.logErr == nil {
		h.logErr = err
	}
}

// subscribe returns the ring's content and a client that receives
// everything written after it, with nothing lost or repeated between them.
func (h *hub) subscribe() ([]byte, *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cl := &client{ready: make(chan struct{}, 1), dropped: make(chan struct{})}
	if h.ended {
		cl.ended = true
		cl.signal()
	} else {
		h.clients[cl] = struct{}{}
	}
	return h.ring.Bytes(), cl
}

// unsubscribe removes cl (no-op when already removed).
func (h *hub) unsubscribe(cl *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, cl)
}

// end marks the output finished: every client's sender gets what is
// pending, then the end.
func (h *hub) end() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.flushLocked()
	if h.ended {
		return
	}
	h.ended = true
	for cl := range h.clients {
		cl.ended = true
		cl.signal()
		delete(h.clients, cl)
	}
}

// take returns everything pending for cl (its sender calls it when ready
// is signalled) and whether the output ended after it. When the pending
// bytes look like the start of bulk output (see coalesceBurst) it first
// waits coalesceWait once for more. The result is valid until the next
// take: the two buffers alternate, so the drain appends to one while the
// sender writes the other.
func (h *hub) take(cl *client) (b []byte, ended bool) {
	h.mu.Lock()
	n, ended := len(cl.pend), cl.ended
	h.mu.Unlock()
	if !ended && n >= coalesceBurst && n < coalesceTarget {
		time.Sleep(coalesceWait)
	}
	h.mu.Lock()
	b, ended = cl.pend, cl.ended
	cl.pend = cl.spare[:0]
	h.mu.Unlock()
	cl.spare = b
	return b, ended
}
