//go:build linux

package main

import (
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

var ctx = context.Background()

const (
	canary = "CANARY-egressd-e2e-5c1d9a"
	token  = "tok_tok_tok_tok_tok_tok_tok_tok_tok_tok_tok"
)

// TestEndToEndWithSecretd runs the main flow against the real secretd:
// put, stage, register (consume), a mediated request with injection over
// verified TLS, stats, drop; all-or-nothing consume with one bad handle;
// and a canary scan of every output.
func TestEndToEndWithSecretd(t *testing.T) {
	is := is.New(t)
	root := newRoot(t)
	ca := egresstest.NewCA(t)
	var mu sync.Mutex
	var gotAuth []string
	srv := ca.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotAuth = append(gotAuth, r.Header.Get("Authorization"), r.URL.Query().Get("key"))
		mu.Unlock()
		v := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		io.WriteString(w, "echo "+v+" "+base64.StdEncoding.EncodeToString([]byte(v)))
	}), "api.test")
	p := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	dest := "https://api.test:" + p

	sd := startSecretd(t, root)
	eg := startEgressd(t, root, "-resolve", "api.test:"+p+":127.0.0.1", "-ca-file", ca.WriteFile(t, root))

	_, err := sd.api.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: "api", Value: []byte(canary),
		Destinations: []string{dest}, Targets: []secretdapi.TargetSpec{{Target: "header:Authorization", Template: "Bearer {}"}}}, "")
	is.NoErr(err)
	_, err = sd.api.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: "api2", Value: []byte(canary + "-2"),
		Destinations: []string{dest}, Targets: []secretdapi.TargetSpec{{Target: "query:key"}}}, "")
	is.NoErr(err)
	stage := func(cred, inv string) *secretdapi.LeaseStageResponse {
		st, err := sd.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: cred, Invocation: inv})
		is.NoErr(err)
		return st
	}

	// One bad handle: nothing is consumed, so the good one still works.
	good := stage("api", "inv-1")
	_, err = eg.api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "inv-1", ProxyToken: token,
		Handles: [][]byte{good.Handle, []byte("not-a-handle")}})
	is.Equal(wire.CodeOf(err), egressdapi.CodeBundleConsumeFailed)
	second := stage("api2", "inv-1")
	reg, err := eg.api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "inv-1", ProxyToken: token,
		Handles: [][]byte{good.Handle, second.Handle}})
	is.NoErr(err)
	h, err := healthapi.GetAll(ctx, eg.rpc)
	is.NoErr(err)
	is.Equal(reg.Epoch, h["epoch"])
	is.Equal(h["bundles"], int8(1))

	info, err := eg.api.Info(ctx)
	is.NoErr(err)
	is.Equal(info.Epoch, reg.Epoch)
	is.True(strings.HasPrefix(info.ProxyAddress, "127.0.0.1:") && info.ProxyAddress != "127.0.0.1:0")
	is.True(strings.HasSuffix(info.ProxySocket, "/run/egressd/proxy.sock"))
	is.True(strings.HasSuffix(info.CABundlePath, "/run/public/egressd-ca.pem"))

	resp, err := eg.api.Request(ctx, &egressdapi.RequestRequest{Invocation: "inv-1", Method: "GET", URL: dest + "/v1/me"})
	is.NoErr(err)
	is.Equal(resp.Status, 200)
	is.Equal(string(resp.Body), "echo "+redact.Redacted+" "+redact.Redacted)
	mu.Lock()
	is.Equal(gotAuth, []string{"Bearer " + canary, canary + "-2"})
	mu.Unlock()

	// The placeholder is not the value, and the raw value from a caller is refused.
	_, err = eg.api.Request(ctx, &egressdapi.RequestRequest{Invocation: "inv-1", Method: "GET", URL: dest + "/",
		Headers: []egressdapi.Header{{Name: "X-Copy", Value: canary}}})
	is.Equal(wire.CodeOf(err), egressdapi.CodeManualCredential)

	st, err := eg.api.Stats(ctx, "inv-1")
	is.NoErr(err)
	is.Equal(st.Invocations[0].Requests, uint64(1))
	is.True(st.Invocations[0].NetworkEgressBytes > 0)

	is.NoErr(eg.api.BundleDrop(ctx, "inv-1"))
	_, err = eg.api.Request(ctx, &egressdapi.RequestRequest{Invocation: "inv-1", Method: "GET", URL: dest + "/"})
	is.Equal(wire.CodeOf(err), egressdapi.CodeBundleUnknown)
	is.Equal(wire.CodeOf(eg.api.BundleDrop(ctx, "inv-1")), egressdapi.CodeBundleUnknown)
	// Consumed handles stay consumed.
	_, err = eg.api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "inv-2", ProxyToken: token, Handles: [][]byte{good.Handle}})
	is.Equal(wire.CodeOf(err), egressdapi.CodeBundleConsumeFailed)

	probe := redact.NewScrubber()
	probe.Register([]byte(canary))
	for what, s := range map[string]string{"egressd log": eg.stderr.String(), "egressd audit": eg.auditLog(t), "secretd log": sd.stderr.String()} {
		is.True(strings.Contains(s, "egress") || what == "secretd log")
		if probe.Contains([]byte(s)) {
			t.Errorf("canary in %s", what)
		}
	}
	is.True(strings.Contains(eg.stderr.String(), `"msg":"egress.decision"`))
}
