package holder

// ring keeps the last len(buf) bytes written. Not safe for concurrent use.
type ring struct {
	buf   []byte
	start int // index of the oldest byte when full
	full  bool
	n     int // bytes held when not full
}

func newRing(size int) *ring { return &ring{buf: make([]byte, size)} }

// Write appends p, dropping the oldest bytes beyond the ring's size.
func (r *ring) Write(p []byte) {
	size := len(r.buf)
	if len(p) >= size {
		copy(r.buf, p[len(p)-size:])
		r.start, r.full = 0, true
		return
	}
	if !r.full {
		if r.n+len(p) <= size {
			copy(r.buf[r.n:], p)
			r.n += len(p)
			if r.n == size {
				r.full, r.start = true, 0
			}
			return
		}
		r.full, r.start = true, r.n%size
		// fall through: write at r.start (end of the data) with wrap
		pos := r.n
		k := copy(r.buf[pos:], p)
		copy(r.buf, p[k:])
		r.start = len(p) - k
		return
	}
	pos := r.start
	k := copy(r.buf[pos:], p)
	copy(r.buf, p[k:])
	r.start = (pos + len(p)) % size
}

// segments returns the held bytes, oldest first, as at most two slices of
// the ring's own buffer (valid until the next Write).
func (r *ring) segments() [2][]byte {
	if !r.full {
		return [2][]byte{r.buf[:r.n]}
	}
	return [2][]byte{r.buf[r.start:], r.buf[:r.start]}
}
