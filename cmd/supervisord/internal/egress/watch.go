package egress

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"

	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// DefaultPollInterval is how often Watch asks egressd for its epoch.
const DefaultPollInterval = 3 * time.Second

// epochState is what supervisord last learnt of egressd.
type epochState struct {
	mu        sync.Mutex
	epoch     string // egressd's current epoch as last seen ("" = never seen)
	announced string // the epoch Watch last handed to onChange
	reachable bool
	lastErr   string // code of the last failed poll
	polled    bool
}

// observe records epoch as egressd's current one (from health or from a
// bundle.register answer).
func (c *Client) observe(epoch string) {
	if epoch == "" {
		return
	}
	c.ep.mu.Lock()
	c.ep.epoch = epoch
	c.ep.mu.Unlock()
}

// Lost reports whether a bundle registered at epoch is gone: egressd has
// since been seen with another epoch (it restarted, and bundles live in
// its memory only).
func (c *Client) Lost(epoch string) bool {
	c.ep.mu.Lock()
	defer c.ep.mu.Unlock()
	return epoch != "" && c.ep.epoch != "" && c.ep.epoch != epoch
}

// FastProbe is how often Watch probes egressd's health while egressd
// does not answer: a restarted egressd's epoch is seen at most this long
// (and one health call) after it listens again.
const FastProbe = 100 * time.Millisecond

// Watch follows egressd's epoch until ctx ends: it holds an idle
// connection to egressd's socket and probes health whenever egressd
// closes it (egressd stopped or died, or the connection sat idle for the
// server's idle timeout), then every FastProbe until egressd answers
// again, and otherwise every interval (0 = DefaultPollInterval). So a
// restart is seen within FastProbe of the new egressd's READY rather than
// at the next poll. Whenever the epoch it sees differs from the one it
// last handed over (the first answer included), it calls onChange with
// it; onChange re-registers instances whose bundle belongs to another
// epoch.
func (c *Client) Watch(ctx context.Context, interval time.Duration, onChange func(epoch string)) {
	if c.cfg.EgressdSocket == "" {
		<-ctx.Done()
		return
	}
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	hc := rpc.NewClient(c.cfg.EgressdSocket, min(interval, c.cfg.Timeout))
	defer hc.Close()
	var held *heldConn
	defer func() { held.close() }()
	for {
		up := c.poll(ctx, hc, onChange)
		if up && held == nil {
			held = dialHeld(c.cfg.EgressdSocket)
		}
		wait := interval
		if !up {
			wait = FastProbe
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-held.closed():
			held.close()
			held = nil
		case <-t.C:
		}
		t.Stop()
	}
}

// heldConn is an idle connection to egressd's API socket whose end
// (EOF, a reset) says egressd closed it. Its reader is owned by Watch,
// which closes it.
type heldConn struct {
	c    net.Conn
	done chan struct{} // closed when the connection ended
}

// dialHeld connects to socket and watches the connection; nil when the
// dial fails (Watch then polls as before).
func dialHeld(socket string) *heldConn {
	conn, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		return nil
	}
	h := &heldConn{c: conn, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		var b [1]byte
		for {
			if _, err := conn.Read(b[:]); err != nil {
				return
			}
		}
	}()
	return h
}

// closed is a channel that is closed when h's connection ended; nil
// (never ready) for a nil h.
func (h *heldConn) closed() <-chan struct{} {
	if h == nil {
		return nil
	}
	return h.done
}

// close closes h's connection and waits for its reader; nil-safe.
func (h *heldConn) close() {
	if h == nil {
		return
	}
	h.c.Close()
	<-h.done
}

// poll asks egressd's health once, records what it learnt, and reports
// whether egressd answered.
func (c *Client) poll(ctx context.Context, hc *rpc.Client, onChange func(string)) bool {
	h, err := healthapi.Get(ctx, hc)
	if ctx.Err() != nil {
		return false
	}
	c.ep.mu.Lock()
	wasReachable, first := c.ep.reachable, !c.ep.polled
	c.ep.polled = true
	if err != nil {
		c.ep.reachable, c.ep.lastErr = false, wire.CodeOf(err)
		c.ep.mu.Unlock()
		if wasReachable || first {
			c.cfg.Logger.Warn("egressd.unreachable", slog.String("code", wire.CodeOf(err)), slog.String("socket", c.cfg.EgressdSocket))
		}
		return false
	}
	c.ep.reachable, c.ep.lastErr = true, ""
	c.ep.epoch = h.Epoch
	changed := h.Epoch != c.ep.announced
	prev := c.ep.announced
	c.ep.announced = h.Epoch
	c.ep.mu.Unlock()
	if !wasReachable && !first {
		c.cfg.Logger.Info("egressd.reachable", slog.String("epoch", h.Epoch))
	}
	if changed {
		if prev != "" {
			c.cfg.Logger.Warn("egressd.epoch_changed", slog.String("epoch", h.Epoch), slog.String("previous", prev))
		}
		if onChange != nil {
			onChange(h.Epoch)
		}
	}
	return true
}

// Health returns the egress fields of supervisord's health answer, and a
// warning when instances cannot get (or have lost) their bundles.
func (c *Client) Health() (map[string]any, string) {
	c.ep.mu.Lock()
	defer c.ep.mu.Unlock()
	h := map[string]any{
		"egress_required":   c.cfg.Required,
		"egressd_reachable": c.ep.reachable,
		"egressd_epoch":     c.ep.epoch,
	}
	switch {
	case c.cfg.EgressdSocket == "":
		return h, "EGRESS NOT CONFIGURED: no egressd socket; credentialed provisioning fails with credentials.unavailable"
	case c.ep.polled && !c.ep.reachable && c.cfg.Required:
		return h, "EGRESSD UNREACHABLE (" + c.ep.lastErr + "): provisioning fails with credentials.unavailable until it is back"
	case c.ep.polled && !c.ep.reachable:
		return h, "EGRESSD UNREACHABLE (" + c.ep.lastErr + ") and -egress-required=false: agents without credentials start WITHOUT any proxy environment; credentialed provisioning fails"
	case !c.cfg.Required:
		return h, "-egress-required=false: if egressd is unreachable, agents without credentials start WITHOUT any proxy environment"
	}
	return h, ""
}
