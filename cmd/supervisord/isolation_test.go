//go:build linux

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
)

// TestAgentIsIsolated guards against an agent that can reach
// supervisord's socket, read another instance's agent.env, or inherit the
// service manager's NOTIFY_SOCKET/LISTEN_*/WATCHDOG_* (we run as root).
func TestAgentIsIsolated(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	is := is.New(t)
	e := &env{t: t}
	root, _ := os.MkdirTemp("/tmp", "hk")
	os.Chmod(root, 0o755)
	e.root, e.args = root, []string{"-root", root, "-host-runtime-enabled", "yes", "-egress-required", "no"}
	e.envs = []string{"NOTIFY_SOCKET=/tmp/nope", "LISTEN_FDS=3", "LISTEN_PID=1", "WATCHDOG_USEC=100"}
	e.boot()
	t.Cleanup(func() { e.destroyAll(); e.kill(); os.RemoveAll(root) })
	other := e.provision(api.ProvisionRequest{Command: []string{"sleep", "1000"}, Env: map[string]string{"SECRETISH": "other-instance-value"}})
	otherEnv := filepath.Join(root, "state/supervisord/instances", other.InstanceID, "agent.env")
	fi, err := os.Stat(otherEnv)
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o600))
	script := "id -u; env; cat " + otherEnv + "; echo cat-rc=$?; curl -s --unix-socket " + e.sock() + " http://x/; echo curl-rc=$?; echo done"
	in := e.provision(api.ProvisionRequest{Command: []string{"sh", "-c", script}, Env: map[string]string{"LISTEN_FDNAMES": "x", "WATCHDOG_PID": "1"}})
	is.True(in.Isolated)
	is.True(in.AgentUID >= 61184 && in.AgentUID <= 65519)
	is.True(in.AgentUID != uint32(0))
	e.waitState(in.InstanceID, api.StateExited, 10*time.Second)
	out := e.waitLog(in.InstanceID, "done", 5*time.Second)
	is.True(strings.HasPrefix(out, strings.TrimSpace(itoa(in.AgentUID))))
	is.True(!strings.Contains(out, "other-instance-value"))
	is.True(strings.Contains(out, "cat-rc=1"))
	is.True(strings.Contains(out, "curl-rc=7")) // could not connect
	for _, bad := range []string{"NOTIFY_SOCKET", "LISTEN_", "WATCHDOG_"} {
		is.True(!strings.Contains(out, bad))
	}
	is.True(strings.Contains(out, "HOSTKIT_WATCH_AGENT=host-"+in.InstanceID[:8]))
	// Instance directory and holder socket stay root-owned and private.
	dir := filepath.Join(root, "state/supervisord/instances", other.InstanceID)
	fi, err = os.Stat(dir)
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o700))
	h, err := e.c.Status(context.Background(), other.InstanceID)
	is.NoErr(err)
	is.True(!strings.Contains(h.Warning, api.NotIsolatedWarning)) // (it does warn that it has no egress bundle)
}

// TestLogStaysUnderItsCap guards against logs that grow without bound: 10 s
// of a tight echo loop stays under -log-max-mb × -log-files.
func TestLogStaysUnderItsCap(t *testing.T) {
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes", "-log-max-mb", "1", "-log-files", "2")
	in := e.provision(api.ProvisionRequest{Command: []string{"sh", "-c", "while :; do echo xxxxxxxxxxxxxxxx; done"}})
	dir := filepath.Join(e.root, "state/supervisord/instances", in.InstanceID)
	var peak int64
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		peak = max(peak, logBytes(dir))
	}
	t.Logf("peak log bytes %d", peak)
	ents, _ := os.ReadDir(dir)
	for _, x := range ents {
		fi, _ := x.Info()
		t.Log(x.Name(), fi.Size())
	}
	is.True(peak > 1<<20)          // it did rotate
	is.True(peak <= 2<<20+256<<10) // 2 files of 1 MiB, plus one write in flight
	is.NoErr(e.c.Destroy(context.Background(), in.InstanceID))
}

func logBytes(dir string) int64 {
	ents, _ := os.ReadDir(dir)
	var n int64
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "output") {
			if fi, err := e.Info(); err == nil {
				n += fi.Size()
			}
		}
	}
	return n
}

func itoa(u uint32) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtUint(u)) }

func fmtUint(u uint32) string {
	if u == 0 {
		return "0"
	}
	var b []byte
	for ; u > 0; u /= 10 {
		b = append([]byte{byte('0' + u%10)}, b...)
	}
	return string(b)
}
