package holder

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/outstream"
)

// received runs outstream.Send for q into one end of a pipe and returns
// what the other end decoded: the output, the frames that are not data,
// and whether Send reported the stream ended.
func received(t *testing.T, q *outstream.Queue) (out []byte, others []*wire.StreamFrame, ended bool) {
	t.Helper()
	a, b := net.Pipe()
	defer b.Close()
	res := make(chan bool, 1)
	go func() {
		ended, err := outstream.Send(q, outstream.NewWriter(a))
		if err != nil {
			t.Error(err)
		}
		a.Close()
		res <- ended
	}()
	for {
		p, err := wire.ReadFrame(b, 0)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			return out, others, <-res
		}
		f, err := wire.DecodeStreamFrame(p)
		if err != nil {
			t.Fatal(err)
		}
		if f.T == wire.StreamData {
			out = append(out, f.B...)
		} else {
			others = append(others, f)
		}
	}
}

// TestHubReplaysThenStreams guards against output lost or repeated between
// the replay and the live output, and against an end that overtakes it.
func TestHubReplaysThenStreams(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := newHub(8, nil)
	h.write([]byte("0123456789")) // the ring keeps the last 8 bytes
	q := outstream.NewQueue(true, nil)
	h.subscribe(q)
	h.write([]byte(" live"))
	h.end()
	h.write([]byte(" after the end")) // the drain never does; nobody gets it
	out, others, ended := received(t, q)
	is.Equal(string(out), "23456789 live")
	is.Equal(len(others), 0) // the holder sends the exit frame itself
	is.True(ended)

	late := outstream.NewQueue(false, nil) // subscribed after the end
	h.subscribe(late)
	out, _, ended = received(t, late)
	is.Equal(string(out), " the end") // the replay, then the end at once
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
// client that slows the agent without bound or is dropped silently: past
// the backlog it leaves the hub, having asked for at most 200 ms of
// pauses, and its queue ends with exactly one stream.slow_client frame in
// place of the output it held. Another client gets everything.
func TestHubStalledClientIsDroppedAndPacingIsBounded(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := newHub(1<<10, nil)
	kicked := 0
	stalled := outstream.NewQueue(true, func() { kicked++ })
	h.subscribe(stalled)
	chunk := make([]byte, 4<<10)
	var paused time.Duration
	for range 2 * api.AttachBacklog / len(chunk) {
		if h.write(chunk) {
			paused += outstream.PaceStep
		}
	}
	is.True(paused <= 200*time.Millisecond) // the pacing budget
	select {
	case <-stalled.Done():
	default:
		t.Fatal("a client past the backlog was not dropped")
	}
	is.Equal(kicked, 1)                            // its sender was woken once
	is.True(stalled.Dropped() > api.AttachBacklog) // dropped for being behind
	is.Equal(len(h.clients), 0)                    // and left the hub
	out, others, ended := received(t, stalled)
	is.Equal(len(out), 0) // what it held is not sent
	is.Equal(len(others), 1)
	is.Equal(others[0].Code, api.CodeStreamSlow)
	is.True(!ended)

	keeps := outstream.NewQueue(true, nil) // a client that takes its output
	h.subscribe(keeps)
	done := make(chan []byte)
	go func() { out, _, _ := received(t, keeps); done <- out }()
	for range 64 {
		h.write(chunk)
	}
	h.end()
	is.Equal(len(<-done), 1<<10+64*len(chunk)) // the replay and all of it
}
