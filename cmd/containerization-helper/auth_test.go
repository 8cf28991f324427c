package main

import (
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	"golang.org/x/sys/unix"
	"hostkit.dev/lib/wire"
)

// peer is a client process: a copy of the test binary that calls health
// on the helper's socket (clientMain), started before it connects so the
// test can change its binary on disk first.
type peer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *syncBuffer
}

func startPeer(t *testing.T, exe, sockPath string, cred *syscall.Credential, env ...string) *peer {
	t.Helper()
	var p *peer
	// A fork elsewhere in this test binary (the tests run in parallel) may
	// still hold the copy's write descriptor, until that child execs:
	// ETXTBSY (golang.org/issue/22315). It passes; try again.
	for attempt := 0; ; attempt++ {
		p = &peer{out: &syncBuffer{}}
		p.cmd = exec.Command(exe)
		p.cmd.Env = append([]string{envClient + "=" + sockPath, envWait + "=1"}, env...)
		p.cmd.Stdout = p.out
		p.cmd.Stderr = p.out
		if cred != nil {
			// (Not 65534: that is the overflow uid, which lib/sock refuses
			// before any role check.) Another uid that may still reach the 0700 socket directory: only
			// the helper's role check stands between it and the ops.
			p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, AmbientCaps: []uintptr{unix.CAP_DAC_OVERRIDE}}
		}
		var err error
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		err = p.cmd.Start()
		if err == nil {
			break
		}
		p.stdin.Close()
		if !errors.Is(err, syscall.ETXTBSY) || attempt == 100 {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	// The exec is done once /proc/<pid>/exe names the copy.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if l, _ := os.Readlink("/proc/" + itoa(p.cmd.Process.Pid) + "/exe"); l == exe {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return p
}

// call lets the peer connect and returns what it printed: "ok" or the
// error code.
func (p *peer) call(t *testing.T) string {
	t.Helper()
	io.WriteString(p.stdin, "go\n")
	p.stdin.Close()
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("peer: %v\n%s", err, p.out.String())
	}
	return strings.TrimSpace(p.out.String())
}

// TestPeerAuthentication runs real client processes against the real
// helper, whose allowlist holds only the test binary's hash: a copy of it
// is allowed; a peer with another uid, a binary not on the allowlist, a
// binary replaced on disk after the peer started, and a deleted binary
// are refused with peer.denied and an audit record.
func TestPeerAuthentication(t *testing.T) {
	t.Parallel()
	h := startHelper(t, "", newRoot(t), "-allow-exe", selfExe(t))
	dir, err := os.MkdirTemp("/tmp", "hkpeer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // the other uid must reach its binary
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		run    func(t *testing.T, exe string) *peer
		want   string
		reason string // in the helper's audit record; "" = the role check
	}{
		{"allowlisted copy", func(t *testing.T, exe string) *peer {
			copyFile(t, selfExe(t), exe, nil)
			return startPeer(t, exe, h.sock, nil)
		}, "ok", ""},
		{"another uid", func(t *testing.T, exe string) *peer {
			copyFile(t, selfExe(t), exe, nil)
			return startPeer(t, exe, h.sock, &syscall.Credential{Uid: 4242, Gid: 4242})
		}, wire.CodePeerDenied, ""},
		{"binary not on the allowlist", func(t *testing.T, exe string) *peer {
			copyFile(t, selfExe(t), exe, []byte("another build"))
			return startPeer(t, exe, h.sock, nil)
		}, wire.CodePeerDenied, "exe_not_allowed"},
		{"binary replaced after start", func(t *testing.T, exe string) *peer {
			copyFile(t, selfExe(t), exe, nil)
			p := startPeer(t, exe, h.sock, nil)
			copyFile(t, selfExe(t), exe, nil) // identical bytes, but a new file at the path
			return p
		}, wire.CodePeerDenied, "exe_replaced"},
		{"binary deleted after start", func(t *testing.T, exe string) *peer {
			copyFile(t, selfExe(t), exe, nil)
			p := startPeer(t, exe, h.sock, nil)
			if err := os.Remove(exe); err != nil {
				t.Fatal(err)
			}
			return p
		}, wire.CodePeerDenied, "exe_deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			exe := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			p := tc.run(t, exe)
			pid := p.cmd.Process.Pid
			if got := p.call(t); got != tc.want {
				t.Fatalf("peer answered %s, want %s\n%s", got, tc.want, h.stderr.String())
			}
			if tc.want == "ok" {
				return
			}
			audit := h.auditText(t)
			var rec string
			for _, line := range strings.Split(audit, "\n") {
				if strings.Contains(line, `"pid":`+itoa(pid)+`}`) || strings.Contains(line, `"pid":`+itoa(pid)+`,`) {
					if tc.reason == "" || strings.Contains(line, `"reason":"`+tc.reason+`"`) {
						rec = line
					}
				}
			}
			is.True(rec != "") // a denial record for this peer
			is.True(strings.Contains(rec, `"outcome":"denied"`))
			is.True(strings.Contains(rec, `"code":"peer.denied"`))
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestPeerDeniedCarriesID: a raw request frame from a peer the helper
// refuses — a binary not on the allowlist (refused when it connects), or
// another uid (refused by the role check) — is answered peer.denied
// under the request's own id, as every error is (docs/protocol.md); the
// allowlisted copy gets its answer under the same id.
func TestPeerDeniedCarriesID(t *testing.T) {
	t.Parallel()
	h := startHelper(t, "", newRoot(t), "-allow-exe", selfExe(t))
	dir, err := os.MkdirTemp("/tmp", "hkpid")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	id := hex.EncodeToString(rawID)
	for _, tc := range []struct {
		name  string
		extra []byte // appended to the copy: another binary
		cred  *syscall.Credential
		want  string
	}{
		{"allowlisted copy", nil, nil, "ok " + id},
		{"binary not on the allowlist", []byte("another build"), nil, wire.CodePeerDenied + " " + id},
		{"another uid", nil, &syscall.Credential{Uid: 4242, Gid: 4242}, wire.CodePeerDenied + " " + id},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exe := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			copyFile(t, selfExe(t), exe, tc.extra)
			p := startPeer(t, exe, h.sock, tc.cred, envRaw+"=1")
			if got := p.call(t); got != tc.want {
				t.Fatalf("peer answered %q, want %q\n%s", got, tc.want, h.stderr.String())
			}
		})
	}
}
