//go:build linux

package holder

import (
	"context"
	"net/url"
	"strings"

	"hostkit.dev/cmd/supervisord/internal/netns"
)

// transparent starts the namespace's transparent egress (resolver,
// redirect rules, relay) with the instance's policy, its credentials'
// destinations and its proxy credentials, and the reports of what the
// resolver refuses (reportRefusals); the channel closes once all have
// stopped after ctx ended. Errors: network.nftables_unavailable,
// runtime.unavailable.
func (h *holder) transparent(ctx context.Context, ns *netns.NS) (<-chan struct{}, error) {
	inv, tok := proxyUser(h.env)
	e, egressDone, err := ns.TransparentEgress(ctx, netns.EgressConfig{ProxySocket: h.spec.ProxySocket, Invocation: inv, Token: tok,
		Allow: h.spec.Allow, Destinations: h.spec.Destinations, MaxNames: h.spec.SyntheticNames, Log: h.log})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.reportRefusals(ctx, e.Refusals, egressDone)
	}()
	return done, nil
}

// proxyUser returns the invocation and proxy token of the agent's proxy
// variables (http://invocation:token@address; agent.env is their only
// durable copy), or "" when it has none.
func proxyUser(env []string) (string, string) {
	for _, kv := range env {
		v, ok := strings.CutPrefix(kv, "HTTPS_PROXY=")
		if !ok {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || u.User == nil {
			return "", ""
		}
		tok, _ := u.User.Password()
		return u.User.Username(), tok
	}
	return "", ""
}
