package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/cmd/hostctl/internal/demo"
)

// needCurl fails a demo test where the agent's curl is missing
// (scripts/setup installs it, so CI always runs these).
func needCurl(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		t.Fatal("needs /usr/bin/curl (scripts/setup installs it)")
	}
}

// leftovers returns the processes whose command line or environment
// mentions any of needles (other than this test process).
func leftovers(needles ...string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		for _, n := range needles {
			if n != "" && (bytes.Contains(cmd, []byte(n)) || bytes.Contains(env, []byte(n))) {
				out = append(out, e.Name()+" "+string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
				break
			}
		}
	}
	return out
}

// noTrace checks that a finished demo left neither its root nor a process.
func noTrace(t *testing.T, rep *demo.Report) {
	t.Helper()
	if rep == nil || rep.Root == "" {
		t.Fatal("the demo reported no root")
	}
	if _, err := os.Stat(rep.Root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the demo left its root %s behind (%v)", rep.Root, err)
	}
	if left := leftovers(rep.Root, rep.InstanceID); len(left) > 0 {
		t.Errorf("the demo left processes behind: %q", left)
	}
}

// TestDemoCommand runs `hostctl demo` as the README's first command does
// and checks its verdict and the key lines of its transcript; the demo
// itself asserts what the API server received, the refusal, the audit
// chains, the /proc scan after destroy and the token scan.
func TestDemoCommand(t *testing.T) {
	t.Parallel()
	needCurl(t)
	is := is.New(t)
	code, out, errOut := runCLI("demo", "--bin-dir", binDir)
	if code != ExitOK {
		t.Fatalf("hostctl demo exited %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"the agent saw only a placeholder (hkp_",
		"the real token (200)",
		"403, X-Hostkit-Error: egress.placeholder_misuse",
		"bytes sent upstream",
		"no process of the instance remains (/proc scanned",
		"audit verify: every hash chain holds",
		"egress.request/after", // the audit trail
		"appears nowhere",
		"cleaned up: daemons stopped",
		"demo: ok: every step held",
		"network isolated (supervisord's default)",
		// Node's fetch, with no proxy variable, through the transparent path.
		"node v2",
		"a synthetic address from the instance's own resolver",
		"fetch /v1/node: 200; the API received the real token",
		"refused, 403 egress.placeholder_misuse, as on the proxied path",
		"are transparent=tls: the bridge relayed them",
		"path=/v1/node status=200 bytes_out=", // the audit trail shows it
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the transcript lacks %q:\n%s", want, out)
		}
	}
	is.True(!strings.Contains(out, "FAIL"))
	is.Equal(errOut, "")
}

// TestDemoCanary drives a canary through the demo as the credential and
// scans the transcript for it in every encoding egressd scrubs.
func TestDemoCanary(t *testing.T) {
	t.Parallel()
	needCurl(t)
	canary := []byte("CANARY-hostctl-demo-7f3a91c2e5")
	var out bytes.Buffer
	rep, err := demo.Run(context.Background(), demo.Config{BinDir: binDir, Out: &out, Token: canary})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, form := range []string{string(canary), hex.EncodeToString(canary), base64.StdEncoding.EncodeToString(canary),
		base64.RawURLEncoding.EncodeToString(canary)} {
		if strings.Contains(out.String(), form) {
			t.Fatalf("the transcript holds the canary (%q)", form)
		}
	}
	if !strings.Contains(out.String(), "CANA… (30 chars)") {
		t.Errorf("the transcript should show the token's preview:\n%s", out.String())
	}
	noTrace(t, rep)
}

// cancelOn cancels a context once the transcript contains a marker (a
// Ctrl-C at a known step).
type cancelOn struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if strings.Contains(c.buf.String(), c.marker) {
		c.cancel()
	}
	return len(p), nil
}

// TestDemoInterrupted guards against a Ctrl-C that leaves daemons,
// holders or agents running, or the root behind: the demo is cancelled
// at several steps and must clean up every time.
func TestDemoInterrupted(t *testing.T) {
	t.Parallel()
	needCurl(t)
	for _, tt := range []struct{ name, marker string }{
		{"daemons up", "supervisord  pid"},
		{"agent running", "started: /bin/sh agent.sh"},
		{"audit", "9. the audit trail"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w := &cancelOn{marker: tt.marker, cancel: cancel}
			rep, err := demo.Run(ctx, demo.Config{BinDir: binDir, Out: w})
			is.True(errors.Is(err, demo.ErrFailed))
			is.True(strings.Contains(w.buf.String(), "FAIL  interrupted"))
			is.True(strings.Contains(w.buf.String(), "cleaned up: daemons stopped"))
			noTrace(t, rep)
		})
	}
}

// TestDemoMissingBinaries: a bin dir without the daemons is a clear
// failure, not a hang.
func TestDemoMissingBinaries(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	code, out, errOut := runCLI("demo", "--bin-dir", t.TempDir())
	is.Equal(code, ExitFailure)
	is.True(strings.Contains(out, "FAIL  no secretd, egressd, supervisord in"))
	is.True(strings.Contains(errOut, "hostctl: demo: failed"))
	code, _, _ = runCLI("demo", "extra")
	is.Equal(code, ExitUsage)
}

// TestDemoMissingNode: without the agent's Node.js the demo fails loudly,
// naming what to install, before it starts anything (TestDemoCommand runs
// it with the Node.js scripts/setup installs).
func TestDemoMissingNode(t *testing.T) {
	t.Parallel()
	needCurl(t)
	is := is.New(t)
	var out bytes.Buffer
	missing := filepath.Join(t.TempDir(), "node")
	rep, err := demo.Run(context.Background(), demo.Config{BinDir: binDir, Out: &out, Node: missing})
	is.True(errors.Is(err, demo.ErrFailed))
	is.True(strings.Contains(out.String(), "FAIL  the agent needs "+missing+" (Node.js 18 or later"))
	is.Equal(rep.Root, "") // nothing was started
}

// TestDemoAsNormalUser runs the built hostctl as an unprivileged uid (the
// README's first command on a developer machine): the agent runs as that
// user and the transcript says plainly that it is not isolated.
func TestDemoAsNormalUser(t *testing.T) {
	t.Parallel()
	needCurl(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to an unprivileged uid (TestDemoCommand covers this user)")
	}
	const uid = 1234 // not 65534: lib/sock refuses the overflow uid
	cmd := exec.Command(filepath.Join(binDir, "hostctl"), "demo")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/tmp"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hostctl demo as uid %d: %v\n%s", uid, err, out)
	}
	for _, want := range []string{"agents are NOT isolated here", "the agent ran as uid 1234: your own, NOT isolated", "demo: ok",
		"network host, asked for explicitly", "not run: on host network Node's fetch would go straight to the network"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("transcript lacks %q:\n%s", want, out)
		}
	}
}
