package main

import (
	"context"
	"flag"
	"log/slog"
	"strings"
	"time"

	"hostkit.dev/lib/daemon"

	"hostkit.dev/cmd/supervisord/internal/egress"
)

// egressConfig holds the flags that wire supervisord to secretd and
// egressd (docs/supervisord.md, "Egress").
type egressConfig struct {
	secretdSocket, egressdSocket *string
	required                     boolish
	poll                         *time.Duration
}

func egressFlags(fs *flag.FlagSet) *egressConfig {
	c := &egressConfig{required: true}
	c.secretdSocket = fs.String("secretd-socket", "", "secretd's API socket (default <run>/secretd/api.sock)")
	c.egressdSocket = fs.String("egressd-socket", "", "egressd's API socket (default <run>/egressd/api.sock)")
	fs.Var(&c.required, "egress-required", "every instance needs an egress bundle: when egressd is unreachable, provisioning fails with credentials.unavailable (1, true or yes; 0, false or no lets instances without credentials start with no proxy environment)")
	c.poll = fs.Duration("egress-poll", egress.DefaultPollInterval, "how often egressd's health (epoch) is checked")
	return c
}

// client builds the egress client from the flags and the layout; owner
// is supervisord's owner id.
func (c *egressConfig) client(l daemon.Layout, log *slog.Logger, owner string) *egress.Client {
	sd, eg := *c.secretdSocket, *c.egressdSocket
	if sd == "" {
		sd = l.Socket(daemon.NameSecretd)
	}
	if eg == "" {
		eg = l.Socket(daemon.NameEgressd)
	}
	if !bool(c.required) {
		log.Warn("supervisord.egress_not_required", slog.String("warning", "-egress-required=false: agents without credentials start without any proxy environment when egressd is unreachable"))
	}
	return egress.New(egress.Config{SecretdSocket: sd, EgressdSocket: eg, Required: bool(c.required), Logger: log, Owner: owner,
		PublicDir: l.Public})
}

// watcher is the run-group actor that polls egressd's epoch.
func (c *egressConfig) watcher(ctx context.Context, eg *egress.Client, onChange func(string)) daemon.Actor {
	wctx, cancel := context.WithCancel(ctx)
	return daemon.Actor{
		Execute:   func() error { eg.Watch(wctx, *c.poll, onChange); return nil },
		Interrupt: func(error) { cancel() },
	}
}

// withEgress adds the egress fields to the health answer and joins the
// egress warning to supervisord's.
func withEgress(h map[string]any, eg *egress.Client) map[string]any {
	// msgpack sorts the keys of map[string]any but not of
	// map[string]int64: with two states or more the counts were not
	// canonical and health failed with internal.
	if c, ok := h["instances"].(map[string]int64); ok {
		m := make(map[string]any, len(c))
		for k, v := range c {
			m[k] = v
		}
		h["instances"] = m
	}
	eh, w := eg.Health()
	for k, v := range eh {
		h[k] = v
	}
	if w != "" {
		prev, _ := h["warning"].(string)
		h["warning"] = strings.TrimPrefix(prev+"; "+w, "; ")
	}
	return h
}
