//go:build linux

package main

import (
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/redact"
)

// gitPass is the git server's real password: a canary that must reach the
// git server only, and only inside its Basic credential.
const gitPass = "gitpw-" + canary

// gitBackend is git's smart-HTTP CGI program (package git).
const gitBackend = "/usr/lib/git-core/git-http-backend"

// basicSeen is one request a Basic test server received.
type basicSeen struct {
	path, auth    string // the raw Authorization field
	user, pass    string // as net/http decodes it
	ok            bool   // a Basic credential that decodes
	proxyAuthSeen bool   // a Proxy-Authorization field reached the server
}

// basicServer records what reaches it; requests without the real
// password get 401 with a Basic challenge, as a git host answers.
type basicServer struct {
	mu   sync.Mutex
	seen []basicSeen
	next http.Handler // serves /git/ once the password is right (else, and when nil: "ok user=<user>")
}

func (s *basicServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u, p, ok := r.BasicAuth()
	s.mu.Lock()
	s.seen = append(s.seen, basicSeen{path: r.URL.Path, auth: r.Header.Get("Authorization"), user: u, pass: p, ok: ok,
		proxyAuthSeen: r.Header.Get("Proxy-Authorization") != ""})
	s.mu.Unlock()
	if !ok || p != gitPass {
		w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
		return
	}
	if s.next == nil || !strings.HasPrefix(r.URL.Path, "/git/") {
		io.WriteString(w, "ok user="+u+"\n")
		return
	}
	s.next.ServeHTTP(w, r)
}

func (s *basicServer) all() []basicSeen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]basicSeen(nil), s.seen...)
}

// basicFixture is secretd and egressd in front of a git server with Basic
// authentication (git http-backend under net/http/cgi, over TLS from a
// test CA) at git.test, and an allowed HTTPS server at other.test. The
// agent inv-g holds two placeholders for the git password: ph, a plain
// basic:password lease, and phFixed, one whose credential fixes the
// user-id to x-access-token.
type basicFixture struct {
	eg               *egressd
	info             *egressdapi.InfoResponse
	git, other       *basicServer
	gitURL, otherURL string
	repos            string // the server's GIT_PROJECT_ROOT
	ph, phFixed, tok string
	outputs          []string // every client's output, for the canary scan
	mu               sync.Mutex
}

func newBasicFixture(t *testing.T) *basicFixture {
	t.Helper()
	is := is.New(t)
	for _, bin := range []string{"/usr/bin/git", gitBackend, "/usr/bin/curl", "/usr/bin/python3"} {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("needs %s (scripts/setup installs it): %v", bin, err)
		}
	}
	root := newRoot(t)
	ca := egresstest.NewCA(t)
	f := &basicFixture{git: &basicServer{}, other: &basicServer{}, repos: t.TempDir(), tok: strings.Repeat("g", 43)}
	seedRepo(t, f.repos)
	f.git.next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _, _ := r.BasicAuth()
		h := &cgi.Handler{Path: gitBackend, Root: "/git", Dir: f.repos,
			Env: []string{"GIT_PROJECT_ROOT=" + f.repos, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=" + u,
				"GIT_CONFIG_NOSYSTEM=1", "HOME=" + f.repos, "PATH=/usr/bin:/bin"}}
		h.ServeHTTP(w, r)
	})
	gs := ca.TLSServer(t, f.git, "git.test")
	oth := ca.TLSServer(t, f.other, "other.test")
	port := func(l net.Listener) string { return strconv.Itoa(l.Addr().(*net.TCPAddr).Port) }
	gp, op := port(gs.Listener), port(oth.Listener)
	f.gitURL, f.otherURL = "https://git.test:"+gp, "https://other.test:"+op
	sd := startSecretd(t, root)
	f.eg = startEgressd(t, root, "-ca-file", ca.WriteFile(t, root),
		"-resolve", "git.test:"+gp+":127.0.0.1", "-resolve", "other.test:"+op+":127.0.0.1")
	var err error
	f.info, err = f.eg.api.Info(ctx)
	is.NoErr(err)
	for name, spec := range map[string]secretdapi.TargetSpec{
		"git":       {Target: secretdapi.TargetBasicPassword},
		"git-fixed": {Target: secretdapi.TargetBasicPassword, BasicUser: "x-access-token"},
	} {
		_, err := sd.api.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: name, Value: []byte(gitPass),
			Destinations: []string{f.gitURL}, Targets: []secretdapi.TargetSpec{spec}}, "")
		is.NoErr(err)
	}
	var handles [][]byte
	stage := func(name string) string {
		st, err := sd.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: name, Invocation: "inv-g"})
		is.NoErr(err)
		handles = append(handles, st.Handle)
		return st.Placeholder
	}
	f.ph, f.phFixed = stage("git"), stage("git-fixed")
	_, err = f.eg.api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "inv-g", ProxyToken: f.tok, Handles: handles,
		Policy: egressdapi.Policy{Allow: []egressdapi.AllowRule{{Origin: f.otherURL}}}})
	is.NoErr(err)
	t.Cleanup(func() {
		// Every client's output, egressd's log and its audit: no form of the
		// password (raw, base64 at any alignment, hex, percent-encoded).
		probe := redact.NewScrubber()
		probe.Register([]byte(gitPass))
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, s := range append(f.outputs, f.eg.stderr.String(), f.eg.auditLog(t)) {
			if probe.Contains([]byte(s)) {
				t.Errorf("the git password leaked into output %d", i)
			}
		}
	})
	return f
}

// seedRepo makes dir/repo.git, a bare repository with one commit.
func seedRepo(t *testing.T, dir string) {
	t.Helper()
	work := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "--bare", filepath.Join(dir, "repo.git")},
		{"-C", work, "init", "-q", "-b", "main"},
		{"-C", work, "-c", "user.name=t", "-c", "user.email=t@test", "commit", "-q", "--allow-empty", "-m", "seed"},
		{"-C", work, "push", "-q", filepath.Join(dir, "repo.git"), "main"},
		{"-C", filepath.Join(dir, "repo.git"), "symbolic-ref", "HEAD", "refs/heads/main"},
	} {
		cmd := exec.Command("/usr/bin/git", args...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + work, "GIT_CONFIG_NOSYSTEM=1"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// env is the agent's environment (docs/design.md, "A credentialed agent
// run", step 5, with GIT_SSL_CAINFO) and a HOME of its own.
func (f *basicFixture) env(t *testing.T) []string {
	p := "http://inv-g:" + f.tok + "@" + f.info.ProxyAddress
	ca := f.info.CABundlePath
	return []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
		"http_proxy=" + p, "https_proxy=" + p, "HTTP_PROXY=" + p, "HTTPS_PROXY=" + p, "NO_PROXY=", "no_proxy=",
		"SSL_CERT_FILE=" + ca, "CURL_CA_BUNDLE=" + ca, "REQUESTS_CA_BUNDLE=" + ca, "GIT_SSL_CAINFO=" + ca}
}

// run runs a client as the agent in dir and returns its combined output
// and whether it exited 0.
func (f *basicFixture) run(t *testing.T, dir string, argv ...string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, f.env(t)
	out, err := cmd.CombinedOutput()
	f.mu.Lock()
	f.outputs = append(f.outputs, string(out))
	f.mu.Unlock()
	return string(out), err == nil
}

// userURL is base with user:pass as its userinfo.
func userURL(base, user, pass string) string {
	return strings.Replace(base, "https://", "https://"+user+":"+pass+"@", 1)
}

func basicValue(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// TestBasicGitCloneAndPush: real git clones and pushes over HTTPS through
// egressd with the placeholder as the Basic password in the remote URL.
// The git server sees the user git sent and the real password in a
// correct Basic encoding; with the credential that fixes the user-id it
// sees x-access-token, whatever git sent. The same clone from another
// (allowed) host fails: egressd refuses the placeholder there, and that
// host never sees a credential.
func TestBasicGitCloneAndPush(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newBasicFixture(t)
	work := t.TempDir()
	out, ok := f.run(t, work, "/usr/bin/git", "clone", "-q", userURL(f.gitURL, "alice", f.ph)+"/git/repo.git", "clone")
	is.True(ok) // git clone through egressd
	if !ok {
		t.Fatalf("git clone: %s", out)
	}
	clone := filepath.Join(work, "clone")
	is.NoErr(os.WriteFile(filepath.Join(clone, "f.txt"), []byte("pushed through egressd\n"), 0o644))
	for _, args := range [][]string{{"add", "f.txt"}, {"-c", "user.name=agent", "-c", "user.email=a@test", "commit", "-q", "-m", "agent"}} {
		out, ok := f.run(t, clone, append([]string{"/usr/bin/git"}, args...)...)
		if !ok {
			t.Fatalf("git %v: %s", args, out)
		}
	}
	out, ok = f.run(t, clone, "/usr/bin/git", "push", "-q", "origin", "main")
	if !ok {
		t.Fatalf("git push: %s", out)
	}
	// The server's repository has the agent's commit.
	log, err := exec.Command("/usr/bin/git", "--git-dir", filepath.Join(f.repos, "repo.git"), "log", "-1", "--format=%s", "main").Output()
	is.NoErr(err)
	is.Equal(strings.TrimSpace(string(log)), "agent")
	authed := 0
	for _, s := range f.git.all() {
		if s.auth == "" {
			continue // git's first try of each exchange, answered 401
		}
		authed++
		is.True(s.ok)
		is.Equal(s.user, "alice")
		is.Equal(s.pass, gitPass)
		is.Equal(s.auth, basicValue("alice", gitPass)) // canonical encoding
	}
	is.True(authed >= 3) // clone: refs and pack; push: refs and receive-pack

	// The credential that fixes the user-id: git sends alice, the server
	// sees x-access-token.
	n := len(f.git.all())
	out, ok = f.run(t, work, "/usr/bin/git", "clone", "-q", userURL(f.gitURL, "alice", f.phFixed)+"/git/repo.git", "fixed")
	if !ok {
		t.Fatalf("git clone (fixed user): %s", out)
	}
	for _, s := range f.git.all()[n:] {
		if s.auth != "" {
			is.Equal(s.user, "x-access-token")
			is.Equal(s.pass, gitPass)
		}
	}

	// Another host: git's authenticated retry is refused by egressd.
	out, ok = f.run(t, work, "/usr/bin/git", "clone", "-q", userURL(f.otherURL, "alice", f.ph)+"/git/repo.git", "other")
	is.True(!ok)
	is.True(strings.Contains(out, "403")) // git reports egressd's refusal
	for _, s := range f.other.all() {
		is.Equal(s.auth, "") // only git's unauthenticated first try arrived
	}
	is.True(waitAudit(t, f.eg, `"code":"egress.placeholder_misuse"`))
}

// TestBasicClients: curl -u and Python requests' auth=() with the
// placeholder as the password reach the destination with the real one;
// every misuse is refused with 403 egress.placeholder_misuse and never
// reaches a server: another destination, the placeholder as the user,
// a partial match, a Proxy-Authorization field carrying it inside the
// tunnel, a malformed (unpadded) encoding hiding it.
func TestBasicClients(t *testing.T) {
	t.Parallel()
	f := newBasicFixture(t)
	const py = `import sys, requests
url, user, pw = sys.argv[1:4]
hdrs = {"Proxy-Authorization": sys.argv[4]} if len(sys.argv) > 4 else {}
r = requests.get(url, auth=(user, pw), headers=hdrs, timeout=20)
print(r.status_code, r.headers.get("X-Hostkit-Error", ""), r.text.strip())`
	curl := func(args ...string) []string {
		return append([]string{"/usr/bin/curl", "-sS", "--max-time", "20", "-w", "\n%{http_code}\n"}, args...)
	}
	requests := func(args ...string) []string { return append([]string{"/usr/bin/python3", "-c", py}, args...) }
	who := f.gitURL + "/whoami"
	unpadded := strings.TrimRight(base64.StdEncoding.EncodeToString([]byte("bob:"+f.ph)), "=")
	for _, tc := range []struct {
		name string
		argv []string
		want string // in the output
		ok   bool   // reaches the server with the real password
	}{
		{"curl -u", curl("-u", "alice:"+f.ph, who), "ok user=alice", true},
		{"curl -u fixed user", curl("-u", "alice:"+f.phFixed, who), "ok user=x-access-token", true},
		{"requests auth", requests(who, "alice", f.ph), "200  ok user=alice", true},
		{"curl -u another destination", curl("-u", "alice:"+f.ph, f.otherURL+"/whoami"), "403", false},
		{"requests another destination", requests(f.otherURL+"/whoami", "alice", f.ph), "403 egress.placeholder_misuse", false},
		{"curl -u placeholder as user", curl("-u", f.ph+":pw", who), "403", false},
		{"requests placeholder as user", requests(who, f.ph, "pw"), "403 egress.placeholder_misuse", false},
		{"curl -u partial match", curl("-u", "alice:"+f.ph+"x", who), "403", false},
		{"requests partial match", requests(who, "alice", "x"+f.ph), "403 egress.placeholder_misuse", false},
		{"requests proxy-authorization in the tunnel", requests(who, "alice", f.ph, basicValue("alice", f.ph)), "403 egress.placeholder_misuse", false},
		{"curl malformed base64", curl("-H", "Authorization: Basic "+unpadded, who), "403", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			before := len(f.git.all()) + len(f.other.all())
			out, ok := f.run(t, t.TempDir(), tc.argv...)
			is.True(ok)
			is.True(strings.Contains(out, tc.want)) // the client's output
			if !tc.ok {
				is.Equal(len(f.git.all())+len(f.other.all()), before) // nothing reached a server
				return
			}
			seen := f.git.all()
			last := seen[len(seen)-1]
			is.Equal(last.pass, gitPass)
			is.True(!last.proxyAuthSeen)
		})
	}
	is.New(t).True(strings.Count(f.eg.auditLog(t), `"code":"egress.placeholder_misuse"`) >= 8)
}
