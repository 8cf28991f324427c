//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/wire"
)

// uploadNative is secretd + egressd (-idle-timeout nativeIdle,
// -max-request-body 64 KiB, -buffer-budget 128 KiB) in front of two HTTPS
// upstreams that read and hash every request body (uploadSink): up.test,
// where egressd injects inv-u's key into Authorization, and body.test,
// where it injects it into the JSON body at /auth/key. inv-o holds a
// lease of the same key, so its placeholder is foreign to inv-u.
type uploadNative struct {
	eg          *egressd
	sink        *uploadSink
	up, body    string // https://up.test:<port>, https://body.test:<port>
	ph, phOther string // inv-u's and inv-o's placeholders of the key

	mu   sync.Mutex
	auth map[string]string // path → the Authorization that reached the upstream
}

func newUploadNative(t *testing.T) *uploadNative {
	t.Helper()
	is := is.New(t)
	root := newRoot(t)
	ca := egresstest.NewCA(t)
	f := &uploadNative{sink: &uploadSink{seen: map[string]uploadSeen{}}, auth: map[string]string{}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.auth[r.URL.Path] = r.Header.Get("Authorization")
		f.mu.Unlock()
		f.sink.serve(w, r)
	})
	port := func(l net.Listener) string { return strconv.Itoa(l.Addr().(*net.TCPAddr).Port) }
	upSrv := ca.TLSServer(t, h, "up.test")
	bodySrv := ca.TLSServer(t, h, "body.test")
	pu, pb := port(upSrv.Listener), port(bodySrv.Listener)
	f.up, f.body = "https://up.test:"+pu, "https://body.test:"+pb
	sd := startSecretd(t, root)
	f.eg = startEgressd(t, root, "-ca-file", ca.WriteFile(t, root), "-resolve", "up.test:"+pu+":127.0.0.1",
		"-resolve", "body.test:"+pb+":127.0.0.1", "-idle-timeout", nativeIdle.String(),
		"-max-request-body", "65536", "-buffer-budget", "131072")
	for _, c := range []struct{ name, dest, target, template string }{
		{"hdr", f.up, "header:Authorization", "Bearer {}"},
		{"bdy", f.body, "body:/auth/key", ""},
	} {
		spec := secretdapi.TargetSpec{Target: c.target, Template: c.template}
		_, err := sd.api.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: c.name, Value: []byte(canary),
			Destinations: []string{c.dest}, Targets: []secretdapi.TargetSpec{spec}}, "")
		is.NoErr(err)
	}
	stage := func(cred, inv string) *secretdapi.LeaseStageResponse {
		st, err := sd.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: cred, Invocation: inv})
		is.NoErr(err)
		return st
	}
	hdr, bdy, other := stage("hdr", "inv-u"), stage("bdy", "inv-u"), stage("hdr", "inv-o")
	f.ph, f.phOther = hdr.Placeholder, other.Placeholder
	_, err := f.eg.api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "inv-u", ProxyToken: strings.Repeat("u", 43),
		Handles: [][]byte{hdr.Handle, bdy.Handle}})
	is.NoErr(err)
	_, err = f.eg.api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "inv-o", ProxyToken: strings.Repeat("o", 43),
		Handles: [][]byte{other.Handle}})
	is.NoErr(err)
	return f
}

// post uploads body to url as inv-u and returns the answer's status and
// body, or the error.
func (f *uploadNative) post(t *testing.T, url string, body io.Reader) (int, string, error) {
	t.Helper()
	// The deadline bounds the upload: a body's outbound scan is slow
	// under -race on a loaded machine.
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rs, err := f.eg.api.RequestUpload(pctx, &egressdapi.RequestRequest{Invocation: "inv-u", Method: "POST", URL: url,
		Headers: []egressdapi.Header{{Name: "Content-Type", Value: "application/json"}}}, body)
	if err != nil {
		return 0, "", err
	}
	defer rs.Close()
	b, err := io.ReadAll(rs)
	return rs.Status, string(b), err
}

// completed reports whether the upstream got path's body complete,
// waiting a little for a request that reached it (one refused early
// never does).
func (f *uploadNative) completed(path string) bool {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		f.sink.mu.Lock()
		seen, ok := f.sink.seen[path]
		f.sink.mu.Unlock()
		if ok {
			return seen.complete
		}
	}
	return false
}

// pieces is a body read as the given pieces, one Read each: each is one
// data frame (at most StreamDataMax bytes).
func pieces(ps ...string) io.Reader {
	var rs []io.Reader
	for _, p := range ps {
		rs = append(rs, strings.NewReader(p))
	}
	return io.MultiReader(rs...)
}

// TestNativeUpload: egress.request_upload against a real egressd and
// secretd and TLS upstreams that read every body; every output is
// scanned for the canary at the end.
func TestNativeUpload(t *testing.T) {
	t.Parallel()
	f := newUploadNative(t)
	t.Run("group", func(t *testing.T) {
		t.Run("a clean upload arrives byte-exact", f.testClean)
		t.Run("a finding split across frames aborts", f.testFindings)
		t.Run("a body target is read whole", f.testBodyTarget)
		t.Run("bad frames", f.testBadFrames)
		t.Run("a body that stops coming", f.testIdle)
		t.Run("a client that leaves mid-body", f.testGone)
	})
	logs := f.eg.stderr.String() + f.eg.auditLog(t)
	checkNoCanary(t, logs)
	is.New(t).True(!strings.Contains(logs, f.phOther))
}

// testClean: a text body of 3 MiB (far past -max-request-body, which bounds
// only bodies read whole) reaches the upstream byte-exact and complete,
// with the key injected into its header.
func (f *uploadNative) testClean(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	const size = 3 << 20
	text := textFiller(size) // JSON lines, as an LLM request carries
	status, body, err := f.post(t, f.up+"/clean", strings.NewReader(text))
	is.NoErr(err)
	is.Equal(status, 200)
	is.Equal(body, "n="+strconv.Itoa(size))
	seen := f.sink.wait(t, "/clean")
	is.True(seen.complete)
	is.Equal(seen.n, int64(size))
	is.Equal(seen.sum, sha256.Sum256([]byte(text)))
	f.mu.Lock()
	is.Equal(f.auth["/clean"], "Bearer "+canary)
	f.mu.Unlock()

	status, body, err = f.post(t, f.up+"/empty", pieces()) // eof first: no body at all
	is.NoErr(err)
	is.Equal(status, 200)
	is.Equal(body, "n=0")
	is.True(waitAudit(t, f.eg, `"via":"egress.request_upload"`))
}

// testFindings: a held value (raw, percent-encoded) or a placeholder
// (inv-o's, or inv-u's own, which is substituted nowhere in a body)
// split across two data frames after 100 KiB of body fails the upstream
// request before the finding's first byte: the upstream saw an
// incomplete body without it, the caller gets the buffered scan's code,
// and the audit record says so.
func (f *uploadNative) testFindings(t *testing.T) {
	t.Parallel()
	filler := textFiller(100 << 10)
	for _, tc := range []struct {
		name, find, code string
	}{
		{"held value", canary, egressdapi.CodeSecretInRequest},
		{"held value percent-encoded", pctAll(canary), egressdapi.CodeSecretInRequest},
		{"foreign placeholder", f.phOther, egressdapi.CodePlaceholderMisuse},
		{"own placeholder", f.ph, egressdapi.CodePlaceholderMisuse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			path := "/find/" + strings.ReplaceAll(tc.name, " ", "-")
			cut := len(tc.find) / 2
			_, _, err := f.post(t, f.up+path, pieces(filler, tc.find[:cut], tc.find[cut:], "\n"+filler))
			is.Equal(wire.CodeOf(err), tc.code)
			seen := f.sink.wait(t, path)
			is.True(!seen.complete)               // aborted, never a body that looks whole
			is.True(seen.n <= int64(len(filler))) // nothing from the finding on
			is.True(!seen.leaked)                 // neither the key nor inv-u's placeholder
			is.True(waitAudit(t, f.eg, `"code":"`+tc.code+`"`))
		})
	}
}

// testBodyTarget: with the key placed in the JSON body, the body is read
// whole (its placeholder-free document gets the key at /auth/key), at
// most -max-request-body (egress.too_large past it), and bodies held at
// once share -buffer-budget (server.busy past it, accepted again once it
// is back).
func (f *uploadNative) testBodyTarget(t *testing.T) {
	is := is.New(t) // not parallel: it fills the budget
	doc := `{"auth":{},"text":"` + strings.Repeat("x", 40<<10) + `"}`
	status, _, err := f.post(t, f.body+"/json", pieces(doc[:30<<10], doc[30<<10:]))
	is.NoErr(err)
	is.Equal(status, 200)
	seen := f.sink.wait(t, "/json")
	is.True(seen.complete)
	is.True(seen.leaked) // the key, injected where it was staged

	_, _, err = f.post(t, f.body+"/too-large", pieces(strings.Repeat("x", 64<<10), "xx"))
	is.Equal(wire.CodeOf(err), egressdapi.CodeTooLarge)

	// Two bodies that have begun and wait hold the 128 KiB budget.
	type held struct {
		pw  *io.PipeWriter
		err chan error
	}
	var holders []held
	for i := range 2 {
		pr, pw := io.Pipe()
		h := held{pw: pw, err: make(chan error, 1)}
		go func() {
			_, _, err := f.post(t, f.body+"/held/"+strconv.Itoa(i), pr)
			h.err <- err
		}()
		pw.Write([]byte(`{"auth":{}`))
		holders = append(holders, h)
	}
	time.Sleep(500 * time.Millisecond) // egressd reads the first pieces and takes the budget
	_, _, err = f.post(t, f.body+"/busy", pieces(`{"auth":{}}`))
	is.Equal(wire.CodeOf(err), wire.CodeServerBusy)
	for _, h := range holders {
		h.pw.Write([]byte(`}`))
		h.pw.Close()
		is.NoErr(<-h.err)
	}
	status, _, err = f.post(t, f.body+"/after", pieces(`{"auth":{}}`))
	is.NoErr(err)
	is.Equal(status, 200) // the budget is back
}

// testBadFrames: a frame this op does not take where it comes is the
// answer request.invalid, and the upstream never gets a complete body; a
// body inside the request is refused before anything is sent.
func (f *uploadNative) testBadFrames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		frames []*wire.StreamFrame
	}{
		{"empty data frame", []*wire.StreamFrame{{T: wire.StreamData, B: []byte("ab")}, {T: wire.StreamData}}},
		{"resize frame", []*wire.StreamFrame{{T: wire.StreamData, B: []byte("ab")}, {T: wire.StreamResize, Rows: 1, Cols: 1}}},
		{"oversized data frame", []*wire.StreamFrame{{T: wire.StreamData, B: make([]byte, egressdapi.StreamDataMax+1)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			path := "/bad/" + strings.ReplaceAll(tc.name, " ", "-")
			p, err := f.eg.rpc.StartStream(ctx, egressdapi.OpEgressRequestUpload,
				&egressdapi.RequestRequest{Invocation: "inv-u", Method: "POST", URL: f.up + path})
			is.NoErr(err)
			defer p.Stream().Close()
			for _, fr := range tc.frames {
				is.NoErr(p.Stream().Send(fr))
			}
			err = p.Answer(ctx, nil)
			is.Equal(wire.CodeOf(err), wire.CodeRequestInvalid)
			if f.completed(path) {
				t.Error("the upstream got a complete body")
			}
		})
	}
	t.Run("body in the request", func(t *testing.T) {
		t.Parallel()
		_, err := f.eg.api.RequestUpload(ctx, &egressdapi.RequestRequest{Invocation: "inv-u", Method: "POST", URL: f.up + "/bad/inline",
			Body: []byte("x")}, pieces("y"))
		is.New(t).Equal(wire.CodeOf(err), wire.CodeRequestInvalid)
	})
}

// testIdle: a body that stops coming for -idle-timeout fails with
// egress.timeout, the upstream request aborted.
func (f *uploadNative) testIdle(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte(textFiller(1000)))
	begin := time.Now()
	_, _, err := f.post(t, f.up+"/idle", pr)
	is.Equal(wire.CodeOf(err), egressdapi.CodeTimeout)
	if took := time.Since(begin); took < nativeIdle || took > 10*nativeIdle {
		t.Errorf("timed out after %v (idle %v)", took, nativeIdle)
	}
	seen := f.sink.wait(t, "/idle")
	is.True(!seen.complete)
}

// testGone: a client whose body fails (it sends detach) or that closes
// its connection mid-body ends the upstream request, which never gets a
// complete body, audited as egress.client_closed.
func (f *uploadNative) testGone(t *testing.T) {
	t.Parallel()
	t.Run("body fails", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		pr, pw := io.Pipe()
		go func() {
			pw.Write([]byte(textFiller(1000)))
			time.Sleep(200 * time.Millisecond)
			pw.CloseWithError(io.ErrUnexpectedEOF)
		}()
		_, _, err := f.post(t, f.up+"/gone/fail", pr)
		is.Equal(wire.CodeOf(err), wire.CodeRequestInvalid) // the body's own failure
		is.True(errors.Is(err, io.ErrUnexpectedEOF))
		is.True(!f.sink.wait(t, "/gone/fail").complete)
	})
	t.Run("connection closed", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		p, err := f.eg.rpc.StartStream(ctx, egressdapi.OpEgressRequestUpload,
			&egressdapi.RequestRequest{Invocation: "inv-u", Method: "POST", URL: f.up + "/gone/closed"})
		is.NoErr(err)
		is.NoErr(p.Stream().Send(&wire.StreamFrame{T: wire.StreamData, B: bytes.Repeat([]byte("z"), 1000)}))
		time.Sleep(200 * time.Millisecond)
		p.Stream().Close()
		is.True(!f.sink.wait(t, "/gone/closed").complete)
		is.True(waitAudit(t, f.eg, `"code":"egress.client_closed"`))
	})
}
