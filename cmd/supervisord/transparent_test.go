//go:build linux

package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
)

// TestTransparentEgressEndToEnd: in an isolated instance, a program that
// ignores the proxy variables (Python's own sockets and ssl, resolving
// through the namespace's resolver) gets exactly the proxied decisions
// from a real egressd: its placeholder is substituted for the approved
// destination, is placeholder_misuse at another allowed name, a TLS
// server name other than the resolved name is refused, a raw TCP
// connection is refused (the instance holds a credential), and a name the
// policy does not allow is REFUSED by the resolver.
func TestTransparentEgressEndToEnd(t *testing.T) {
	is := is.New(t)
	s := newEgressStack(t)
	script, err := os.ReadFile("testdata/tclient.py")
	is.NoErr(err)
	port := strings.TrimPrefix(s.origin, "https://api.test:")
	// other.test is allowed and resolves to the same loopback upstream.
	s.egArgs = append(s.egArgs, "-resolve", "other.test:"+port+":127.0.0.1")
	s.restartEgressd(t)
	time.Sleep(300 * time.Millisecond) // supervisord's poll sees the new epoch
	in, err := s.c.Provision(context.Background(), &api.ProvisionRequest{Command: []string{"/usr/bin/python3", "-c", string(script), port},
		WorkingDir: "/tmp", Start: true, StopTimeoutMS: 1000,
		Network:     &api.Network{Mode: api.NetworkIsolated, Allow: []string{s.origin, "https://other.test:" + port}},
		Credentials: []api.CredentialSpec{{Credential: "api", Env: "API_TOKEN"}}})
	is.NoErr(err)
	out := s.waitLog(in.InstanceID, "done", 60*time.Second)
	t.Logf("agent: %s", out)
	is.True(strings.Contains(out, "resolve-api ip=198.1"))
	is.True(strings.Contains(out, "resolve-other ip=198.1"))
	is.True(strings.Contains(out, "resolve-denied rcode=5"))    // REFUSED, never forwarded
	is.True(strings.Contains(out, "approved status=200 code=")) // substituted and answered
	is.True(strings.Contains(out, "elsewhere status=403 code=egress.placeholder_misuse"))
	is.True(strings.Contains(out, "sni-mismatch error=")) // the handshake is refused
	is.True(strings.Contains(out, "raw error=") || strings.Contains(out, "raw read=0"))
	is.Equal(s.received(), []string{"Bearer " + egressCanary}) // only the approved request arrived
	is.True(!strings.Contains(out, egressCanary))
}
