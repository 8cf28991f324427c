package demo

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"hostkit.dev/lib/api/egressdapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/daemon"
	"hostkit.dev/lib/wire"
)

// misuseCode is egressd's refusal of a placeholder sent where it does not
// belong.
const misuseCode = egressdapi.CodePlaceholderMisuse

// stepServersSaw compares what the agent reported with what the servers
// recorded, and reads egressd's byte count while the bundle lives.
func (r *runner) stepServersSaw(ctx context.Context) error {
	r.t.step(7, "what each side saw")
	want := []string{"curl"}
	if r.python {
		want = append(want, "python")
	}
	if r.node {
		want = append(want, "node")
	}
	var got []seen
	for _, s := range r.api.requests() {
		if s.path != streamPath { // step 5's; step 6's counts too
			got = append(got, s)
		}
	}
	right := 0
	for _, s := range got {
		if s.authorization == "Bearer "+string(r.token) {
			right++
		}
	}
	okStatus := true
	for _, tool := range want {
		res, found := r.agent.find(tool, r.api.origin(), "with")
		okStatus = okStatus && found && res.status == "200"
	}
	r.t.check(len(got) == len(want) && right == len(got) && okStatus,
		fmt.Sprintf("%s received %d request(s), each with Authorization: Bearer %s: the real token (200)", apiHost, len(got), preview(r.token)),
		fmt.Sprintf("%s: want %d request(s) with the real token and 200 for each of %v; got %d, %d with the token", apiHost, len(want), want, len(got), right))

	ph := r.placeholder()
	res, _ := r.agent.find("curl", r.other.origin(), "with")
	r.t.check(res.status == "403" && res.code == misuseCode,
		fmt.Sprintf("the placeholder sent to %s was refused: 403, X-Hostkit-Error: %s", otherHost, res.code),
		fmt.Sprintf("exfiltration to %s: want 403 %s, got %q %q", otherHost, misuseCode, res.status, res.code))
	plain, _ := r.agent.find("curl", r.other.origin(), "without")
	leaked := 0
	for _, s := range r.other.requests() {
		if (ph != "" && bytes.Contains(s.raw, []byte(ph))) || containsSecret(s.raw, r.token) {
			leaked++
		}
	}
	n := len(r.other.requests())
	r.t.check(plain.status == "200" && n == 1 && leaked == 0,
		fmt.Sprintf("%s got only the request without the placeholder (200): neither placeholder nor token reached it", otherHost),
		fmt.Sprintf("%s: want 1 request (without the placeholder, 200) and nothing leaked; got %d request(s), %d with the placeholder or token, plain status %q", otherHost, n, leaked, plain.status))

	st, err := r.eg.Stats(ctx, r.id)
	if err != nil {
		return fmt.Errorf("egress.stats: %w", err)
	}
	var s egressdapi.InvocationStats
	if len(st.Invocations) == 1 {
		s = st.Invocations[0]
	}
	r.t.check(s.Invocation == r.id && s.NetworkEgressBytes > 0 && s.Refused >= 1,
		fmt.Sprintf("egressd counted %d bytes sent upstream in %d request(s) for the instance; %d refused", s.NetworkEgressBytes, s.Requests, s.Refused),
		fmt.Sprintf("egress.stats: want bytes > 0 and a refusal for %s, got %+v", r.id, st.Invocations))
	return nil
}

// stepStopDestroy stops and destroys the instance and checks that nothing
// of it is left: no process, no bundle, no lease.
func (r *runner) stepStopDestroy(ctx context.Context) error {
	r.t.step(8, "stop and destroy")
	before := processesWith(r.id)
	st, err := r.sv.Status(ctx, r.id)
	if err != nil {
		return fmt.Errorf("instance.status: %w", err)
	}
	stopped, err := r.sv.Stop(ctx, r.id)
	if err != nil {
		return fmt.Errorf("instance.stop: %w", err)
	}
	if err := r.sv.Destroy(ctx, r.id); err != nil {
		return fmt.Errorf("instance.destroy: %w", err)
	}
	r.live = false
	_, err = r.sv.Status(ctx, r.id)
	r.t.check(stopped.State == api.StateStopped && wire.HasCode(err, api.CodeInstanceNotFound),
		"stopped (state stopped), then destroyed (status: "+api.CodeInstanceNotFound+")",
		fmt.Sprintf("stop/destroy: state %q after stop, status after destroy: %v", stopped.State, err))

	var left []process
	for deadline := time.Now().Add(3 * time.Second); ; {
		left = processesWith(r.id)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	groupGone := st.PGID <= 0 || syscall.Kill(-int(st.PGID), 0) == syscall.ESRCH
	if canScanProcs {
		r.t.check(len(before) > 0 && len(left) == 0 && groupGone,
			fmt.Sprintf("no process of the instance remains (/proc scanned for its id: %d before stop, 0 now)", len(before)),
			fmt.Sprintf("processes of the instance: %d before stop, left after destroy: %v (process group %d gone: %v)", len(before), left, st.PGID, groupGone))
	} else {
		r.t.check(groupGone, fmt.Sprintf("the agent's process group %d is gone", st.PGID), fmt.Sprintf("the agent's process group %d survived destroy", st.PGID))
	}

	_, serr := r.eg.Stats(ctx, r.id)
	leases, lerr := r.sd.LeaseList(ctx, r.id)
	r.t.check(wire.HasCode(serr, egressdapi.CodeBundleUnknown) && lerr == nil && len(leases.Leases) == 0,
		"egressd dropped the instance's bundle and secretd holds no lease for it",
		fmt.Sprintf("after destroy: egress.stats %v, lease.list %v", serr, lerr))
	return nil
}

// stepToken scans everything for the raw token: the transcript so far and
// every file under the root but secretd's credential store.
func (r *runner) stepToken(context.Context) error {
	r.t.step(10, "the raw token")
	store := filepath.Join(r.layout.StateDir(daemon.NameSecretd), "credentials")
	hits, n := filesWith(r.root, r.token, store)
	r.t.check(!containsSecret(r.t.copy.Bytes(), r.token) && len(hits) == 0 && n > 0,
		fmt.Sprintf("appears nowhere: not in this transcript, nor in any of %d files under the root (audit and daemon logs included) but secretd's store", n),
		fmt.Sprintf("the raw token leaked: transcript %v, files %q", containsSecret(r.t.copy.Bytes(), r.token), hits))
	return nil
}

// filesWith returns the regular files under dir (but those under skip)
// that hold v in any form, and how many files it read.
func filesWith(dir string, v []byte, skip string) (hits []string, n int) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case skip != "" && p == skip:
			return filepath.SkipDir
		case !d.Type().IsRegular():
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			hits = append(hits, p+" (unreadable: "+err.Error()+")")
			return nil
		}
		n++
		if containsSecret(b, v) {
			hits = append(hits, strings.TrimPrefix(p, dir+"/"))
		}
		return nil
	})
	return hits, n
}
