package outstream

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// TestSendSlowClientGetsOneWholeErrorFrame guards against a stalled client
// cut off mid-frame or dropped silently: its peer reads nothing; the
// writer fills the socket as far as it goes, then the producer adds
// output until the queue drops the client; Send returns without ever
// blocking, and what the client finds afterwards is whole data frames,
// exactly one stream.slow_client frame and a clean EOF.
func TestSendSlowClientGetsOneWholeErrorFrame(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a, b := socketPair(t)
	w := NewWriter(a)
	q := NewQueue(false, w.Interrupt)
	type result struct {
		ended bool
		err   error
	}
	res := make(chan result, 1)
	go func() {
		ended, err := Send(q, w)
		res <- result{ended, err}
	}()
	chunk := make([]byte, 64<<10)
	added := 0
	add := func() bool {
		_, ok := q.Add(chunk)
		if ok {
			added += len(chunk)
		}
		return ok
	}
	for added+len(chunk) <= 3<<20 { // more than the socket takes, less than the bound
		is.True(add())
	}
	// Wait until the writer has filled the socket as far as it goes (it
	// then waits for room), so the last frame must use the room kept for
	// it.
	full := w.sndbuf - reserve - 2*cost(w.step)
	for end := time.Now().Add(30 * time.Second); queued(t, a) < full; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the writer queued only %d of %d bytes", queued(t, a), w.sndbuf)
		}
	}
	for add() { // past the bound: dropped
	}
	r := <-res // returns although b never read a byte
	is.NoErr(r.err)
	is.True(!r.ended)                // aborted, not ended
	is.True(queued(t, a) < w.sndbuf) // the writer stayed within the buffer, its last frame included
	a.Close()
	out, others, end := readFrames(b)
	is.True(len(out) <= added)                   // whole data frames first (each decoded)
	is.Equal(len(others), 1)                     // then one frame
	is.Equal(others[0].Code, api.CodeStreamSlow) // stream.slow_client
	is.True(isEOF(end))                          // then EOF, not frame.truncated
}

// TestSendKeepsUpWithAReader: a client that reads gets all of 8 MiB of
// output, in order, through many waits for room, then the end frame.
func TestSendKeepsUpWithAReader(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a, b := socketPair(t)
	w := NewWriter(a)
	q := NewQueue(false, w.Interrupt)
	data := make([]byte, 8<<20)
	rand.Read(data)
	type got struct {
		out    []byte
		others []*wire.StreamFrame
		end    error
	}
	read := make(chan got, 1)
	go func() {
		out, others, end := readFrames(b)
		read <- got{out, others, end}
	}()
	sent := make(chan error, 1)
	go func() {
		ended, err := Send(q, w)
		if err == nil && !ended {
			err = errors.New("not ended")
		}
		a.Close()
		sent <- err
	}()
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 1<<20)
		for {
			q.mu.Lock()
			pending := len(q.pend)
			q.mu.Unlock()
			if pending+n <= api.AttachBacklog {
				break
			}
			time.Sleep(time.Millisecond) // let the sender take it: a producer that keeps the bound
		}
		_, ok := q.Add(rest[:n])
		is.True(ok)
		rest = rest[n:]
	}
	q.End(&wire.StreamFrame{T: wire.StreamExit, Status: 7})
	is.NoErr(<-sent)
	g := <-read
	is.True(bytes.Equal(g.out, data)) // every byte, in order
	is.Equal(len(g.others), 1)
	is.Equal(g.others[0].Status, int64(7))
	is.True(errors.Is(g.end, io.EOF))
}

// TestWriterWithoutASocketStillWrites: on a connection whose queue cannot
// be measured (net.Pipe) the Writer falls back to bounded blocking
// writes, with the same frames.
func TestWriterWithoutASocketStillWrites(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a, b := net.Pipe()
	defer b.Close()
	w := NewWriter(a)
	is.True(w.raw == nil) // not measured
	go func() {
		w.Data([]byte("hello"))
		w.Frame(&wire.StreamFrame{T: wire.StreamExit})
		a.Close()
	}()
	out, others, end := readFrames(b)
	is.Equal(string(out), "hello")
	is.Equal(len(others), 1)
	is.True(isEOF(end))
}

// TestCostBoundsTheKernelsAccounting guards the assumption that keeps
// writes from blocking: whatever is written in one call, the socket's
// allocation (SIOCOUTQ) grows by at most cost(n), on the running kernel,
// for plain writes and for the writev of data frames.
func TestCostBoundsTheKernelsAccounting(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 100, 1000, 4096, 40000, 65536, 256 << 10, 600 << 10} {
		for _, framed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d framed %v", n, framed), func(t *testing.T) {
				t.Parallel()
				is := is.New(t)
				a, _ := socketPair(t)
				w := NewWriter(a)
				is.True(w.raw != nil) // measured: a Unix socket on Linux
				is.True(cost(n) < w.sndbuf)
				b := make([]byte, n)
				written := n
				if framed {
					var dw DataWriter
					is.NoErr(dw.Write(a, b))
					written += (n/FrameMax + 1) * frameSlack
				} else {
					_, err := a.Write(b)
					is.NoErr(err)
				}
				q := queued(t, a)
				t.Logf("%d bytes: %d allocated (cost %d)", written, q, cost(written))
				is.True(q <= cost(written))
			})
		}
	}
}
