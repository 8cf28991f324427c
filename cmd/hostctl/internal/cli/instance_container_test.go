package cli

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

// `hostctl instance provision --runtime container --image DIR --digest D`
// against the real supervisord (no -host-runtime-enabled: containers do
// not need it) and the real helper with real runc: the instance runs, its
// logs show the container's output, stop leaves it stopped, destroy
// removes it; --image without --digest is a usage error.
func TestInstanceProvisionContainer(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := shortRoot(t)
	startDaemon(t, "supervisord", "supervisord", root, "-egress-required", "no")
	// startDaemon allowlists this test binary and hostctl; supervisord too.
	startDaemon(t, "containerization-helper", "helper", root, "-idle-timeout", "0", "-allow-exe", filepath.Join(binDir, "supervisord"))
	layout, digest := buildImage(t, t.TempDir())
	var in instanceJSON
	t.Cleanup(func() { // before the helper is killed
		if in.InstanceID != "" {
			runCLI("-root", root, "instance", "destroy", in.InstanceID)
		}
	})
	cliJSON(t, &in, "-root", root, "instance", "provision", "--runtime", "container", "--image", layout, "--digest", digest,
		"--stop-timeout", "1s", "--", "/bin/sh", "-c", "echo hi-from-hostctl; exec sleep 60")
	is.Equal(in.State, "running")
	is.Equal(in.Runtime, "container")
	is.Equal(in.Network, "none")
	var out string
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if _, out, _ = runCLI("-root", root, "instance", "logs", in.InstanceID); strings.Contains(out, "hi-from-hostctl") {
			break
		}
	}
	is.True(strings.Contains(out, "hi-from-hostctl"))
	// The table shows a container instance's own fields, not a host
	// instance's agent uid and session.
	code, table, _ := runCLI("-root", root, "instance", "status", in.InstanceID)
	is.Equal(code, 0)
	is.True(strings.Contains(table, "runtime:      container\n"))
	is.True(strings.Contains(table, "image:        "+layout+"@"+digest+"\n"))
	is.True(strings.Contains(table, "container id: hk-"))
	is.True(!strings.Contains(table, "agent uid:") && !strings.Contains(table, "session:"))
	// A second supervisord on this root stops before it reconciles: the
	// live instance's records (its container.json fence among them) stay
	// as they are.
	stateDir := filepath.Join(root, "state", "supervisord")
	before := treeDigest(t, stateDir)
	out2, err := runBinary("supervisord", "-root", root)
	is.True(err != nil)
	is.True(strings.Contains(out2, "sock.already_running"))
	is.True(!strings.Contains(out2, "reconciled"))
	is.Equal(treeDigest(t, stateDir), before)
	var st instanceJSON
	cliJSON(t, &st, "-root", root, "instance", "stop", in.InstanceID)
	is.Equal(st.State, "stopped")
	code, _, errOut := runCLI("-root", root, "instance", "destroy", in.InstanceID)
	is.Equal(code, 0)
	is.Equal(errOut, "")
	code, _, _ = runCLI("-root", root, "instance", "status", in.InstanceID)
	is.Equal(code, 3) // instance.not_found

	code, _, _ = runCLI("-root", root, "instance", "provision", "--runtime", "container", "--image", layout, "--", "/bin/true")
	is.Equal(code, 2)
}
