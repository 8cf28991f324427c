package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
)

// startSupervisord runs the real supervisord with the host runtime on and
// no egressd (-egress-required no: instances start without a bundle).
func startSupervisord(t *testing.T) string {
	t.Helper()
	root := shortRoot(t)
	os.Chmod(root, 0o755)
	args := []string{"-host-runtime-enabled", "yes", "-egress-required", "no"}
	if os.Geteuid() != 0 {
		// network isolated, the default, needs root: these tests are not
		// about the network.
		args = append(args, "-default-network", "host")
	}
	startDaemon(t, "supervisord", "supervisord", root, args...)
	t.Cleanup(func() {
		_, out, _ := runCLI("-root", root, "--json", "instance", "list")
		var l struct {
			Instances []instanceJSON `json:"instances"`
		}
		json.Unmarshal([]byte(out), &l)
		for _, in := range l.Instances {
			runCLI("-root", root, "instance", "destroy", in.InstanceID)
		}
	})
	return root
}

// provisionJSON provisions through the CLI and decodes the --json answer.
func provisionJSON(t *testing.T, root string, args ...string) instanceJSON {
	t.Helper()
	code, out, errOut := runCLI(append([]string{"-root", root, "instance", "provision", "--json", "--working-dir", "/tmp", "--stop-timeout", "1s"}, args...)...)
	if code != 0 {
		t.Fatalf("provision %v: exit %d: %s", args, code, errOut)
	}
	var in instanceJSON
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		t.Fatalf("provision output %q: %v", out, err)
	}
	// Instances outlive supervisord by design: destroy it before the
	// daemon's own cleanup (registered earlier, so run later) stops it.
	t.Cleanup(func() { runCLI("-root", root, "instance", "destroy", in.InstanceID) })
	return in
}

// waitCLIState polls `instance status --json` until the state is want.
func waitCLIState(t *testing.T, root, id, want string) instanceJSON {
	t.Helper()
	var in instanceJSON
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		code, out, _ := runCLI("-root", root, "instance", "status", id, "--json")
		if code == 0 && json.Unmarshal([]byte(out), &in) == nil && in.State == want {
			return in
		}
	}
	t.Fatalf("instance %s: want state %s, have %+v", id, want, in)
	return in
}

func TestInstanceCommands(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := startSupervisord(t)
	in := provisionJSON(t, root, "--name", "n1", "--env", "FOO=bar", "--", "sh", "-c", "echo hello-$FOO; echo second; exec sleep 1000")
	is.Equal(in.State, api.StateRunning)
	is.Equal(in.Name, "n1")
	is.Equal(in.Command, []string{"sh", "-c", "echo hello-$FOO; echo second; exec sleep 1000"})
	is.True(in.PID > 0)

	code, out, _ := runCLI("-root", root, "instance", "list")
	is.Equal(code, 0)
	is.True(strings.Contains(out, "ID") && strings.Contains(out, in.InstanceID) && strings.Contains(out, "running"))
	code, out, _ = runCLI("-root", root, "--json", "instance", "list")
	is.Equal(code, 0)
	var l struct {
		Instances []instanceJSON `json:"instances"`
	}
	is.NoErr(json.Unmarshal([]byte(out), &l))
	is.Equal(len(l.Instances), 1)
	is.Equal(l.Instances[0].InstanceID, in.InstanceID)

	code, out, errOut := runCLI("-root", root, "instance", "status", in.InstanceID)
	is.Equal(code, 0)
	is.True(strings.Contains(out, "state:        running"))
	if os.Geteuid() == 0 {
		is.True(strings.Contains(out, "network:      isolated")) // the default
		is.True(!strings.Contains(errOut, api.HostNetworkWarning))
	}

	// network host, asked for: status and list warn.
	host := provisionJSON(t, root, "--network", "host", "--", "sleep", "1000")
	is.Equal(host.Network, api.NetworkHost)
	_, _, errOut = runCLI("-root", root, "instance", "status", host.InstanceID)
	is.True(strings.Contains(errOut, "warning: "+api.HostNetworkWarning))
	_, _, errOut = runCLI("-root", root, "instance", "list")
	is.True(strings.Contains(errOut, "warning: "+host.InstanceID+": "+api.HostNetworkWarning))
	is.True(os.Geteuid() != 0 || !strings.Contains(errOut, in.InstanceID))
	code, _, _ = runCLI("-root", root, "instance", "destroy", host.InstanceID)
	is.Equal(code, 0)

	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, out, _ = runCLI("-root", root, "instance", "logs", in.InstanceID); strings.Contains(out, "second") {
			break
		}
	}
	is.Equal(out, "hello-bar\nsecond\n")
	code, out, _ = runCLI("-root", root, "instance", "logs", in.InstanceID, "-n", "1", "--json")
	is.Equal(code, 0)
	var logs struct {
		Data string `json:"data"`
	}
	is.NoErr(json.Unmarshal([]byte(out), &logs))
	is.Equal(logs.Data, "second\n")

	code, out, _ = runCLI("-root", root, "instance", "signal", in.InstanceID, "TERM", "--json")
	is.Equal(code, 0)
	is.True(strings.Contains(out, `"signal": "TERM"`))
	ex := waitCLIState(t, root, in.InstanceID, api.StateExited)
	is.Equal(ex.Exit.Signal, "SIGTERM")

	code, _, _ = runCLI("-root", root, "instance", "stop", in.InstanceID, "--json")
	is.Equal(code, 0)
	code, out, _ = runCLI("-root", root, "instance", "destroy", in.InstanceID, "--json")
	is.Equal(code, 0)
	is.True(strings.Contains(out, `"state": "destroyed"`))

	// Exit codes: not found 3, usage 2, other failures 1.
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"status of a destroyed instance", []string{"instance", "status", in.InstanceID}, ExitNotFound, "instance.not_found"},
		{"destroy twice", []string{"instance", "destroy", in.InstanceID}, ExitNotFound, "instance.not_found"},
		{"logs of nothing", []string{"instance", "logs", api.NewID()}, ExitNotFound, "instance.not_found"},
		{"attach to nothing", []string{"instance", "attach", api.NewID()}, ExitNotFound, "instance.not_found"},
		{"signal nothing", []string{"instance", "signal", api.NewID(), "TERM"}, ExitNotFound, "instance.not_found"},
		{"bad id", []string{"instance", "stop", "nope"}, ExitFailure, "instance.invalid_id"},
		{"no command", []string{"instance", "provision"}, ExitUsage, "needs a command"},
		{"bad credential flag", []string{"instance", "provision", "--credential", "x", "--", "true"}, ExitUsage, "NAME=ENV"},
		{"status without id", []string{"instance", "status"}, ExitUsage, "needs an instance ID"},
		{"credentials without egressd", []string{"instance", "provision", "--working-dir", "/tmp", "--credential", "gh=GH_TOKEN", "--", "true"},
			ExitFailure, "credentials.unavailable"},
		{"missing working dir", []string{"instance", "provision", "--working-dir", "/nonexistent", "--", "true"}, ExitNotFound, "working_dir.not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			code, _, errOut := runCLI(append([]string{"-root", root}, tc.args...)...)
			is.Equal(code, tc.code)
			is.True(strings.Contains(errOut, tc.msg))
		})
	}
}

func TestInstanceLogsFollow(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := startSupervisord(t)
	in := provisionJSON(t, root, "--", "sh", "-c", "echo first; sleep 0.5; echo last-line")
	code, out, _ := runCLI("-root", root, "instance", "logs", in.InstanceID, "-f")
	is.Equal(code, 0)
	is.True(strings.Contains(out, "first\n"))
	is.True(strings.HasSuffix(out, "last-line\n"))
	code, out, _ = runCLI("-root", root, "instance", "logs", in.InstanceID, "-f", "--json")
	is.Equal(code, 0)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	is.Equal(lines[len(lines)-1], `{"exit":0}`)
}

// TestInstanceAttach attaches through a pipe (no terminal): input reaches
// the agent's PTY, output comes back, and Ctrl-] detaches leaving the
// instance running.
func TestInstanceAttach(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := startSupervisord(t)
	in := provisionJSON(t, root, "--pty", "--rows", "30", "--cols", "100", "--", "sh", "-c", "stty size; exec cat")
	is.True(in.PTY)
	pr, pw := io.Pipe()
	out := &syncBuf{mu: make(chan struct{}, 1)}
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Run(context.Background(), []string{"-root", root, "instance", "attach", in.InstanceID}, pr, out, &errb)
	}()
	waitOutput(t, out, "30 100")
	pw.Write([]byte("ping-through-attach\n"))
	waitOutput(t, out, "ping-through-attach\r\nping-through-attach")
	pw.Write([]byte{detachKey})
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("attach: exit %d: %s", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("attach did not detach on Ctrl-]")
	}
	pw.Close()
	_, sout, _ := runCLI("-root", root, "instance", "status", in.InstanceID, "--json")
	is.True(strings.Contains(sout, `"state": "running"`))
}

type syncBuf struct {
	mu chan struct{}
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.b.String()
}

func waitOutput(t *testing.T, b *syncBuf, want string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if strings.Contains(b.String(), want) {
			return
		}
	}
	t.Fatalf("output lacks %q: %q", want, b.String())
}
