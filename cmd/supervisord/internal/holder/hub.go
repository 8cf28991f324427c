package holder

import (
	"io"
	"sync"
)

// clientQueue bounds each attached client's backlog in chunks (each at
// most one PTY read, 32 KiB), and clientBacklog in bytes: a client that
// falls this far behind is dropped; it never blocks the agent or other
// clients. The sender coalesces queued chunks into frames of up to
// coalesceMax bytes, so a reader that keeps up on average (a bulk `cat`)
// is not dropped for the relay's per-frame cost.
const (
	clientQueue   = 4096
	clientBacklog = 4 << 20
	coalesceMax   = 256 << 10
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
}

// client is one attached reader: ch carries output chunks and is closed
// when the output ends; dropped is closed when the client fell behind.
type client struct {
	ch      chan []byte
	dropped chan struct{}
	queued  int // bytes in ch; guarded by the hub's mu
}

func newHub(size int, log io.Writer) *hub {
	return &hub{ring: newRing(size), log: log, clients: map[*client]struct{}{}}
}

// write records p (the hub copies it).
func (h *hub) write(p []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring.Write(p)
	if h.log != nil {
		if _, err := h.log.Write(p); err != nil && h.logErr == nil {
			h.logErr = err
		}
	}
	if len(h.clients) == 0 {
		return
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
		default:
			delete(h.clients, cl)
			close(cl.dropped)
		}
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
	if h.ended {
		return
	}
	h.ended = true
	for cl := range h.clients {
		close(cl.ch)
		delete(h.clients, cl)
	}
}

// take receives the next chunk for cl, blocking, and then appends whatever
// else is already queued, up to coalesceMax bytes. ok is false once the
// output has ended and everything queued was taken.
func (h *hub) take(cl *client, first []byte) []byte {
	out := first
	n := len(first)
	for len(out) < coalesceMax {
		select {
		case b, ok := <-cl.ch:
			if !ok {
				h.consumed(cl, n)
				return out
			}
			if len(out) == len(first) {
				out = append(make([]byte, 0, min(coalesceMax, len(first)+len(b)*8)), first...)
			}
			out = append(out, b...)
			n += len(b)
			continue
		default:
		}
		break
	}
	h.consumed(cl, n)
	return out
}

func (h *hub) consumed(cl *client, n int) {
	h.mu.Lock()
	cl.queued -= n
	h.mu.Unlock()
}
