package pipeline

// BodyScrubber scrubs one response body (or one WebSocket message) that arrives in pieces: Next
// returns, appended to dst, what may be passed on now; Close the rest at
// the body's end. An error means the body holds a held value in a form
// that cannot be removed in place: the answer is cut off before it.
type BodyScrubber interface {
	Next(dst, p []byte) ([]byte, error)
	Close(dst []byte) ([]byte, error)
}

// NewScrubber returns a scrubber for one body over the values held now.
// INTERIM: holds the whole body until Close (to be replaced by
// redact.Stream).
func (p *Pipeline) NewScrubber() BodyScrubber {
	return &wholeScrubber{p: p}
}

type wholeScrubber struct {
	p   *Pipeline
	buf []byte
}

func (w *wholeScrubber) Next(dst, p []byte) ([]byte, error) {
	w.buf = append(w.buf, p...)
	return dst, nil
}

func (w *wholeScrubber) Close(dst []byte) ([]byte, error) {
	sc := w.p.cfg.Registry.Scrubber()
	out := sc.ScrubBytes(w.buf)
	if sc.ContainsDecoded(out) {
		return dst, errEscapedEcho()
	}
	return append(dst, out...), nil
}
