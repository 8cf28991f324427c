package outstream

import (
	"bytes"
	"testing"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// TestQueueCoalescesBulkOutput guards against one frame per PTY read:
// output pending for a client is taken at once, the two buffers alternate
// without the producer overwriting what the sender still writes, and the
// end comes after the last output.
func TestQueueCoalescesBulkOutput(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	q := NewQueue(true, nil)
	chunk := bytes.Repeat([]byte{'x'}, 4<<10)
	for range 16 {
		q.Add(chunk)
	}
	<-q.ready
	out, st, _ := q.take()
	is.Equal(len(out), 16*len(chunk)) // everything pending, as one take
	is.Equal(st, queueOpen)
	q.Add([]byte("second"))
	is.True(bytes.Equal(out, bytes.Repeat(chunk, 16))) // untouched while the sender writes it
	q.Add([]byte(" take"))
	q.End(nil)
	<-q.ready
	out, st, final := q.take()
	is.Equal(string(out), "second take")
	is.Equal(st, queueEnded)
	is.True(final == nil)
}

// TestQueueEndings: End keeps the output before its frame, Abort discards
// it, the first Abort wins over an End and over a later Abort, and a
// queue that ended takes no more output.
func TestQueueEndings(t *testing.T) {
	t.Parallel()
	exit := &wire.StreamFrame{T: wire.StreamExit, Status: 3}
	stop := &wire.StreamFrame{T: wire.StreamError, Code: api.CodeInstanceExited, Msg: "ended"}
	other := &wire.StreamFrame{T: wire.StreamError, Code: api.CodeStreamSlow, Msg: "later"}
	for _, tc := range []struct {
		name    string
		do      func(q *Queue)
		out     string
		st      queueState
		final   *wire.StreamFrame
		aborted bool
	}{
		{"end after output", func(q *Queue) { q.Add([]byte("out")); q.End(exit) }, "out", queueEnded, exit, false},
		{"abort discards output", func(q *Queue) { q.Add([]byte("out")); q.Abort(stop) }, "", queueAborted, stop, true},
		{"abort after end wins", func(q *Queue) { q.Add([]byte("out")); q.End(exit); q.Abort(stop) }, "", queueAborted, stop, true},
		{"first abort wins", func(q *Queue) { q.Abort(stop); q.Abort(other); q.End(exit) }, "", queueAborted, stop, true},
		{"no output after the end", func(q *Queue) {
			q.End(nil)
			if _, ok := q.Add([]byte("late")); ok {
				panic("a queue that ended took output")
			}
		}, "", queueEnded, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			kicks := 0
			q := NewQueue(false, func() { kicks++ })
			tc.do(q)
			<-q.ready
			out, st, final := q.take()
			is.Equal(string(out), tc.out)
			is.Equal(st, tc.st)
			is.Equal(final, tc.final)
			is.Equal(q.Dropped(), 0) // none of these is a slow client
			select {
			case <-q.Done():
				is.True(tc.aborted)
				is.Equal(kicks, 1) // once, however many aborts
			default:
				is.True(!tc.aborted)
				is.Equal(kicks, 0)
			}
		})
	}
}

// TestQueueDropsPastTheBound guards the slow-client rule from both sides:
// exactly api.AttachBacklog bytes are held; one more drops the client,
// its output is discarded and a stream.slow_client frame takes its place.
func TestQueueDropsPastTheBound(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	kicks := 0
	q := NewQueue(false, func() { kicks++ })
	_, ok := q.Add(make([]byte, api.AttachBacklog))
	is.True(ok) // at the bound: kept
	is.Equal(kicks, 0)
	is.Equal(q.Dropped(), 0)
	_, ok = q.Add([]byte{1})
	is.True(!ok) // past it: dropped
	is.Equal(q.Dropped(), api.AttachBacklog+1)
	is.Equal(kicks, 1)
	<-q.Done()
	<-q.ready
	out, st, final := q.take()
	is.Equal(len(out), 0)
	is.Equal(st, queueAborted)
	is.Equal(final.T, wire.StreamError)
	is.Equal(final.Code, api.CodeStreamSlow)
	_, ok = q.Add([]byte{1})
	is.True(!ok) // and stays dropped
}
