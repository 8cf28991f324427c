//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/healthapi"
	api "hostkit.dev/lib/api/supervisordapi"

	"hostkit.dev/cmd/supervisord/internal/netns"
)

// nsScript prints what an agent sees of its namespaces: its network and
// mount namespace ids, its interfaces, its /etc/resolv.conf and
// /etc/hosts, and the propagation of its /etc/resolv.conf mount.
const nsScript = `echo "netns=$(readlink /proc/self/ns/net) mntns=$(readlink /proc/self/ns/mnt) ifaces=$(grep -c : /proc/net/dev)"
echo "resolv<<"; cat /etc/resolv.conf; echo ">>"
echo "hosts<<"; cat /etc/hosts; echo ">>"
echo "mount<<"; grep ' /etc/resolv.conf ' /proc/self/mountinfo; echo ">>"
echo "write-rc=$(echo x 2>/dev/null >>/etc/resolv.conf; echo $?)"
echo run-done
exit 3`

// section returns what the agent printed between "name<<" and ">>".
func section(log, name string) string {
	_, rest, ok := strings.Cut(log, name+"<<")
	if !ok {
		return ""
	}
	body, _, _ := strings.Cut(rest, ">>")
	return strings.TrimSpace(strings.ReplaceAll(body, "\r", ""))
}

// TestIsolatedByDefault guards against an agent that lands on the host
// network (or sees the host's resolver configuration) because its request
// named no network: it gets network isolated (recorded, shown by status
// and audited), its own mount namespace with the instance's
// /etc/resolv.conf and /etc/hosts, read-only and private, which a restart
// on-failure joins, while the host's /etc/resolv.conf and mount table are
// untouched. An instance that asks for host gets it, with the warning.
func TestIsolatedByDefault(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("namespaces need root")
	}
	is := is.New(t)
	hostResolv, _ := os.ReadFile("/etc/resolv.conf")
	hostMounts := mountsAt("/etc/resolv.conf")
	e := start(t, "-host-runtime-enabled", "yes")
	var h api.Health
	is.NoErr(e.rc.Call(context.Background(), healthapi.Op, nil, &h))
	is.Equal(h.DefaultNetwork, api.NetworkIsolated)
	is.True(h.NetworkIsolation)

	in := e.provision(api.ProvisionRequest{InstanceID: api.NewID(), Command: []string{"sh", "-c", nsScript}, Restart: api.RestartOnFailure, MaxRestarts: 1})
	is.Equal(in.Network, api.NetworkIsolated)
	is.True(!strings.Contains(in.Warning, api.HostNetworkWarning))
	log := e.waitLog(in.InstanceID, "run-done", 15*time.Second)
	is.Equal(section(log, "resolv"), strings.TrimSpace(netns.ResolvConf)) // the instance's, not the host's
	is.Equal(section(log, "hosts"), strings.TrimSpace(netns.HostsFile))
	mnt := section(log, "mount")
	t.Logf("the agent's /etc/resolv.conf mount: %s", mnt)
	is.True(strings.Contains(mnt, " ro,"))     // read-only
	is.True(!strings.Contains(mnt, "shared:")) // private: nothing propagates to the host
	is.True(strings.Contains(log, "write-rc="))
	is.True(!strings.Contains(log, "write-rc=0"))  // the agent cannot change it
	is.True(strings.Contains(log, "ifaces=1"))     // loopback only
	selfNet, _ := os.Readlink("/proc/self/ns/net") // the test's (host) namespaces
	selfMnt, _ := os.Readlink("/proc/self/ns/mnt")
	is.True(!strings.Contains(log, "netns="+selfNet+" "))
	is.True(!strings.Contains(log, "mntns="+selfMnt))

	// The restart (exit 3, on-failure) runs in the same namespaces.
	st := e.waitState(in.InstanceID, api.StateExited, 30*time.Second)
	is.Equal(st.Restarts, int64(1))
	l, err := e.c.Logs(context.Background(), &api.LogsRequest{InstanceID: in.InstanceID})
	is.NoErr(err)
	ids := map[string]bool{}
	for _, line := range strings.Split(string(l.Data), "\n") {
		if strings.HasPrefix(line, "netns=") {
			ids[strings.TrimSpace(strings.Split(line, " ifaces=")[0])] = true
		}
	}
	is.Equal(len(ids), 1) // both runs: one network and one mount namespace

	// The host's side: the same /etc/resolv.conf, no mount of ours.
	after, _ := os.ReadFile("/etc/resolv.conf")
	is.Equal(sha256.Sum256(after), sha256.Sum256(hostResolv))
	is.Equal(mountsAt("/etc/resolv.conf"), hostMounts)
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	is.True(!bytes.Contains(mi, []byte(in.InstanceID)))

	// Asking for host: the host's resolver configuration, the warning,
	// the mode on the audit record.
	hostIn := e.provision(api.ProvisionRequest{InstanceID: api.NewID(), Network: &api.Network{Mode: api.NetworkHost}, Command: []string{"sh", "-c", nsScript}})
	is.Equal(hostIn.Network, api.NetworkHost)
	is.True(strings.Contains(hostIn.Warning, api.HostNetworkWarning))
	log = e.waitLog(hostIn.InstanceID, "run-done", 15*time.Second)
	is.Equal(section(log, "resolv"), strings.TrimSpace(string(hostResolv)))
	is.True(strings.Contains(log, "mntns="+selfMnt))
	list, err := e.c.List(context.Background())
	is.NoErr(err)
	for _, x := range list.Instances {
		is.Equal(strings.Contains(x.Warning, api.HostNetworkWarning), x.InstanceID == hostIn.InstanceID && x.State != api.StateExited)
	}
	audit, err := os.ReadFile(filepath.Join(e.root, "log/supervisord/audit.jsonl"))
	is.NoErr(err)
	for _, c := range []struct{ id, mode string }{{in.InstanceID, "isolated"}, {hostIn.InstanceID, "host"}} {
		n := 0
		for _, line := range strings.Split(string(audit), "\n") {
			if strings.Contains(line, `"instance.provision"`) && strings.Contains(line, c.id) {
				is.True(strings.Contains(line, `"network":"`+c.mode+`"`))
				n++
			}
		}
		is.Equal(n, 2) // the before and after records
	}
}

// mountsAt counts the host's mounts at path (this process's mount table).
func mountsAt(path string) int {
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	n := 0
	for _, l := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == path {
			n++
		}
	}
	return n
}

// TestDefaultNetworkFlag: -default-network host gives a request without a
// network the host network (with the warning), while one that asks for
// isolated still gets it; a bad value stops supervisord.
func TestDefaultNetworkFlag(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("namespaces need root")
	}
	t.Parallel()
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes", "-default-network", "host")
	in := e.provision(api.ProvisionRequest{Command: []string{"sleep", "1000"}})
	is.Equal(in.Network, api.NetworkHost)
	is.True(strings.Contains(in.Warning, api.HostNetworkWarning))
	iso := e.provision(api.ProvisionRequest{Command: []string{"sleep", "1000"}, Network: &api.Network{Mode: api.NetworkIsolated}})
	is.Equal(iso.Network, api.NetworkIsolated)
	// An empty mode with an allow list is the default too.
	dflt := e.provision(api.ProvisionRequest{Command: []string{"sleep", "1000"}, Network: &api.Network{Allow: []string{"https://example.com"}}})
	is.Equal(dflt.Network, api.NetworkHost)
	_, err := e.c.Provision(context.Background(), &api.ProvisionRequest{Command: []string{"true"}, WorkingDir: "/tmp", Network: &api.Network{Mode: "bridge"}})
	code(t, err, api.CodeInstanceInvalid)

	out, err := exec.Command(binary, "-root", t.TempDir(), "-default-network", "none").CombinedOutput()
	is.True(err != nil)
	is.True(strings.Contains(string(out), "-default-network"))
}

// TestNetworkUnavailableNoFallback guards against a silent downgrade to
// the host network: a supervisord that cannot make a namespace (root
// without CAP_SYS_ADMIN, as under a service manager that drops it) fails
// a request without a network, and one asking for isolated, with
// network.unavailable and leaves nothing behind; one asking for host
// runs; health says isolation is unavailable.
func TestNetworkUnavailableNoFallback(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (then drops CAP_SYS_ADMIN)")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("needs setpriv (util-linux)")
	}
	t.Parallel()
	is := is.New(t)
	root, err := os.MkdirTemp("/tmp", "hk")
	is.NoErr(err)
	os.Chmod(root, 0o755)
	e := &env{t: t, root: root, bin: setpriv, args: []string{"--bounding-set=-sys_admin", "--inh-caps=-sys_admin", "--", binary,
		"-root", root, "-egress-required", "no", "-host-runtime-enabled", "yes"}}
	e.boot()
	t.Cleanup(func() { e.destroyAll(); e.kill(); os.RemoveAll(root) })
	ctx := context.Background()
	var h api.Health
	is.NoErr(e.rc.Call(ctx, healthapi.Op, nil, &h))
	is.True(!h.NetworkIsolation)
	is.True(strings.Contains(h.Warning, "NETWORK ISOLATION UNAVAILABLE"))

	for _, tc := range []struct {
		name string
		net  *api.Network
	}{
		{"absent", nil},
		{"empty mode", &api.Network{Allow: []string{"https://example.com"}}},
		{"isolated", &api.Network{Mode: api.NetworkIsolated}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			id := api.NewID()
			_, err := e.c.Provision(ctx, &api.ProvisionRequest{InstanceID: id, Command: []string{"true"}, WorkingDir: "/tmp", Start: true, Network: tc.net})
			code(t, err, api.CodeNetworkUnavailable)
			is.True(strings.Contains(err.Error(), "network host explicitly"))
			_, err = e.c.Status(ctx, id)
			code(t, err, api.CodeInstanceNotFound) // nothing was made
		})
	}
	in := e.provision(api.ProvisionRequest{Network: &api.Network{Mode: api.NetworkHost}, Command: []string{"sh", "-c", "echo host-ran"}})
	is.Equal(in.Network, api.NetworkHost)
	e.waitLog(in.InstanceID, "host-ran", 10*time.Second)
}
