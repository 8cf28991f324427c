//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// hit is one request the egress stack's upstream received.
type hit struct {
	path, auth string
	at         time.Time
}

// waitFor polls cond every 10 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// auditRec is one audit record (supervisord's or egressd's).
type auditRec struct {
	Op      string         `json:"op"`
	Outcome string         `json:"outcome"`
	Code    string         `json:"code"`
	Fields  map[string]any `json:"fields"`
}

// reregisterRecords returns supervisord's instance.reregister records of
// instance id that succeeded (ok) or failed (!ok), in order.
func (s *egressStack) reregisterRecords(t *testing.T, id string, ok bool) []auditRec {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.root, "log", "supervisord", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []auditRec
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r auditRec
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Op != "instance.reregister" || r.Fields["instance"] != id || (r.Outcome == "ok") != ok {
			continue
		}
		out = append(out, r)
	}
	return out
}

// restartSecretd kills secretd (-9) and starts a new one: every staged
// lease is gone, bundles at egressd keep what they consumed.
func (s *egressStack) restartSecretd(t *testing.T) {
	t.Helper()
	s.sd.kill(t)
	s.sd = startPeer(t, "secretd", "secretd", s.root)
	s.sdc = secretdapi.NewClient(s.sd.rc)
}

// firstHitAfter returns the time of the first request to path with the
// real credential that reached the upstream at or after since.
func (s *egressStack) firstHitAfter(path string, since time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.hits {
		if h.path == path && h.auth == "Bearer "+egressCanary && !h.at.Before(since) {
			return h.at, true
		}
	}
	return time.Time{}, false
}

// freePort returns a loopback address whose port was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// tail is the last 8 KiB of s.
func tail(s string) string { return s[max(0, len(s)-8192):] }

// restartBound is how soon after egressd's READY every running agent must
// work again.
const restartBound = 2 * time.Second

// TestRestartsDoNotStrandAgents: two agents (a host instance and an
// isolated one) loop credentialed requests through egressd with their
// placeholders. egressd is killed (-9) and started again; then secretd
// and egressd. Each time both agents' requests reach the upstream with
// the real value again within restartBound of the new egressd's READY,
// without the agents being touched (same pid, no restart), each
// re-registration is audited, and nothing is left staged at secretd.
// While egressd is down the isolated agent is answered 503
// egress.unavailable by its bridge and the host agent's connection is
// refused. Then a placeholder another invocation holds is refused, from
// both sides: egressd refuses a bundle for it while the agent holds it,
// and a lease staged for it at secretd makes the agent's re-registration
// fail (credentials_lost, with the reason) until the next epoch.
func TestRestartsDoNotStrandAgents(t *testing.T) {
	is := is.New(t)
	s := newEgressStack(t)
	ctx := context.Background()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("supervisord stderr:\n%s\negressd stderr:\n%s", tail(s.cmd.Stderr.(*lockedBuf).String()), tail(s.eg.stderr.String()))
		}
	})
	// A fixed proxy port, as in production (4750): the agents' proxy
	// URL must reach the restarted egressd.
	s.egArgs = append(s.egArgs, "-proxy-address", freePort(t), "-reregister-grace", "10s") // the last ones count
	s.restartEgressd(t)
	loop := func(path string) []string {
		return []string{"sh", "-c", fmt.Sprintf(`while :; do c=$(curl -sS -o /dev/null -w '%%{http_code} %%{http_connect}' --max-time 5 -H "Authorization: Bearer $API_TOKEN" %s%s 2>/dev/null); echo "code=$c"; sleep 0.05; done`,
			s.origin, path)}
	}
	creds := []api.CredentialSpec{{Credential: "api", Env: "API_TOKEN"}}
	host := s.provision(api.ProvisionRequest{Command: loop("/host"), Credentials: creds, Network: &api.Network{Mode: api.NetworkHost}})
	iso := s.provision(api.ProvisionRequest{Command: loop("/iso"), Credentials: creds, Network: &api.Network{Mode: api.NetworkIsolated}})
	agents := map[string]*api.Instance{"/host": host, "/iso": iso}
	start := time.Now()
	for path := range agents {
		waitFor(t, 30*time.Second, func() bool { _, ok := s.firstHitAfter(path, start); return ok })
	}

	// backAfterReady restarts egressd (after a second down, so the agents
	// meet it down) and checks that both agents work within restartBound
	// of its READY, with the same process and a re-registration audited.
	backAfterReady := func(what string) {
		t.Helper()
		okBefore := map[string]int{}
		for path, in := range agents {
			okBefore[path] = len(s.reregisterRecords(t, in.InstanceID, true))
		}
		s.eg.kill(t)
		time.Sleep(time.Second)
		s.eg = startPeer(t, "egressd", "egressd", s.root, s.egArgs...)
		ready := time.Now() // startPeer returns at the first health answer: egressd listens, READY was sent
		s.egc = egressdapi.NewClient(s.eg.rc)
		for path, in := range agents {
			waitFor(t, 30*time.Second, func() bool { _, ok := s.firstHitAfter(path, ready); return ok })
			at, _ := s.firstHitAfter(path, ready)
			t.Logf("%s: %s agent works again %v after egressd's READY", what, path, at.Sub(ready).Round(time.Millisecond))
			if at.Sub(ready) > restartBound {
				t.Errorf("%s: %s agent worked again only %v after READY (want ≤ %v)", what, path, at.Sub(ready), restartBound)
			}
			st, err := s.c.Status(ctx, in.InstanceID)
			is.NoErr(err)
			is.Equal(st.State, api.StateRunning)
			is.Equal(st.PID, in.PID) // the agent was not touched
			is.Equal(st.Restarts, int64(0))
			is.Equal(len(s.reregisterRecords(t, in.InstanceID, true)), okBefore[path]+1) // audited once
		}
		leases, err := s.sdc.LeaseList(ctx, "")
		is.NoErr(err)
		is.Equal(len(leases.Leases), 0) // nothing left staged
	}
	backAfterReady("egressd restart")
	// curl's codes: the answer's, then the CONNECT's.
	// The upstream's hit can come a moment before curl has printed its
	// line: wait for each line rather than read the log once.
	s.waitLog(iso.InstanceID, "code=000 503", 5*time.Second) // the bridge's 503 while egressd was down
	s.waitLog(iso.InstanceID, "code=200", 5*time.Second)
	s.waitLog(host.InstanceID, "code=000 000", 5*time.Second) // connection refused while egressd was down
	s.waitLog(host.InstanceID, "code=200", 5*time.Second)

	s.restartSecretd(t) // bundles keep their values: the agents keep working
	since := time.Now()
	waitFor(t, 10*time.Second, func() bool { _, ok := s.firstHitAfter("/host", since); return ok })
	backAfterReady("secretd, then egressd restart")

	// A placeholder another invocation holds is refused. egressd holds the
	// host agent's in its bundle: secretd (whose lease was consumed) lets
	// another invocation stage it, but egressd refuses that bundle.
	ph := envValue(s.agentEnvFile(t, host.InstanceID), "API_TOKEN")
	is.True(secretdapi.ValidPlaceholder(ph))
	st, err := s.sdc.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "api", Invocation: "squatter", Placeholder: ph})
	is.NoErr(err)
	_, err = s.egc.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "squatter", ProxyToken: strings.Repeat("s", 43),
		Handles: [][]byte{st.Handle}})
	is.Equal(wire.CodeOf(err), egressdapi.CodeBundleConsumeFailed)
	// A live lease of another invocation at secretd holds it: the host
	// agent's re-registration after the next restart fails with the
	// reason, while the isolated agent comes back.
	_, err = s.sdc.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "api", Invocation: "squatter", Placeholder: ph})
	is.NoErr(err)
	s.eg.kill(t)
	s.eg = startPeer(t, "egressd", "egressd", s.root, s.egArgs...)
	ready := time.Now()
	s.egc = egressdapi.NewClient(s.eg.rc)
	var in *api.Instance
	waitFor(t, 10*time.Second, func() bool { // the reason, once the re-registration failed
		in, _ = s.c.Status(ctx, host.InstanceID)
		return in != nil && strings.Contains(in.Warning, secretdapi.CodeLeasePlaceholderInUse)
	})
	is.Equal(in.State, api.StateCredsLost)
	failed := s.reregisterRecords(t, host.InstanceID, false)
	is.True(len(failed) > 0)
	is.True(strings.Contains(failed[len(failed)-1].Fields["reason"].(string), secretdapi.CodeLeasePlaceholderInUse))
	waitFor(t, 10*time.Second, func() bool { _, ok := s.firstHitAfter("/iso", ready); return ok })
	_, err = s.sdc.LeaseRevoke(ctx, "squatter")
	is.NoErr(err)
	leases, err := s.sdc.LeaseList(ctx, "")
	is.NoErr(err)
	is.Equal(len(leases.Leases), 0) // the failed re-registration left nothing staged

	for _, b := range [][]byte{[]byte(s.cmd.Stderr.(*lockedBuf).String()), []byte(s.eg.stderr.String()), []byte(s.sd.stderr.String())} {
		is.True(!bytes.Contains(b, []byte(egressCanary)))
	}
}
