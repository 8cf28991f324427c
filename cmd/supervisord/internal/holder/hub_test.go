package holder

import (
	"bytes"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestHubCoalescesBulkOutput guards against one frame per PTY read: chunks
// queued for a client are taken as one frame.
func TestHubCoalescesBulkOutput(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := newHub(1<<10, nil)
	_, cl := h.subscribe()
	chunk := bytes.Repeat([]byte{'x'}, 4<<10)
	for range 16 {
		h.write(chunk)
	}
	out := h.take(cl, <-cl.ch)
	is.Equal(len(out), 16*len(chunk)) // all queued chunks in one frame
	is.Equal(cl.queued, 0)
}

// TestHubLogIsFlushedAtEnd guards against buffered log bytes that never
// reach the file (the last line before exit).
func TestHubLogIsFlushedAtEnd(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var log bytes.Buffer
	h := newHub(1<<10, &log)
	h.write([]byte("final-line\n"))
	h.end()
	h.mu.Lock()
	is.Equal(log.String(), "final-line\n")
	h.mu.Unlock()
}

// TestHubStalledClientIsDroppedAndPacingIsBounded guards against a stalled
// client that slows the agent without bound: it is dropped past the
// backlog, having asked for at most paceBudget of pauses.
func TestHubStalledClientIsDroppedAndPacingIsBounded(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := newHub(1<<10, nil)
	_, cl := h.subscribe()
	chunk := make([]byte, 4<<10)
	var paused time.Duration
	for range 2 * clientBacklog / len(chunk) {
		if h.write(chunk) {
			paused += paceStep
		}
	}
	is.True(paused <= paceBudget)
	select {
	case <-cl.dropped:
	default:
		t.Fatal("a client past the backlog was not dropped")
	}
}
