package server

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/opencontainers/go-digest"
	"hostkit.dev/cmd/containerization-helper/internal/image"
	"hostkit.dev/cmd/containerization-helper/internal/image/imagetest"
	"hostkit.dev/cmd/containerization-helper/internal/state"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/procexec"
)

// cgroupHierarchy is where controller's hierarchy is mounted: its own v1
// mount, or the unified hierarchy on a v2 host.
func cgroupHierarchy(controller string) string {
	if fi, err := os.Stat("/sys/fs/cgroup/" + controller); err == nil && fi.IsDir() {
		return "/sys/fs/cgroup/" + controller
	}
	return "/sys/fs/cgroup"
}

// Recover removes what a `runc create` killed half-way leaves: for a
// helper-made id it was creating (a record in PhaseCreating, or a bundle
// of that name), a runtime state directory runc cannot read and the
// container's cgroup, processes in it included. The fault is built by
// hand, as runc 1.1 leaves it when SIGKILLed after making the state
// directory and the first cgroup but before writing state.json (seen on
// this host: exec.fifo alone, and only the cpuset cgroup): a kill at the
// right millisecond cannot be produced reliably. Refused side: an id the
// helper did not make (its runtime directory, bundle and cgroup), a
// helper-made id the helper was not creating, and a real container of a
// helper-made id with a creating record, are left as they are.
func TestRecoverRemovesCreateLeftovers(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	base, err := os.MkdirTemp("/tmp", "hksr")
	is.NoErr(err)
	t.Cleanup(func() { os.RemoveAll(base) })
	stateDir := filepath.Join(base, "state")
	rtRoot := filepath.Join(stateDir, dirRuntimeRoot)
	bundles := bundlesDir(stateDir)
	for _, d := range []string{stateDir, rtRoot, bundles, rootfsDir(stateDir), logsDir(stateDir)} {
		is.NoErr(os.Mkdir(d, 0o700))
	}
	var (
		creating   = newID(t)   // creating record; exec.fifo only; cpuset cgroup
		bundleOnly = newID(t)   // bundle only; a state.json that does not decode; a process in its pids cgroup
		unclaimed  = newID(t)   // no record, no bundle: the helper was not creating it
		foreign    = "foreign1" // not helper-made: bundle, state directory, cgroup
		live       = newID(t)   // a real created container, unannotated, with a creating record and a bundle
	)
	cpuset, pids := cgroupHierarchy("cpuset"), cgroupHierarchy("pids")
	cg := func(h, id string) string { return filepath.Join(h, cgroupParent, id) }
	leftover := func(id string) string {
		dir := filepath.Join(rtRoot, id)
		is.NoErr(os.Mkdir(dir, 0o711))
		is.NoErr(exec.Command("mkfifo", "-m", "0622", filepath.Join(dir, "exec.fifo")).Run())
		return dir
	}
	leftover(creating)
	is.NoErr(os.MkdirAll(cg(cpuset, creating), 0o755))
	is.NoErr(os.WriteFile(filepath.Join(leftover(bundleOnly), "state.json"), []byte(`{"id":"`+bundleOnly+`","init_process_pid":`), 0o600))
	is.NoErr(os.Mkdir(filepath.Join(bundles, bundleOnly), 0o700))
	is.NoErr(os.MkdirAll(cg(pids, bundleOnly), 0o755))
	orphan := exec.Command("/bin/sleep", "600") // stands for an orphaned runc init
	is.NoErr(orphan.Start())
	orphanDone := make(chan struct{})
	go func() { orphan.Wait(); close(orphanDone) }()
	t.Cleanup(func() { // should Recover not have removed them
		orphan.Process.Kill()
		select {
		case <-orphanDone:
		case <-time.After(5 * time.Second):
		}
		for _, d := range []string{cg(cpuset, creating), cg(pids, bundleOnly), cg(pids, foreign)} {
			os.Remove(d)
		}
	})
	is.NoErr(os.WriteFile(filepath.Join(cg(pids, bundleOnly), "cgroup.procs"), []byte(strconv.Itoa(orphan.Process.Pid)), 0o644))
	leftover(unclaimed)
	leftover(foreign)
	is.NoErr(os.Mkdir(filepath.Join(bundles, foreign), 0o700))
	is.NoErr(os.MkdirAll(cg(pids, foreign), 0o755))

	// The live container: a real bundle, created with runc directly.
	pol, err := procexec.NewPolicy([]procexec.Rule{image.Rule(image.DefaultUmoci)}, []string{image.MutationUnpack})
	is.NoErr(err)
	runner, err := procexec.NewRunner(procexec.Config{Policy: pol})
	is.NoErr(err)
	unp, err := image.NewUnpacker(image.Config{Runner: runner})
	is.NoErr(err)
	layout, d := imagetest.Build(t, t.TempDir())
	b, err := unp.Prepare(ctx, image.Request{Layout: layout, Manifest: digest.Digest(d), Root: bundles, Name: live,
		Patch: image.Patch{Args: []string{"/bin/sleep", "600"}, CgroupsPath: cgroupParent + "/" + live}}, rootfsDir(stateDir))
	is.NoErr(err)
	console, err := os.Create(filepath.Join(base, "live.log")) // a file: with pipes, runc create never returns
	is.NoErr(err)
	defer console.Close()
	create := exec.Command("/usr/sbin/runc", "--root", rtRoot, "create", "--bundle", b.Path, live)
	create.Stdout, create.Stderr = console, console
	is.NoErr(create.Run())
	t.Cleanup(func() { exec.Command("/usr/sbin/runc", "--root", rtRoot, "delete", "--force", live).Run() })

	st, err := state.Open(filepath.Join(stateDir, dirStore), state.Options{})
	is.NoErr(err)
	inst := state.NewUUID()
	for _, id := range []string{creating, live} {
		is.NoErr(st.PutContainer(state.Container{ID: id, Instance: inst, Bundle: filepath.Join(bundles, id), Phase: state.PhaseCreating}))
	}
	is.NoErr(st.Close())

	alog, err := audit.Open(audit.Options{Dir: filepath.Join(base, "audit"), Daemon: "helper"})
	is.NoErr(err)
	defer alog.Close()
	s, err := Open(ctx, Options{Runtime: "runc", StateDir: stateDir, Epoch: "test", Started: time.Now(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Audit: alog}) // Open runs Recover
	is.NoErr(err)
	defer s.Close()

	gone := func(p string) bool {
		_, err := os.Lstat(p)
		return os.IsNotExist(err)
	}
	// Allowed: the leftovers of ids the helper was creating.
	is.True(gone(filepath.Join(rtRoot, creating)))
	is.True(gone(cg(cpuset, creating)))
	is.True(gone(filepath.Join(rtRoot, bundleOnly)))
	is.True(gone(cg(pids, bundleOnly)))
	is.True(gone(filepath.Join(bundles, bundleOnly)))
	select {
	case <-orphanDone: // killed
	case <-time.After(5 * time.Second):
		t.Fatal("the process in the leftover cgroup lives on")
	}
	_, ok, err := s.cfg.Store.Container(creating)
	is.NoErr(err)
	is.True(!ok)

	// Refused: not the helper's, not being created, or a container.
	is.True(!gone(filepath.Join(rtRoot, unclaimed, "exec.fifo")))
	is.True(!gone(filepath.Join(rtRoot, foreign, "exec.fifo")))
	is.True(!gone(filepath.Join(bundles, foreign)))
	is.True(!gone(cg(pids, foreign)))
	is.True(!gone(filepath.Join(rtRoot, live, "state.json")))
	is.True(!gone(filepath.Join(bundles, live)))
	is.True(!gone(cg(pids, live)))
	c, ok, err := s.cfg.Store.Container(live)
	is.NoErr(err)
	is.True(ok)
	is.Equal(c.Phase, state.PhaseCreated) // reconciled, not removed
	rs, err := s.cfg.Runtime.State(ctx, live)
	is.NoErr(err)
	is.Equal(string(rs.Status), "created")
}
