package redact

// Detector finds held values in a body that is sent on as it arrives
// (a request body going upstream): the same forms as Contains and
// ContainsDecoded, found with the same hold-back as a Stream, reported
// instead of replaced. It matches the values registered when it was
// made. It is not safe for concurrent use.
//
// For every way a body is cut into pieces, a hit is reported (by Next or
// Close) exactly when Contains or ContainsDecoded reports true for the
// whole body, and the bytes released before it never reach the first
// byte of the match.
type Detector struct {
	v    *views // nil: nothing registered
	n    int64  // bytes read
	rel  int64  // bytes released
	done bool
}

// NewDetector returns a Detector over the values registered now. A nil
// Scrubber, or one with nothing registered, gives a Detector that
// releases every byte at once and never reports a hit.
func (s *Scrubber) NewDetector() *Detector {
	m := s.load()
	if m == nil {
		return &Detector{}
	}
	return &Detector{v: newViews(m)}
}

// Next reads p, the next piece of the body. release is how many bytes of
// the body read so far (all pieces) may be sent on: everything but the
// held-back tail. hit reports that the body holds a registered value;
// from then on release stops growing and hit stays true. p is not kept.
func (d *Detector) Next(p []byte) (release int, hit bool) {
	if d.v == nil {
		d.n += int64(len(p))
		d.rel = d.n
		return int(d.rel), false
	}
	if d.v.hit || d.done {
		return int(d.rel), d.v.hit
	}
	d.v.write(p, d.n)
	d.n += int64(len(p))
	if d.v.hit {
		return int(d.rel), true
	}
	d.rel = max(d.rel, min(d.n, d.v.held())) // held only moves forward
	return int(d.rel), false
}

// Close ends the body: it reports whether the body holds a registered
// value, and releases the rest when it does not.
func (d *Detector) Close() (release int, hit bool) {
	if d.v == nil {
		return int(d.n), false
	}
	if !d.v.hit && !d.done {
		d.v.flush()
	}
	d.done = true
	if d.v.hit {
		return int(d.rel), true
	}
	d.rel = d.n
	return int(d.n), false
}

// Held returns how many bytes read are not released.
func (d *Detector) Held() int { return int(d.n - d.rel) }
