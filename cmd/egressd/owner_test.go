//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/wire"
)

// TestBundleOwners runs the owner rules against the real secretd, from
// both sides: a bundle registered with an owner id is listed with it
// (bundle.list, never a token, handle, placeholder or value: the raw
// answer is scanned); a register by another owner, or by the same one,
// for that invocation is bundle.exists and the existing bundle keeps
// working; a drop naming another owner is bundle.owner_mismatch and
// drops nothing; the owner's own drop works; malformed owners are
// bundle.invalid; every drop's audit record names the owner.
func TestBundleOwners(t *testing.T) {
	is := is.New(t)
	root := newRoot(t)
	ca := egresstest.NewCA(t)
	var mu sync.Mutex
	var got []string
	srv := ca.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Header.Get("Authorization"))
		w.Write([]byte("ok"))
	}), "api.test")
	p := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	dest := "https://api.test:" + p
	sd := startSecretd(t, root)
	eg := startEgressd(t, root, "-resolve", "api.test:"+p+":127.0.0.1", "-ca-file", ca.WriteFile(t, root))
	_, err := sd.api.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: "api", Value: []byte(canary),
		Destinations: []string{dest}, Targets: []secretdapi.TargetSpec{{Target: "header:Authorization", Template: "Bearer {}"}}}, "")
	is.NoErr(err)
	st, err := sd.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "api", Invocation: "inv-o", Owner: "sv-mine"})
	is.NoErr(err)
	_, err = eg.api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "inv-o", Owner: "sv-mine", ProxyToken: token,
		Handles: [][]byte{st.Handle}})
	is.NoErr(err)
	_, err = eg.api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "inv-x", Owner: "sv-theirs", ProxyToken: token})
	is.NoErr(err)

	// bundle.list: filtered, and nothing secret in the raw answer.
	var raw map[string]any
	is.NoErr(eg.rpc.Call(ctx, egressdapi.OpBundleList, &egressdapi.BundleListRequest{}, &raw))
	dump, _ := json.Marshal(raw)
	for _, secret := range []string{canary, token, st.Placeholder} {
		is.True(!strings.Contains(string(dump), secret))
	}
	is.True(!bytes.Contains(dump, st.Handle))
	mine, err := eg.api.BundleList(ctx, "sv-mine", "")
	is.NoErr(err)
	is.Equal(len(mine.Bundles), 1)
	b := mine.Bundles[0]
	is.Equal(b.Invocation, "inv-o")
	is.Equal(b.Owner, "sv-mine")
	is.True(b.Credentialed)
	is.True(b.RegisteredAt > 0)
	info, _ := eg.api.Info(ctx)
	is.Equal(b.Epoch, info.Epoch)
	all, err := eg.api.BundleList(ctx, "", "")
	is.NoErr(err)
	is.Equal(len(all.Bundles), 2)
	is.True(!all.Bundles[1].Credentialed)
	none, err := eg.api.BundleList(ctx, "sv-mine", "inv-x")
	is.NoErr(err)
	is.Equal(len(none.Bundles), 0)

	// A register for inv-o, whoever asks, never replaces the bundle.
	for _, owner := range []string{"sv-theirs", "sv-mine", ""} {
		_, err = eg.api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "inv-o", Owner: owner, ProxyToken: token})
		is.Equal(wire.CodeOf(err), egressdapi.CodeBundleExists)
	}
	is.Equal(wire.CodeOf(eg.api.BundleDropOwned(ctx, "inv-o", "sv-theirs")), egressdapi.CodeBundleOwnerMismatch)
	resp, err := eg.api.Request(ctx, &egressdapi.RequestRequest{Invocation: "inv-o", Method: "GET", URL: dest + "/"})
	is.NoErr(err) // the existing bundle still works: its credential is injected
	is.Equal(resp.Status, 200)
	mu.Lock()
	is.Equal(got, []string{"Bearer " + canary})
	mu.Unlock()

	for _, bad := range []string{"SV", "sv_mine", strings.Repeat("o", 65)} {
		_, err = eg.api.BundleList(ctx, bad, "")
		is.Equal(wire.CodeOf(err), egressdapi.CodeBundleInvalid)
		is.Equal(wire.CodeOf(eg.api.BundleDropOwned(ctx, "inv-o", bad)), egressdapi.CodeBundleInvalid)
		_, err = eg.api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "inv-n", Owner: bad, ProxyToken: token})
		is.Equal(wire.CodeOf(err), egressdapi.CodeBundleInvalid)
	}
	_, err = eg.api.BundleList(ctx, "", "Inv")
	is.Equal(wire.CodeOf(err), egressdapi.CodeBundleInvalid)
	all, _ = eg.api.BundleList(ctx, "", "")
	is.Equal(len(all.Bundles), 2) // nothing refused changed anything

	is.NoErr(eg.api.BundleDropOwned(ctx, "inv-o", "sv-mine"))
	mine, _ = eg.api.BundleList(ctx, "sv-mine", "")
	is.Equal(len(mine.Bundles), 0)
	theirs, _ := eg.api.BundleList(ctx, "sv-theirs", "")
	is.Equal(len(theirs.Bundles), 1) // the other owner's bundle stays

	a := eg.auditLog(t)
	is.True(strings.Contains(a, `"code":"bundle.owner_mismatch"`))
	is.True(strings.Contains(a, `"owner":"sv-theirs"`))
	is.True(strings.Contains(a, `"owner":"sv-mine"`))
	for what, s := range map[string]string{"egressd log": eg.stderr.String(), "egressd audit": a} {
		if strings.Contains(s, canary) || strings.Contains(s, token) {
			t.Errorf("secret in %s", what)
		}
	}
}

// TestBundleListNeedsStager: bundle.list is the stager's op; another
// user is peer.denied.
func TestBundleListNeedsStager(t *testing.T) {
	is := is.New(t)
	root := newRoot(t)
	other := strconv.Itoa(os.Geteuid() + 4242)
	eg := startEgressd(t, root, "-stager-users", other, "-admin-users", strconv.Itoa(os.Geteuid()))
	_, err := eg.api.BundleList(ctx, "", "")
	is.Equal(wire.CodeOf(err), wire.CodePeerDenied)
}
