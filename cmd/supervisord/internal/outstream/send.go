package outstream

import "errors"

// Send writes q's output to w until the stream ends, and reports how it
// ended: ended (End: all the output was written, then End's frame if it
// had one) or not (Abort: the abort frame, if any, was written in place
// of the output still pending; Dropped says whether the client was
// slow). An error is the connection's: the client went away, or the
// connection failed mid-stream; q is aborted then. A slow client's last
// frames are always whole: Writer never cuts one short.
func Send(q *Queue, w *Writer) (ended bool, err error) {
	for {
		<-q.ready
		b, st, final := q.take()
		if len(b) > 0 {
			if err := w.Data(b); err != nil {
				if errors.Is(err, ErrInterrupted) {
					continue // aborted: the abort's signal is pending
				}
				q.Abort(nil)
				return false, err
			}
		}
		if st == queueOpen {
			continue
		}
		if final != nil {
			if err := w.Frame(final); err != nil {
				q.Abort(nil)
				return false, err
			}
		}
		return st == queueEnded, nil
	}
}
