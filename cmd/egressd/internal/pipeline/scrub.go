package pipeline

import "hostkit.dev/lib/redact"

// BodyScrubber scrubs one response body (or one WebSocket message) that
// arrives in pieces: Next returns, appended to dst, what may be passed on
// now; Close the rest at the body's end. An error means the body holds a
// held value in a form that cannot be removed in place: the answer is
// cut off before it (redact.Stream, whose hold-back rule docs/egressd.md
// describes).
type BodyScrubber interface {
	Next(dst, p []byte) ([]byte, error)
	Close(dst []byte) ([]byte, error)
}

// NewScrubber returns a scrubber for one body over the values held now
// (a value registered later is not matched by it).
func (p *Pipeline) NewScrubber() BodyScrubber {
	return p.cfg.Registry.Scrubber().NewStream()
}

var _ BodyScrubber = (*redact.Stream)(nil)
