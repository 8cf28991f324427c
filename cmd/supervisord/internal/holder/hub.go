package holder

import (
	"io"
	"sync"
	"time"

	"hostkit.dev/cmd/supervisord/internal/outstream"
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
// attached client's queue, in one order. A client whose queue is past its
// bound (api.AttachBacklog) is dropped from the hub: its queue ends with
// stream.slow_client, and neither the agent nor other clients wait for it.
type hub struct {
	mu      sync.Mutex
	ring    *ring
	log     io.Writer
	clients map[*outstream.Queue]struct{}
	ended   bool // the output reached EOF
	logErr  error
	logBuf  []byte      // unflushed log bytes
	flushT  *time.Timer // armed while logBuf holds bytes
}

func newHub(size int, log io.Writer) *hub {
	return &hub{ring: newRing(size), log: log, clients: map[*outstream.Queue]struct{}{}}
}

// write records p (the hub and the queues copy it). It reports whether
// the caller should pause outstream.PaceStep before reading more (a
// client lags; see outstream.Queue.Add).
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
	for q := range h.clients {
		qpace, ok := q.Add(p)
		if !ok {
			delete(h.clients, q) // slow (or gone): q ended itself
			continue
		}
		pace = pace || qpace
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

// subscribe makes q a client: it starts with the ring's content (the
// replay) and receives everything written after it, with nothing lost or
// repeated between them. When the output has ended, q gets the replay and
// the end.
func (h *hub) subscribe(q *outstream.Queue) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.ring.segments() {
		if len(b) > 0 {
			q.Add(b) // at most RingSize: within the bound
		}
	}
	if h.ended {
		q.End(nil)
	} else {
		h.clients[q] = struct{}{}
	}
}

// unsubscribe removes q (no-op when already removed).
func (h *hub) unsubscribe(q *outstream.Queue) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, q)
}

// end marks the output finished: every client's queue ends after what it
// holds (its sender then sends the exit frame).
func (h *hub) end() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.flushLocked()
	if h.ended {
		return
	}
	h.ended = true
	for q := range h.clients {
		q.End(nil)
		delete(h.clients, q)
	}
}
