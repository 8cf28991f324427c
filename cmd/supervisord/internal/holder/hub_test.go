package holder

import (
	"bytes"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestHubCoalescesBulkOutput guards against one frame per PTY read:
// output pending for a client is taken at once, the two buffers alternate
// without the drain overwriting what the sender still writes, and the end
// comes after the last output.
func TestHubCoalescesBulkOutput(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := newHub(1<<10, nil)
	_, cl := h.subscribe()
	chunk := bytes.Repeat([]byte{'x'}, 4<<10)
	for range 16 {
		h.write(chunk)
	}
	<-cl.ready
	out, ended := h.take(cl)
	is.Equal(len(out), 16*len(chunk)) // everything pending, as one take
	is.True(!ended)
	h.write([]byte("second"))
	is.True(bytes.Equal(out, bytes.Repeat(chunk, 16))) // untouched while the sender writes it
	h.write([]byte(" take"))
	h.end()
	<-cl.ready
	out, ended = h.take(cl)
	is.Equal(string(out), "second take")
	is.True(ended)
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
