package cli

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/rpc"
)

var daemonsUnderTest = []struct{ binary, name string }{
	{"secretd", "secretd"},
	{"egressd", "egressd"},
	{"supervisord", "supervisord"},
	{"containerization-helper", "helper"},
}

// Each daemon starts as a real process, answers health with the common
// fields, and on SIGTERM exits 0 leaving no socket behind.
func TestDaemonHealthAndCleanStop(t *testing.T) {
	t.Parallel()
	for _, d := range daemonsUnderTest {
		t.Run(d.binary, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			root := shortRoot(t)
			p := startDaemon(t, d.binary, d.name, root)
			c := rpc.NewClient(p.socket, 2*time.Second)
			h, err := healthapi.Get(context.Background(), c)
			c.Close()
			is.NoErr(err)
			is.Equal(h.Status, "ok")
			is.Equal(len(h.Epoch), 16)
			is.True(h.Version != "")
			fi, err := os.Lstat(p.socket)
			is.NoErr(err)
			is.Equal(fi.Mode().Perm(), os.FileMode(0o600)) // private socket
			is.Equal(exitStatus(p.stop(t, syscall.SIGTERM)), 0)
			_, err = os.Lstat(p.socket)
			is.True(os.IsNotExist(err)) // socket removed on clean stop
		})
	}
}

// A daemon killed with SIGKILL leaves a stale socket; the next start
// recovers it, and the new process has a new epoch.
func TestDaemonRecoversStaleSocketAfterKill9(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := shortRoot(t)
	p := startDaemon(t, "secretd", "secretd", root)
	h1, err := healthapi.Get(context.Background(), rpc.NewClient(p.socket, time.Second))
	is.NoErr(err)
	_ = p.stop(t, syscall.SIGKILL)
	_, err = os.Lstat(p.socket)
	is.NoErr(err) // the stale socket is still there
	p2 := startDaemon(t, "secretd", "secretd", root)
	h2, err := healthapi.Get(context.Background(), rpc.NewClient(p2.socket, time.Second))
	is.NoErr(err)
	is.True(h1.Epoch != h2.Epoch)
}

// A second daemon on the same root refuses to start, with
// sock.already_running, before its start-up work: egressd before it binds
// the proxy port (no "address already in use"), and nothing the first one
// owns changes. The first keeps serving.
func TestSecondDaemonRefused(t *testing.T) {
	t.Parallel()
	for _, d := range daemonsUnderTest[:3] {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			root := shortRoot(t)
			p := startDaemon(t, d.binary, d.name, root)
			before := treeDigest(t, root)
			out, err := runBinary(d.binary, "-root", root)
			is.True(err != nil)
			is.True(strings.Contains(out, "sock.already_running"))
			is.True(!strings.Contains(out, "address already in use"))
			is.Equal(treeDigest(t, root), before) // no file of the first daemon's written
			_, err = healthapi.Get(context.Background(), rpc.NewClient(p.socket, time.Second))
			is.NoErr(err)
		})
	}
}

// treeDigest names every regular file under root with its size and
// content hash (lock files, which a refused start opens, have no content).
func treeDigest(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %d %x\n", path, len(data), sha256.Sum256(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestDoctorAgainstRealDaemons(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := shortRoot(t)
	var procs []*daemonProc
	for _, d := range daemonsUnderTest[:3] {
		procs = append(procs, startDaemon(t, d.binary, d.name, root))
	}
	code, out, errOut := runCLI("-root", root, "doctor")
	is.Equal(code, ExitOK)
	is.Equal(errOut, "")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	is.True(len(lines) >= 5) // header + 4 daemons, then notes
	is.True(strings.Contains(out, "supervisord host runtime enabled: false"))
	if os.Geteuid() == 0 { // supervisord probed nftables in a throwaway namespace
		is.True(strings.Contains(out, "supervisord nftables for isolated instances: available\n"))
	} else {
		is.True(strings.Contains(out, "supervisord nftables for isolated instances: unknown (runtime.unavailable)"))
	}
	is.True(!strings.Contains(out, "nftables_unavailable"))
	is.True(strings.Contains(out, "egressd CA bundle: "+filepath.Join(root, "run", "public", "egressd-ca.pem")))
	is.True(strings.HasPrefix(lines[0], "DAEMON"))
	for i, name := range []string{"secretd", "egressd", "supervisord"} {
		f := strings.Fields(lines[i+1])
		is.Equal(f[0], name)
		is.Equal(f[2], "0600")
		is.Equal(f[4], "held") // the daemon holds its lock
		is.Equal(f[5], "yes")
	}
	is.True(strings.Contains(lines[4], "helper (optional)"))

	code, out, _ = runCLI("doctor", "-root", root, "--json")
	is.Equal(code, ExitOK)
	var doc struct {
		Daemons []doctorRow `json:"daemons"`
	}
	is.NoErr(json.Unmarshal([]byte(out), &doc))
	is.Equal(len(doc.Daemons), 4)
	is.True(doc.Daemons[0].Reachable)
	is.Equal(len(doc.Daemons[0].Epoch), 16)

	is.Equal(doc.Daemons[0].Lock, "held")
	is.Equal(doc.Daemons[0].DirMode, "0700")
	is.True(doc.Daemons[2].HostRuntimeEnabled != nil) // supervisord reports it

	// An unsafe set-up is warned about: a world-readable socket directory
	// and a credential file with a loose mode.
	credDir := filepath.Join(root, "state", "secretd", "credentials")
	is.NoErr(os.MkdirAll(credDir, 0o700))
	is.NoErr(os.WriteFile(filepath.Join(credDir, "loose.cred"), []byte("x"), 0o644))
	is.NoErr(os.Chmod(filepath.Join(root, "run", "egressd"), 0o755))
	code, out, _ = runCLI("doctor", "-root", root, "--json")
	is.Equal(code, ExitOK)
	var warned struct {
		Warnings []string `json:"warnings"`
	}
	is.NoErr(json.Unmarshal([]byte(out), &warned))
	joined := strings.Join(warned.Warnings, "\n")
	is.True(strings.Contains(joined, "loose.cred is 0644"))
	is.True(strings.Contains(joined, "egressd: socket directory"))
	is.NoErr(os.Chmod(filepath.Join(root, "run", "egressd"), 0o700))

	_ = procs[1].stop(t, syscall.SIGTERM) // egressd down
	code, _, errOut = runCLI("-root", root, "doctor")
	is.Equal(code, ExitUnavailable)
	is.True(strings.Contains(errOut, "egressd"))
}

// hostctl egress info and stats against a real egressd.
func TestEgressCommands(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := shortRoot(t)
	startDaemon(t, "egressd", "egressd", root, "-proxy-address", "127.0.0.1:0")
	code, out, errOut := runCLI("-root", root, "egress", "info", "--json")
	is.Equal(code, ExitOK)
	is.Equal(errOut, "")
	var info map[string]string
	is.NoErr(json.Unmarshal([]byte(out), &info))
	is.Equal(len(info["epoch"]), 16)
	is.Equal(info["ca_bundle_path"], filepath.Join(root, "run", "public", "egressd-ca.pem"))
	is.True(strings.HasPrefix(info["proxy_address"], "127.0.0.1:"))

	code, out, _ = runCLI("-root", root, "egress", "stats", "--json")
	is.Equal(code, ExitOK)
	is.True(strings.Contains(out, `"invocations": []`))
	code, out, _ = runCLI("-root", root, "egress", "stats")
	is.Equal(code, ExitOK)
	is.True(strings.HasPrefix(out, "INVOCATION"))
	code, _, _ = runCLI("-root", root, "egress", "stats", "extra")
	is.Equal(code, ExitUsage)
}
