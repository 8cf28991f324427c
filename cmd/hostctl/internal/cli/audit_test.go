package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/daemon"
)

// fixtureStart is the fixed clock of the audit fixtures.
var fixtureStart = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// clock returns a Now that ticks one second per call from start.
func clock(start time.Time) func() time.Time {
	var mu sync.Mutex
	t := start
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Second)
		return t
	}
}

// openFixtureLog opens daemon name's audit log under root with a fixed
// clock and small files, so the fixture rotates.
func openFixtureLog(t *testing.T, root, name string, start time.Time) *audit.Log {
	t.Helper()
	l, err := audit.Open(audit.Options{
		Dir: filepath.Join(root, "log", name), Name: daemon.AuditFile, Daemon: name,
		MaxBytes: 700, Now: clock(start), Fsync: audit.FsyncNever,
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// writeAuditFixture writes deterministic secretd and egressd logs (the
// secretd one rotated over several files) under root.
func writeAuditFixture(t *testing.T, root string) {
	t.Helper()
	ctx := context.Background()
	s := openFixtureLog(t, root, daemon.NameSecretd, fixtureStart)
	e := openFixtureLog(t, root, daemon.NameEgressd, fixtureStart.Add(500*time.Millisecond))
	must := func(_ uint64, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Append(ctx, audit.Record{Actor: audit.Actor{UID: 0, PID: 100}, Op: "credential.put", Outcome: audit.OutcomeOK,
		Fields: map[string]any{"cred": "github", "destinations": []string{"https://api.github.com"}}}))
	must(s.Append(ctx, audit.Record{Actor: audit.Actor{UID: 0, PID: 200}, Op: "lease.stage", Outcome: audit.OutcomeOK, Corr: "run-1",
		Fields: map[string]any{"cred": "github", "invocation": "inv-1", "target": "header:Authorization", "handle_fp": "3f2a9c"}}))
	must(e.Append(ctx, audit.Record{Actor: audit.Actor{UID: 0, PID: 200}, Op: "bundle.register", Outcome: audit.OutcomeOK, Corr: "run-1",
		Fields: map[string]any{"invocation": "inv-1", "handles": 1}}))
	must(s.Append(ctx, audit.Record{Actor: audit.Actor{UID: 997, PID: 300}, Op: "lease.consume", Outcome: audit.OutcomeOK, Corr: "run-1",
		Fields: map[string]any{"invocation": "inv-1", "handle_fps": []string{"3f2a9c"}}}))
	p, err := e.Begin(ctx, audit.Record{Actor: audit.Actor{UID: 61184, PID: 400}, Op: "egress.request", Corr: "run-1",
		Fields: map[string]any{"invocation": "inv-1", "url": "https://api.github.com/user", "method": "GET"}})
	if err != nil {
		t.Fatal(err)
	}
	must(p.End(ctx, audit.OutcomeOK, "", map[string]any{"status": 200, "bytes_out": 0, "substituted": true}))
	must(e.Append(ctx, audit.Record{Actor: audit.Actor{UID: 61184, PID: 400}, Op: "egress.request", Outcome: audit.OutcomeRefused,
		Code: "egress.placeholder_misplaced", Fields: map[string]any{"invocation": "inv-1", "host": "other.demo.test"}}))
	must(s.Append(ctx, audit.Record{Actor: audit.Actor{UID: 65533, PID: 500}, Op: "health", Outcome: audit.OutcomeDenied, Code: "peer.denied"}))
	must(s.Append(ctx, audit.Record{Actor: audit.Actor{UID: 0, PID: 600}, Op: "lease.revoke", Outcome: audit.OutcomeOK,
		Fields: map[string]any{"invocation": "inv-1", "revoked": 0, "note": "after stop"}}))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "log", "secretd", "audit.jsonl*"))
	if len(files) < 3 {
		t.Fatalf("fixture: secretd's log has %d files, want rotation over 3 or more", len(files))
	}
}

// TestAuditGolden covers audit tail and verify, human and JSON, and their
// exit codes, against fixed logs.
func TestAuditGolden(t *testing.T) {
	t.Parallel()
	root := shortRoot(t)
	writeAuditFixture(t, root)
	broken := shortRoot(t)
	writeAuditFixture(t, broken)
	// Tamper with the oldest rotated secretd file: an edited record.
	files, _ := filepath.Glob(filepath.Join(broken, "log", "secretd", "audit.jsonl.*"))
	oldest := files[0]
	for _, f := range files {
		if f > oldest {
			oldest = f // audit.jsonl.N with the highest N (N < 10 here)
		}
	}
	b, err := os.ReadFile(oldest)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"github"`)) {
		t.Fatalf("fixture: %s does not hold the credential.put record", oldest)
	}
	if err := os.WriteFile(oldest, bytes.Replace(b, []byte(`"github"`), []byte(`"gitlab"`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		root     string
		args     []string
		want     int
		collapse bool
	}{
		{name: "audit_tail", root: root, args: []string{"audit", "tail", "-n", "6"}, want: ExitOK},
		{name: "audit_tail_daemon_json", root: root, args: []string{"audit", "tail", "--daemon", "secretd", "-n", "3", "--json"}, want: ExitOK},
		{name: "audit_tail_all", root: root, args: []string{"audit", "tail", "-n", "100"}, want: ExitOK},
		{name: "audit_tail_missing", root: root, args: []string{"audit", "tail", "--daemon", "helper"}, want: ExitNotFound},
		{name: "audit_tail_bad_daemon", root: root, args: []string{"audit", "tail", "--daemon", "sshd"}, want: ExitUsage},
		{name: "audit_verify", root: root, args: []string{"audit", "verify"}, want: ExitOK, collapse: true},
		{name: "audit_verify_json", root: root, args: []string{"audit", "verify", "--json"}, want: ExitOK},
		{name: "audit_verify_broken", root: broken, args: []string{"audit", "verify"}, want: ExitFailure, collapse: true},
		{name: "audit_verify_broken_json", root: broken, args: []string{"audit", "verify", "--daemon", "secretd", "--json"}, want: ExitFailure},
		{name: "audit_verify_missing", root: root, args: []string{"audit", "verify", "--daemon", "supervisord"}, want: ExitNotFound},
		{name: "audit_verify_extra_arg", root: root, args: []string{"audit", "verify", "secretd"}, want: ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			code, out, errOut := runCLI(append([]string{"-root", tt.root}, tt.args...)...)
			is.Equal(code, tt.want) // exit code
			golden(t, tt.name, normaliser{root: tt.root, collapse: tt.collapse}, code, out, errOut)
		})
	}
}

// TestAuditTailJSONSchema: the JSON form decodes into audit records with
// every field the human form shows.
func TestAuditTailJSONSchema(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := shortRoot(t)
	writeAuditFixture(t, root)
	code, out, _ := runCLI("-root", root, "audit", "tail", "--json", "-n", "100")
	is.Equal(code, ExitOK)
	var doc struct {
		Records []audit.Record `json:"records"`
	}
	is.NoErr(json.Unmarshal([]byte(out), &doc))
	is.Equal(len(doc.Records), 9) // 5 secretd + 4 egressd
	for i := 1; i < len(doc.Records); i++ {
		is.True(!doc.Records[i].Time.Before(doc.Records[i-1].Time)) // merged by time
	}
	is.Equal(doc.Records[0].Op, "credential.put")
	is.Equal(doc.Records[0].Daemon, "secretd")
}

// TestAuditFollow: tail -f prints what is there, then records appended
// later (across a rotation), and stops cleanly when its context ends.
func TestAuditFollow(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := shortRoot(t)
	writeAuditFixture(t, root)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"-root", root, "audit", "tail", "-f", "--daemon", "egressd", "-n", "1"}, bytes.NewReader(nil), &out, &errOut)
	}()
	waitFor(t, &out, "egress.placeholder_misplaced", 1)
	l := openFixtureLog(t, root, daemon.NameEgressd, fixtureStart.Add(time.Hour))
	for i := 0; i < 4; i++ { // 700-byte files: this rotates
		_, err := l.Append(context.Background(), audit.Record{Op: "bundle.drop", Outcome: audit.OutcomeOK, Fields: map[string]any{"invocation": "inv-1", "n": i}})
		is.NoErr(err)
	}
	is.NoErr(l.Close())
	waitFor(t, &out, "bundle.drop", 4)
	cancel()
	select {
	case code := <-done:
		is.Equal(code, ExitOK) // Ctrl-C is a clean stop
	case <-time.After(10 * time.Second):
		t.Fatal("audit tail -f did not stop when its context ended")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	is.Equal(len(lines), 5)                         // the last old record, then the 4 new ones
	is.True(!strings.Contains(out.String(), "#1 ")) // -n 1: older records are not repeated
	is.Equal(errOut.String(), "")
}

// TestAuditPermissionDenied: a user who cannot read the log directory gets
// exit code 4 and a hint, not a stack of I/O errors.
func TestAuditPermissionDenied(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	if os.Geteuid() != 0 {
		t.Fatal("this test runs hostctl as another user and needs root: run it through scripts/test as root")
	}
	root := shortRoot(t)
	writeAuditFixture(t, root)
	is.NoErr(os.Chmod(root, 0o755))
	is.NoErr(os.Chmod(filepath.Join(root, "log"), 0o755))
	for _, args := range [][]string{{"audit", "tail", "--daemon", "secretd"}, {"audit", "verify"}} {
		cmd := exec.Command(filepath.Join(binDir, "hostctl"), append([]string{"-root", root}, args...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65533, Gid: 65533}}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		is.Equal(exitStatus(err), ExitDenied) // exit 4
		golden(t, "audit_denied_"+args[1], normaliser{root: root}, exitStatus(err), "", stderr.String())
	}
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor waits until s appears n times in b.
func waitFor(t *testing.T, b *lockedBuffer, s string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(b.String(), s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("waited for %d × %q; output:\n%s", n, s, b.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
