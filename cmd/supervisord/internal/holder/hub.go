package holder

import (
	"io"
	"sync"
	"time"
)

// clientQueue bounds each attached client's backlog in chunks (each at
// most one PTY read, 32 KiB), and clientBacklog in bytes: a client that
// falls this far behind is dropped; it never blocks the agent or other
// clients. The sender coalesces queued chunks into frames of up to
// coalesceMax bytes, so a reader that keeps up on average (a bulk `cat`)
// is not dropped for the relay's per-frame cost. A PTY read returns at
// most 4 KiB (n_tty's buffer), so bulk output would otherwise travel as
// one frame per 4 KiB through two socket hops: when a chunk of at least
// coalesceBurst bytes arrives and less than coalesceTarget is queued, the
// sender waits coalesceWait once for more. Interactive output (echo,
// short lines) is sent at once.
const (
	clientQueue    = 4096
	clientBacklog  = 4 << 20
	coalesceMax    = 256 << 10
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

// client is one attached reader: ch carries output chunks and is closed
// when the output ends; dropped is closed when the client fell behind.
type client struct {
	ch      chan []byte
	dropped chan struct{}
	queued  int           // bytes in ch; guarded by the hub's mu
	paced   time.Duration // pauses this client caused; guarded by the hub's mu
	buf     []byte        // take's frame buffer, reused; only the sender uses it
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
	if len(h.clients) == 0 {
		return false
	}
	c := append([]byte(nil), p...)
	for cl := range h.clients {
		if cl.queued+len(c) > clientBacklog {
			delete(h.clients, cl)
			close(cl.dropped)
			continue
		}
		select {
		case cl.ch <- c:
			cl.queued += len(c)
			if cl.queued > paceAbove && cl.paced < paceBudget {
				cl.paced += paceStep
				pace = true
			}
		default:
			delete(h.clients, cl)
			close(cl.dropped)
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
	cl := &client{ch: make(chan []byte, clientQueue), dropped: make(chan struct{})}
	if h.ended {
		close(cl.ch)
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

// end marks the output finished: every client's channel is closed after
// the chunks already queued.
func (h *hub) end() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.flushLocked()
	if h.ended {
		return
	}
	h.ended = true
	for cl := range h.clients {
		close(cl.ch)
		delete(h.clients, cl)
	}
}

// take appends to first (the chunk just received for cl) whatever else is
// queued, up to coalesceMax bytes, waiting coalesceWait once for more when
// first looks like bulk output (see coalesceBurst). It stops early when
// the output has ended; the caller's next receive then sees the end. The
// result may alias cl's buffer: it is valid until the next take.
func (h *hub) take(cl *client, first []byte) []byte {
	out := first
	n := len(first)
	waited := len(first) < coalesceBurst
	for len(out) < coalesceMax {
		select {
		case b, ok := <-cl.ch:
			if !ok {
				h.consumed(cl, n)
				return out
			}
			if len(out) == len(first) {
				if cap(cl.buf) == 0 {
					cl.buf = make([]byte, 0, coalesceMax+32<<10)
				}
				out = append(cl.buf[:0], first...)
			}
			out = append(out, b...)
			n += len(b)
			continue
		default:
		}
		if waited || len(out) >= coalesceTarget {
			break
		}
		waited = true
		time.Sleep(coalesceWait)
	}
	h.consumed(cl, n)
	return out
}

func (h *hub) consumed(cl *client, n int) {
	h.mu.Lock()
	cl.queued -= n
	h.mu.Unlock()
}
