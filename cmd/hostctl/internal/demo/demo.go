// Package demo is `hostctl demo`: the main flow of docs/design.md ("A
// credentialed agent run") run end to end on real programs under a temporary
// root. It starts secretd, egressd and supervisord as real processes, two
// local HTTPS servers, stores a credential, runs an agent (curl, and Python's
// requests when present) that holds only a placeholder, and prints a
// transcript in which every claim is an assertion: the API got the real
// token, the placeholder sent elsewhere was refused, a program that ignores
// the proxy variables (Node's built-in fetch) went through egressd all the
// same, the audit chains verify, nothing of the instance survives destroy,
// and the raw token appears nowhere in the transcript.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/daemon"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// DefaultTimeout bounds a whole run.
const DefaultTimeout = 50 * time.Second

// credentialName is the demo credential's name in secretd.
const credentialName = "demo-api"

// ErrFailed is returned when a step did not hold; the transcript has the
// FAIL lines.
var ErrFailed = errors.New("demo: a step failed")

// Config configures a run.
type Config struct {
	// BinDir holds secretd, egressd and supervisord; "" = the directory of
	// the running executable.
	BinDir string
	// Keep leaves the daemons running and the root in place, and prints
	// hostctl commands to explore them.
	Keep bool
	// Node is the Node.js the agent runs, 18 or later; "" = DefaultNode.
	// Missing, the run fails before it starts anything.
	Node string
	// Hostctl is the hostctl path printed in --keep hints ("" = hostctl).
	Hostctl string
	// Out receives the transcript (nil = discarded).
	Out io.Writer
	// Token is the credential's raw value; nil = 32 random bytes
	// (base64url). Tests pass a canary.
	Token []byte
	// Timeout bounds the whole run; 0 = DefaultTimeout.
	Timeout time.Duration
	// CallTimeout bounds each daemon call; 0 = 10 s.
	CallTimeout time.Duration
}

// Report is what a run leaves for its caller.
type Report struct {
	Root       string   // the temporary root (removed unless Keep)
	InstanceID string   // the agent's instance id
	Failures   []string // the FAIL lines, without the prefix
}

// runner is one run's state; only Run's goroutine touches it.
type runner struct {
	cfg      Config
	t        *transcript
	start    time.Time
	root     string
	layout   daemon.Layout
	binDir   string
	token    []byte
	python   bool
	node     bool // the agent runs the Node step (network isolated)
	api      *server
	other    *server
	daemons  []*daemonProc
	rpcs     []*rpc.Client
	sd       *secretdapi.Client
	eg       *egressdapi.Client
	sv       *api.Client
	proxy    string // egressd's proxy address
	isolated bool   // supervisord runs agents under their own uid
	netIso   bool   // supervisord can run agents in network isolated (health network_isolation)
	id       string // the instance id ("" before provision)
	live     bool   // the instance may exist (not destroyed yet)
	agent    agentView
}

// Run runs the demo and prints its transcript to cfg.Out. It returns
// ErrFailed when any assertion failed (or the context ended: Ctrl-C), after
// cleaning up everything it started unless cfg.Keep.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Second
	}
	if cfg.Node == "" {
		cfg.Node = DefaultNode
	}
	if cfg.Hostctl == "" {
		cfg.Hostctl = "hostctl"
	}
	r := &runner{cfg: cfg, t: &transcript{w: cfg.Out}, start: time.Now(), id: api.NewID()}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	err := r.steps(ctx)
	switch {
	case err != nil && ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		r.t.fail("the demo took longer than %s (%v)", cfg.Timeout, err)
	case err != nil && ctx.Err() != nil:
		r.t.fail("interrupted: cleaning up")
	case err != nil:
		r.t.fail("%v", err)
	}
	if err != nil {
		r.showDaemonLogs()
	}
	r.cleanup()
	rep := &Report{Root: r.root, InstanceID: r.id, Failures: r.t.failures}
	elapsed := time.Since(r.start).Round(100 * time.Millisecond)
	if len(r.t.failures) > 0 {
		r.t.printf("\ndemo: FAIL: %d assertion(s) did not hold (%s)\n", len(r.t.failures), elapsed)
		return rep, ErrFailed
	}
	r.t.printf("\ndemo: ok: every step held (%s)\n", elapsed)
	return rep, nil
}

// steps runs the demo's steps in order; an error stops the run (a step
// that could not be done), while failed assertions only mark it failed.
func (r *runner) steps(ctx context.Context) error {
	r.t.printf("hostctl demo: an agent uses a credential it never sees\n")
	if err := supported(); err != nil {
		return err
	}
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		return errors.New("the agent needs /usr/bin/curl (apt-get install curl; scripts/setup installs it)")
	}
	if err := nodeUsable(r.cfg.Node); err != nil {
		return err
	}
	var err error
	if r.binDir, err = findBinaries(r.cfg.BinDir); err != nil {
		return err
	}
	if r.token = r.cfg.Token; r.token == nil {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		r.token = []byte("dk_" + base64.RawURLEncoding.EncodeToString(b))
	}
	if err := r.makeRoot(); err != nil {
		return err
	}
	for _, s := range []func(context.Context) error{r.stepServers, r.stepDaemons, r.stepCredential, r.stepAgent,
		r.stepStream, r.stepNode, r.stepServersSaw, r.stepStopDestroy, r.stepAudit, r.stepToken} {
		if err := s(ctx); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// makeRoot creates the temporary root, short and under /tmp (socket paths
// are short), 0755 so an agent uid can read the public CA bundle and the
// agent's files.
func (r *runner) makeRoot() error {
	root, err := os.MkdirTemp("/tmp", "hkdemo")
	if err != nil {
		return err
	}
	r.root = root
	if err := os.Chmod(root, 0o755); err != nil {
		return err
	}
	if r.layout, err = daemon.RootLayout(root); err != nil {
		return err
	}
	what := "removed at the end"
	if r.cfg.Keep {
		what = "kept: --keep"
	}
	r.t.printf("  temporary root %s (%s)\n", root, what)
	return os.Mkdir(r.agentDir(), 0o755)
}

func (r *runner) agentDir() string { return r.root + "/agent" }

// client returns an rpc client for daemon name, closed at cleanup.
func (r *runner) client(name string) *rpc.Client {
	c := rpc.NewClient(r.layout.Socket(name), r.cfg.CallTimeout)
	r.rpcs = append(r.rpcs, c)
	return c
}

// showDaemonLogs prints the last lines of each daemon's stderr after a
// step could not be done (they never hold a raw value; the token scan
// still runs over the transcript).
func (r *runner) showDaemonLogs() {
	for _, d := range r.daemons {
		lines := d.stderrTail(5)
		if len(lines) == 0 {
			continue
		}
		r.t.note("last lines of %s's log:", d.name)
		for _, l := range lines {
			if containsSecret([]byte(l), r.token) {
				l = "[a line holding the raw token: not shown]"
			}
			r.t.note("  %s", l)
		}
	}
}

// cleanup destroys the instance, stops the servers and (unless Keep) the
// daemons, kills any process of the instance that survived, and removes
// the root. It runs on success, failure and cancellation alike.
func (r *runner) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if r.live && r.sv != nil {
		if err := r.sv.Destroy(ctx, r.id); err != nil && !wire.HasCode(err, api.CodeInstanceNotFound) {
			r.t.fail("cleanup: destroy instance %s: %v", r.id, err)
		}
	}
	for _, p := range processesWith(r.id) {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	if r.api != nil {
		r.api.close()
	}
	if r.other != nil {
		r.other.close()
	}
	for _, c := range r.rpcs {
		c.Close()
	}
	if r.root == "" {
		return
	}
	if r.cfg.Keep {
		r.keepHints()
		return
	}
	for i := len(r.daemons) - 1; i >= 0; i-- {
		r.daemons[i].stop(5 * time.Second)
	}
	if canScanProcs {
		for _, p := range processesWith(r.root) {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
	if err := os.RemoveAll(r.root); err != nil {
		r.t.fail("cleanup: remove %s: %v", r.root, err)
		return
	}
	r.t.printf("\ncleaned up: daemons stopped, %s removed\n", r.root)
}

// keepHints prints how to explore the daemons left running.
func (r *runner) keepHints() {
	h := r.cfg.Hostctl + " -root " + r.root
	var pids []string
	for _, d := range r.daemons {
		if !d.exited() {
			pids = append(pids, fmt.Sprint(d.cmd.Process.Pid))
		}
	}
	r.t.printf("\n--keep: the daemons are still running under %s (the demo's local servers are gone). Explore:\n", r.root)
	for _, c := range []string{"doctor", "secret list", "lease list", "instance list", "audit tail -n 40", "audit verify"} {
		r.t.printf("  %s %s\n", h, c)
	}
	r.t.printf("and clean up with:\n  kill %s; rm -rf %s\n", strings.Join(pids, " "), r.root)
}
