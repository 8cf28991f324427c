package pipeline

import (
	"sync"
	"sync/atomic"
)

// A streamed answer may wait minutes between pieces (an LLM thinking, an
// SSE stream between events), and hundreds may be open at once, so what
// a waiting stream holds is what they cost. A Stream reads its upstream
// into a small buffer (smallRead bytes: an SSE event arrives whole in
// one read); only when a read fills that does the next read take a
// bigRead buffer from the Pipeline's pool, kept while reads return more
// than smallRead bytes (a bulk transfer) and given back before the read
// after one that returned less. (A stream whose last read returned more
// than smallRead bytes waits with the large buffer: only a read can tell
// whether more is coming.) The scrubbed bytes of a large piece go into a
// pooled buffer too, given back once the caller has taken them. So a
// waiting stream holds smallRead bytes and a small output slice, and a
// bulk transfer still moves bigRead bytes a read. Every buffer goes back
// to its pool once the body has ended and been handed out (a stream
// closed before that leaves its buffers to the collector: Close may run
// while a read is under way).
const (
	// smallRead is the read buffer every open stream holds.
	smallRead = 2 << 10
	// bigRead is the size of one upstream read of a bulk transfer:
	// large enough for a body to move in few reads, each scrubbed and
	// written as one piece.
	bigRead = 32 << 10
	// keepOut is the largest output slice a stream keeps between pieces
	// (a larger one came from a large piece: it is pooled or dropped).
	keepOut = 4 << 10
)

// bufPool pools buffers of one size shared by every stream of a
// Pipeline: bigRead bytes (bufs), or smallRead (smalls: a short answer's
// read buffer is then not garbage once it has ended).
type bufPool struct {
	size  int
	p     sync.Pool
	out   atomic.Int64  // buffers taken and not given back (tests read it)
	taken atomic.Uint64 // buffers ever taken
}

func (b *bufPool) get() *[]byte {
	b.out.Add(1)
	b.taken.Add(1)
	if v, ok := b.p.Get().(*[]byte); ok {
		return v
	}
	buf := make([]byte, b.size)
	return &buf
}

func (b *bufPool) put(v *[]byte) {
	if v == nil {
		return
	}
	b.out.Add(-1)
	*v = (*v)[:b.size]
	b.p.Put(v)
}

// readBuf returns the buffer for the next upstream read: a pooled large
// one when the last read returned smallRead bytes or more (more is
// likely waiting), else the stream's small one. The large one goes back
// to the pool here, before a read that may wait.
func (st *Stream) readBuf() []byte {
	switch {
	case st.bulk && st.big == nil:
		st.big = st.p.bufs.get()
	case !st.bulk && st.big != nil:
		st.p.bufs.put(st.big)
		st.big = nil
	}
	if st.big != nil {
		return *st.big
	}
	if st.small == nil {
		st.small = st.p.smalls.get()
	}
	return *st.small
}

// outBuf returns the slice to append the scrubbed bytes of an n-byte
// read to: a pooled buffer for a large read, else the stream's kept
// slice. st.out has been handed out whole.
func (st *Stream) outBuf(n int) []byte {
	st.releaseOut()
	if n > keepOut {
		st.outPool = st.p.bufs.get()
		return (*st.outPool)[:0]
	}
	return st.keep[:0]
}

// scrubbed takes the scrubber's output for the read buffer rb. With
// nothing registered the scrubber returns rb itself: that is safe, since
// a pooled buffer goes back to the pool only in the next fill, once the
// piece was handed out, but rb is then not kept as the output slice.
func (st *Stream) scrubbed(out, rb []byte) {
	st.out, st.off = out, 0
	if len(out) > 0 && len(rb) > 0 && &out[0] == &rb[0] {
		return
	}
	if st.outPool == nil && cap(out) <= keepOut {
		st.keep = out[:0]
	}
}

// releaseOut gives back the pooled buffer of the piece just handed out.
// Only the reading goroutine calls it (Close may run on another while a
// read is under way, so it leaves pooled buffers to the collector).
func (st *Stream) releaseOut() {
	if st.outPool != nil {
		st.p.bufs.put(st.outPool)
		st.outPool = nil
	}
	st.out, st.off = nil, 0
}

// releaseAll gives back every pooled buffer once the body has ended and
// its last piece was handed out.
func (st *Stream) releaseAll() {
	st.releaseOut()
	if st.big != nil {
		st.p.bufs.put(st.big)
		st.big = nil
	}
	st.p.smalls.put(st.small)
	st.small, st.keep = nil, nil
}
