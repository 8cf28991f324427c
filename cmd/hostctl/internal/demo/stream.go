package demo

import (
	"context"
	"fmt"
	"time"
)

// streamBound is how late an event may reach the agent after the API sent
// it for the step to hold: well above what streaming takes (a few ms),
// below streamGap, so an answer held back until the next event or the
// end fails.
const streamBound = 500 * time.Millisecond

// stepStream shows the agent's streamed answer: each event as the API sent
// it and as the agent read it, through egressd with the placeholder
// substituted on the way.
func (r *runner) stepStream(context.Context) error {
	r.t.step(5, "the agent streams an answer (server-sent events) through egressd")
	ev := r.agent.events
	if len(ev) == 0 {
		r.t.check(false, "", fmt.Sprintf("the agent read no event from %s%s", r.api.origin(), streamPath))
		return nil
	}
	late := 0
	for _, e := range ev {
		d := time.Duration(e.read - e.sent)
		if d > streamBound {
			late++
		}
		r.t.note("event %d: sent at +%5.3f s, the agent read it at +%5.3f s (%s later)", e.i,
			time.Duration(e.sent-ev[0].sent).Seconds(), time.Duration(e.read-ev[0].sent).Seconds(), d.Round(100*time.Microsecond))
	}
	r.t.check(len(ev) == streamEvents && late == 0,
		fmt.Sprintf("all %d events reached the agent as the API sent them (%s apart), the key substituted on the way", len(ev), streamGap),
		fmt.Sprintf("streamed events: want %d, each within %s of being sent; got %d, %d late", streamEvents, streamBound, len(ev), late))
	return nil
}
