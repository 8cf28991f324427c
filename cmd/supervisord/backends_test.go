//go:build linux

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
)

// processesMentioning lists live processes whose command line holds s.
func processesMentioning(s string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), s) {
			var pid int
			fmt.Sscan(e.Name(), &pid)
			if pid != os.Getpid() && alive(pid) {
				out = append(out, pid)
			}
		}
	}
	return out
}

// TestTmuxBackend guards the tmux session backend: the agent runs in a
// tmux server on the instance's socket, under its own uid, its output
// reaches the log and the pane, and stop leaves neither the server nor
// the agent behind; destroy removes everything.
func TestTmuxBackend(t *testing.T) {
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes")
	in := e.provision(api.ProvisionRequest{SessionBackend: api.BackendTmux,
		Command: []string{"sh", "-c", "echo tmux-first-line; echo tmux-marker-$((6*7)); sleep 1000"}})
	is.Equal(in.SessionBackend, api.BackendTmux)
	is.Equal(in.Session, api.SessionManaged)
	sock := filepath.Join(e.root, "run", "supervisord", "h", api.Hex16(in.InstanceID)+".tmux")
	is.Equal(in.TmuxSocket, sock)
	log := e.waitLog(in.InstanceID, "tmux-marker-42", 10*time.Second)
	is.True(strings.Contains(log, "tmux-first-line")) // nothing before pipe-pane is lost
	out, err := exec.Command("/usr/bin/tmux", "-S", sock, "capture-pane", "-p", "-t", "agent:").CombinedOutput()
	is.NoErr(err)
	is.True(strings.Contains(string(out), "tmux-marker-42"))
	st, err := e.c.Status(context.Background(), in.InstanceID)
	is.NoErr(err)
	is.Equal(st.State, api.StateRunning)
	is.True(st.PID > 0)
	if os.Geteuid() == 0 { // the pane's process is the agent, under its uid
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", st.PID))
		is.NoErr(err)
		is.True(strings.Contains(string(b), fmt.Sprintf("Uid:\t%d\t", st.AgentUID)))
	}
	is.True(len(processesMentioning(sock)) >= 1) // the server
	is.True(len(treeOf(in.InstanceID)) >= 1)

	st, err = e.c.Stop(context.Background(), in.InstanceID)
	is.NoErr(err)
	is.Equal(st.State, api.StateStopped)
	is.Equal(st.Exit.Signal, "SIGTERM")
	is.Equal(len(processesMentioning(sock)), 0)
	is.Equal(len(treeOf(in.InstanceID)), 0)
	_, err = os.Stat(sock)
	is.True(os.IsNotExist(err))
	is.NoErr(e.c.Destroy(context.Background(), in.InstanceID))
	_, err = os.Stat(filepath.Join(e.root, "state", "supervisord", "instances", in.InstanceID))
	is.True(os.IsNotExist(err))
}

// TestTmuxExitStatusAndDestroyWhileRunning: the pane's exit status is the
// instance's; destroy of a running tmux instance leaves nothing.
func TestTmuxExitStatusAndDestroyWhileRunning(t *testing.T) {
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes")
	in := e.provision(api.ProvisionRequest{SessionBackend: api.BackendTmux, Command: []string{"sh", "-c", "echo bye; exit 7"}})
	st := e.waitState(in.InstanceID, api.StateExited, 10*time.Second)
	is.Equal(st.Exit.Code, int64(7))
	e.waitLog(in.InstanceID, "bye", 2*time.Second)
	is.Equal(len(processesMentioning(in.TmuxSocket)), 0)

	in = e.provision(api.ProvisionRequest{SessionBackend: api.BackendTmux, Command: []string{"sh", "-c", "sleep 1000 & exec sleep 1001"}})
	e.waitLog(in.InstanceID, "", time.Second)
	for end := time.Now().Add(5 * time.Second); len(treeOf(in.InstanceID)) < 2 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	is.Equal(len(treeOf(in.InstanceID)), 2)
	is.NoErr(e.c.Destroy(context.Background(), in.InstanceID))
	is.Equal(len(treeOf(in.InstanceID)), 0)
	is.Equal(len(processesMentioning(in.TmuxSocket)), 0)
}

// TestRestartOnFailureCountsAndStops: a failing agent is restarted with
// backoff up to max_restarts; its last exit is kept.
func TestRestartOnFailureCountsAndStops(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes")
	in := e.provision(api.ProvisionRequest{Restart: api.RestartOnFailure, MaxRestarts: 2, Command: []string{"sh", "-c", "echo run-$$; exit 3"}})
	is.Equal(in.Restart, api.RestartOnFailure)
	e.waitState(in.InstanceID, api.StateRestarting, 3*time.Second)
	st := e.waitState(in.InstanceID, api.StateExited, 10*time.Second) // 1 s + 2 s of backoff
	is.Equal(st.Exit.Code, int64(3))
	is.Equal(st.Restarts, int64(2))
	l, err := e.c.Logs(context.Background(), &api.LogsRequest{InstanceID: in.InstanceID})
	is.NoErr(err)
	is.Equal(strings.Count(string(l.Data), "run-"), 3)
}

// TestRestartNotOnSuccess: on-failure never restarts a successful exit.
func TestRestartNotOnSuccess(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes")
	in := e.provision(api.ProvisionRequest{Restart: api.RestartOnFailure, Command: []string{"sh", "-c", "echo once; exit 0"}})
	e.waitState(in.InstanceID, api.StateExited, 5*time.Second)
	time.Sleep(1500 * time.Millisecond)
	st, err := e.c.Status(context.Background(), in.InstanceID)
	is.NoErr(err)
	is.Equal(st.State, api.StateExited)
	is.Equal(st.Restarts, int64(0))
	l, _ := e.c.Logs(context.Background(), &api.LogsRequest{InstanceID: in.InstanceID})
	is.Equal(strings.Count(string(l.Data), "once"), 1)
	// never is the default
	in = e.provision(api.ProvisionRequest{Command: []string{"sh", "-c", "exit 3"}})
	is.Equal(in.Restart, api.RestartNever)
	st = e.waitState(in.InstanceID, api.StateExited, 5*time.Second)
	is.Equal(st.Restarts, int64(0))
}

// TestStopPreventsRestart: a stop during the backoff ends the instance
// for good.
func TestStopPreventsRestart(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes")
	in := e.provision(api.ProvisionRequest{Restart: api.RestartOnFailure, MaxRestarts: 5, Command: []string{"sh", "-c", "exit 1"}})
	e.waitState(in.InstanceID, api.StateRestarting, 3*time.Second)
	st, err := e.c.Stop(context.Background(), in.InstanceID)
	is.NoErr(err)
	is.Equal(st.State, api.StateStopped)
	time.Sleep(2500 * time.Millisecond)
	st, err = e.c.Status(context.Background(), in.InstanceID)
	is.NoErr(err)
	is.Equal(st.State, api.StateStopped)
	is.Equal(st.Restarts, int64(1))
	is.Equal(len(treeOf(in.InstanceID)), 0)
}

// TestRestartWithTmux: each run gets a fresh tmux server.
func TestRestartWithTmux(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes")
	in := e.provision(api.ProvisionRequest{SessionBackend: api.BackendTmux, Restart: api.RestartOnFailure, MaxRestarts: 1,
		Command: []string{"sh", "-c", "echo tmux-run; exit 4"}})
	st := e.waitState(in.InstanceID, api.StateExited, 10*time.Second)
	is.Equal(st.Exit.Code, int64(4))
	is.Equal(st.Restarts, int64(1))
	l, _ := e.c.Logs(context.Background(), &api.LogsRequest{InstanceID: in.InstanceID})
	is.Equal(strings.Count(string(l.Data), "tmux-run"), 2)
	is.Equal(len(processesMentioning(in.TmuxSocket)), 0)
}

// TestNetworkIsolated: an isolated agent has only loopback, cannot reach
// a loopback server outside its namespace, and reaches egressd's proxy
// socket (a fake here) through the holder's bridge on 127.0.0.1:4750. Host
// mode, asked for, reaches the outside server.
func TestNetworkIsolated(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes")
	outside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "outside-reached") }))
	defer outside.Close()
	proxyDir := filepath.Join(e.root, "run", "egressd")
	is.NoErr(os.MkdirAll(proxyDir, 0o700))
	ul, err := net.Listen("unix", filepath.Join(proxyDir, "proxy.sock"))
	is.NoErr(err)
	fake := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "egress-proxy-reached") })}
	go fake.Serve(ul)
	defer fake.Close()

	script := fmt.Sprintf(`echo "ifaces=$(grep -c : /proc/net/dev)"; curl -sS --max-time 3 %s/; echo " direct-rc=$?"; curl -sS --max-time 3 http://%s/; echo " bridge-rc=$?"`,
		outside.URL, api.IsolatedProxyAddress)
	in := e.provision(api.ProvisionRequest{Network: &api.Network{Mode: api.NetworkIsolated}, Command: []string{"sh", "-c", script}})
	is.Equal(in.Network, api.NetworkIsolated)
	e.waitState(in.InstanceID, api.StateExited, 15*time.Second)
	log := e.waitLog(in.InstanceID, "bridge-rc=", time.Second)
	t.Logf("isolated agent: %q", log)
	is.True(strings.Contains(log, "ifaces=1"))         // loopback only
	is.True(!strings.Contains(log, "outside-reached")) // nothing outside the namespace
	is.True(!strings.Contains(log, "direct-rc=0"))
	is.True(strings.Contains(log, "egress-proxy-reached bridge-rc=0")) // egressd, through the bridge

	in = e.provision(api.ProvisionRequest{Network: &api.Network{Mode: api.NetworkHost}, Command: []string{"sh", "-c", script}})
	is.Equal(in.Network, api.NetworkHost)
	e.waitState(in.InstanceID, api.StateExited, 15*time.Second)
	log = e.waitLog(in.InstanceID, "bridge-rc=", time.Second)
	is.True(strings.Contains(log, "outside-reached direct-rc=0"))
}

// TestAgentInheritsNoIgnoredSignal guards against an agent that starts
// with SIGPIPE ignored (the daemons ignore it) or with tmux's ignored
// job-control signals: `yes | head` would then spin on EPIPE.
func TestAgentInheritsNoIgnoredSignal(t *testing.T) {
	t.Parallel()
	e := start(t, "-host-runtime-enabled", "yes")
	for _, b := range []string{api.BackendNative, api.BackendTmux} {
		t.Run(b, func(t *testing.T) {
			is := is.New(t)
			in := e.provision(api.ProvisionRequest{SessionBackend: b, Command: []string{"grep", "-E", "SigIgn|SigBlk", "/proc/self/status"}})
			e.waitState(in.InstanceID, api.StateExited, 10*time.Second)
			log := e.waitLog(in.InstanceID, "SigBlk", 2*time.Second)
			is.True(strings.Contains(log, "SigIgn:\t0000000000000000"))
			is.True(strings.Contains(log, "SigBlk:\t0000000000000000"))
		})
	}
}
