// Command supervisor benchmarks supervisord (figures: bench/RESULTS.md,
// "supervisord: provision, stop, attach, holder RSS"): provision→running
// latency (p50/p99) in three layouts (everything on the disk; state and logs
// on the disk with <run> on tmpfs, as in production; everything on tmpfs),
// with a probe of the disk's own latency at that moment; stop latency of a
// 50-process tree; PTY throughput through attach side by side with reading
// the same kind of PTY directly, in alternating rounds (medians, and CPU per
// MB of each process); and the RSS of an idle holder and of a holder idle in
// the pool. It builds supervisord from ../../cmd/supervisord (GOWORK=off)
// unless -exe names a binary, runs it under a temporary -root (no egressd:
// -egress-required no), and prints a table with PASS/FAIL against the
// targets. Run it from this directory as root or not: `GOWORK=off go run .`
// (see -h for the flags).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"hostkit.dev/lib/api/healthapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/rpc"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/supervisor:", err)
		os.Exit(1)
	}
}

// row is one line of the results table.
type row struct{ name, value, target, verdict string }

func run() error {
	n := flag.Int("n", 200, "provisions per latency run")
	stops := flag.Int("stops", 10, "stop-latency runs")
	mib := flag.Int("mib", 100, "PTY throughput: MiB cat'ed")
	rounds := flag.Int("rounds", 3, "PTY throughput: rounds of direct then attach")
	disk := flag.String("disk", "/var/tmp", "directory on the disk for the first root")
	tmpfs := flag.String("tmpfs", "/dev/shm", "directory on tmpfs for the second root (\"\" skips)")
	prebuilt := flag.String("exe", "", "use this supervisord binary instead of building one (e.g. for perf)")
	sections := flag.String("sections", "psar", "what to run: p provision latency, s stop latency, a attach throughput, r holder RSS")
	layouts := flag.String("layouts", "disk,prod,tmpfs", "provision latency: disk (everything on -disk), prod (state and logs on -disk, <run> on -tmpfs, as /run is in production), tmpfs (everything on -tmpfs)")
	pool := flag.Int("holder-pool", -1, "supervisord's -holder-pool (-1: its default)")
	gap := flag.Duration("gap", 0, "pause between provisions (0: back to back)")
	perfOut := flag.String("perf", "", "record the attach leg with `perf record -g` into this file")
	flag.Parse()
	on := func(c string) bool { return strings.Contains(*sections, c) }

	bin, err := os.MkdirTemp("", "hkbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	os.Chmod(bin, 0o755)
	exe := filepath.Join(bin, "supervisord")
	if *prebuilt != "" {
		exe = *prebuilt
	} else {
		build := exec.Command("go", "build", "-o", exe, ".")
		build.Dir, build.Env = "../../cmd/supervisord", append(os.Environ(), "GOWORK=off")
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("go build supervisord: %v\n%s", err, out)
		}
	}
	var rows []row

	if on("p") && *disk != "" {
		// The disk's own latency at this moment, for context: the
		// machine is shared, and these vary several-fold from minute to
		// minute.
		fs, rn, err := diskProbe(*disk)
		if err != nil {
			return err
		}
		rows = append(rows, row{"disk probe (" + fsType(*disk) + "): append 300 B + fsync p50 / p90", ms(pct(fs, 50)) + " / " + ms(pct(fs, 90)), "", ""},
			row{"disk probe: write 2 KB to a temp file + rename over, no fsync, p50 / p90", ms(pct(rn, 50)) + " / " + ms(pct(rn, 90)), "", ""})
	}
	// Three layouts: everything on the disk; the production layout (state
	// and logs on the disk, <run> on tmpfs, as /run is); everything on
	// tmpfs.
	for _, where := range []struct{ key, name, dir, run string }{
		{"disk", "disk", *disk, ""}, {"prod", "disk, run on tmpfs", *disk, *tmpfs}, {"tmpfs", "tmpfs", *tmpfs, ""},
	} {
		if where.dir == "" || !on("p") || !strings.Contains(*layouts, where.key) || (where.run != "" && *tmpfs == "") {
			continue
		}
		d, err := startDaemonRun(exe, where.dir, where.run, *pool)
		if err != nil {
			return err
		}
		p50, p99, err := provisionLatency(d, *n, *gap)
		d.stop()
		if err != nil {
			return err
		}
		// Let the destroy of n instances (file removal, writeback) settle
		// before the next layout starts.
		time.Sleep(2 * time.Second)
		fs := fsType(where.dir)
		if where.run != "" {
			fs += " + " + fsType(where.run)
		}
		rows = append(rows,
			row{"provision→running p50 (" + where.name + ", " + fs + ")", ms(p50), "≤ 10 ms", verdict(p50 <= 10*time.Millisecond)},
			row{"provision→running p99 (" + where.name + ")", ms(p99), "", ""})
	}
	if !on("s") && !on("a") && !on("r") {
		printRows(rows)
		return nil
	}

	d, err := startDaemonRun(exe, *disk, "", *pool)
	if err != nil {
		return err
	}
	defer d.stop()
	if on("s") && *stops > 0 {
		sp50, smax, err := stopLatency(d, *stops)
		if err != nil {
			return err
		}
		rows = append(rows, row{"stop, 50-process tree p50", ms(sp50), "", ""}, row{"stop, 50-process tree max", ms(smax), "", ""})
	}

	if on("a") {
		res, err := ptyThroughput(d, *mib, *rounds, *perfOut)
		if err != nil {
			return err
		}
		dropped := res.attach < 0
		rows = append(rows,
			row{fmt.Sprintf("PTY read directly (cat %d MiB), median of %d", *mib, *rounds), mbps(res.direct), "", ""},
			row{fmt.Sprintf("PTY through attach (cat %d MiB), median of %d", *mib, *rounds), mbps(res.attach), "", map[bool]string{true: "client dropped (stream.slow_client)"}[dropped]},
			row{"attach / direct, median of the rounds' ratios", fmt.Sprintf("%.2f×", res.ratio), "≥ 0.8×", verdict(res.ratio >= 0.8)},
			row{"CPU per MB", res.cpuPerMB, "", ""})
	}

	if on("r") {
		rss, pooled, err := idleRSS(d)
		if err != nil {
			return err
		}
		rows = append(rows, row{"idle holder RSS", fmt.Sprintf("%.1f MiB", float64(rss)/(1<<20)), "≤ 8 MiB", verdict(rss <= 8<<20)})
		if pooled > 0 {
			rows = append(rows, row{"holder idle in the pool (not an instance), RSS", fmt.Sprintf("%.1f MiB", float64(pooled)/(1<<20)), "", ""})
		}
	}

	printRows(rows)
	return nil
}

func printRows(rows []row) {
	fmt.Printf("\n| measurement | value | target | |\n|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s | %s |\n", r.name, r.value, r.target, r.verdict)
	}
}

// daemon is a supervisord under a temporary root.
type daemon struct {
	root string
	run  string // the tmpfs run directory the root's run links to, or ""
	cmd  *exec.Cmd
	rc   *rpc.Client
	c    *api.Client
}

// startDaemonRun starts supervisord under a new root in parent; with run
// not "", the root's run directory is a symlink to a new directory in run
// (tmpfs, as /run is). pool ≥ 0 sets -holder-pool.
func startDaemonRun(exe, parent, run string, pool int) (*daemon, error) {
	root, err := os.MkdirTemp(parent, "hkb")
	if err != nil {
		return nil, err
	}
	os.Chmod(root, 0o755)
	d := &daemon{root: root}
	if run != "" {
		if d.run, err = os.MkdirTemp(run, "hkr"); err != nil {
			return nil, err
		}
		os.Chmod(d.run, 0o755)
		if err := os.Symlink(d.run, filepath.Join(root, "run")); err != nil {
			return nil, err
		}
	}
	args := []string{"-root", root, "-host-runtime-enabled", "yes", "-egress-required", "no", "-log-level", "warn"}
	if pool >= 0 {
		args = append(args, "-holder-pool", strconv.Itoa(pool))
	}
	d.cmd = exec.Command(exe, args...)
	if err := d.cmd.Start(); err != nil {
		os.RemoveAll(root)
		if d.run != "" {
			os.RemoveAll(d.run)
		}
		return nil, err
	}
	d.rc = rpc.NewClient(filepath.Join(root, "run", "supervisord", "api.sock"), 60*time.Second)
	d.c = api.NewClient(d.rc)
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := healthapi.Get(ctx, d.rc)
		cancel()
		if err == nil {
			return d, nil
		}
		if i > 500 {
			d.stop()
			return nil, fmt.Errorf("supervisord did not start: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (d *daemon) stop() {
	ctx := context.Background()
	if l, err := d.c.List(ctx); err == nil {
		for _, in := range l.Instances {
			d.c.Destroy(ctx, in.InstanceID)
		}
	}
	d.rc.Close()
	d.cmd.Process.Signal(syscall.SIGTERM)
	d.cmd.Wait()
	os.RemoveAll(d.root)
	if d.run != "" {
		os.RemoveAll(d.run)
	}
}

// provisionLatency provisions n `sleep 1000` instances one after another
// (each call returns once the agent runs) and destroys them.
func provisionLatency(d *daemon, n int, gap time.Duration) (p50, p99 time.Duration, err error) {
	ctx := context.Background()
	lat := make([]time.Duration, 0, n)
	var ids []string
	defer func() {
		for _, id := range ids {
			d.c.Destroy(ctx, id)
		}
	}()
	for i := 0; i < n+5; i++ {
		time.Sleep(gap)
		t0 := time.Now()
		in, err := d.c.Provision(ctx, &api.ProvisionRequest{Command: []string{"sleep", "1000"}, WorkingDir: "/tmp", Start: true, StopTimeoutMS: 1000})
		el := time.Since(t0)
		if err != nil {
			return 0, 0, err
		}
		if in.State != api.StateRunning {
			return 0, 0, fmt.Errorf("instance %s is %s after provision", in.InstanceID, in.State)
		}
		ids = append(ids, in.InstanceID)
		if i >= 5 { // warm-up
			lat = append(lat, el)
		}
	}
	return pct(lat, 50), pct(lat, 99), nil
}

// stopLatency times instance.stop of a tree of 50 processes (sh and 49
// sleeps), runs times.
func stopLatency(d *daemon, runs int) (p50, worst time.Duration, err error) {
	ctx := context.Background()
	var lat []time.Duration
	for i := 0; i < runs; i++ {
		in, err := d.c.Provision(ctx, &api.ProvisionRequest{Command: []string{"sh", "-c", "for i in $(seq 49); do sleep 1000 & done; wait"},
			WorkingDir: "/tmp", Start: true, StopTimeoutMS: 1000})
		if err != nil {
			return 0, 0, err
		}
		for end := time.Now().Add(10 * time.Second); countTree(in.InstanceID) < 50; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(end) {
				return 0, 0, fmt.Errorf("tree of %s did not reach 50 processes (%d)", in.InstanceID, countTree(in.InstanceID))
			}
		}
		t0 := time.Now()
		st, err := d.c.Stop(ctx, in.InstanceID)
		lat = append(lat, time.Since(t0))
		if err != nil {
			return 0, 0, err
		}
		if st.State != api.StateStopped || countTree(in.InstanceID) != 0 {
			return 0, 0, fmt.Errorf("after stop: state %s, %d processes left", st.State, countTree(in.InstanceID))
		}
		d.c.Destroy(ctx, in.InstanceID)
	}
	return pct(lat, 50), pct(lat, 100), nil
}

// countTree counts live processes whose environment names instance id.
func countTree(id string) int {
	marker := "HOSTKIT_INSTANCE_ID=" + id + "\x00"
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && strings.Contains(string(b), marker) {
			n++
		}
	}
	return n
}

// idleRSS is VmRSS of an idle instance's holder, after a second, and
// the largest VmRSS of the holders idle in supervisord's pool (0 when
// there are none: an older supervisord, or -holder-pool 0).
func idleRSS(d *daemon) (holder, pooled int64, err error) {
	ctx := context.Background()
	in, err := d.c.Provision(ctx, &api.ProvisionRequest{Command: []string{"sleep", "1000"}, WorkingDir: "/tmp", Start: true, PTY: true, StopTimeoutMS: 1000})
	if err != nil {
		return 0, 0, err
	}
	defer d.c.Destroy(ctx, in.InstanceID)
	time.Sleep(time.Second)
	pid := holderPID(d, in.InstanceID)
	if holder, err = rssOf(pid); err != nil {
		return 0, 0, err
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == pid {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.Contains(string(cmd), "holder\x00-hdir\x00"+filepath.Join(d.root, "run", "supervisord", "h")+"\x00") {
			if r, err := rssOf(p); err == nil {
				pooled = max(pooled, r)
			}
		}
	}
	return holder, pooled, nil
}

// rssOf is pid's VmRSS in bytes.
func rssOf(pid int) (int64, error) {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS for %d", pid)
}

// holderPID is instance id's holder pid from its metadata.json (0 when
// unreadable).
func holderPID(d *daemon, id string) int {
	b, _ := os.ReadFile(filepath.Join(d.root, "state/supervisord/instances", id, "metadata.json"))
	var md struct {
		Holder struct {
			PID int `json:"pid"`
		} `json:"holder"`
	}
	_ = json.Unmarshal(b, &md)
	return md.Holder.PID
}

func pct(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func mbps(v float64) string { return fmt.Sprintf("%.0f MB/s", v) }

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// fsType names the file system of dir (tmpfs, ext4...) from /proc/mounts.
func fsType(dir string) string {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return "?"
	}
	abs, _ := filepath.EvalSymlinks(dir)
	best, typ := "", "?"
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 2 && strings.HasPrefix(abs+"/", strings.TrimSuffix(f[1], "/")+"/") && len(f[1]) >= len(best) {
			best, typ = f[1], f[2]
		}
	}
	return typ
}

// diskProbe times 100 appends of 300 bytes with an fsync each, and 100
// atomic replacements of a 2 KB file without fsync, in a new directory
// under dir.
func diskProbe(dir string) (fsyncs, renames []time.Duration, err error) {
	d, err := os.MkdirTemp(dir, "hkprobe")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(d)
	f, err := os.OpenFile(filepath.Join(d, "append"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	line, blob := append(make([]byte, 299), '\n'), make([]byte, 2000)
	for i := 0; i < 100; i++ {
		t0 := time.Now()
		if _, err := f.Write(line); err != nil {
			return nil, nil, err
		}
		if err := f.Sync(); err != nil {
			return nil, nil, err
		}
		fsyncs = append(fsyncs, time.Since(t0))
		t0 = time.Now()
		tmp := filepath.Join(d, ".meta.tmp")
		if err := os.WriteFile(tmp, blob, 0o600); err != nil {
			return nil, nil, err
		}
		if err := os.Rename(tmp, filepath.Join(d, "meta")); err != nil {
			return nil, nil, err
		}
		renames = append(renames, time.Since(t0))
	}
	return fsyncs, renames, nil
}
