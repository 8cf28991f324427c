package provider

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkLifecycle measures create+start+delete --force of a busybox
// container through the provider and through the same runtime argv run
// directly with os/exec (stdout and stderr on an append-only file, as the
// provider arranges; for crun on a hybrid host, inside the same unshare
// wrapper), alternating the two in every iteration so both see the same
// machine load:
//
//	go test -run '^$' -bench Lifecycle -benchtime 30x ./internal/provider/
//
// Metrics: per-verb milliseconds of each path and the overall ratio
// provider/direct (the helper's budget is 1.15).
func BenchmarkLifecycle(b *testing.B) {
	for _, name := range runtimes {
		b.Run(name, func(b *testing.B) {
			e := newEnv(b, name)
			ctx := context.Background()
			if _, err := e.p.Negotiate(ctx); err != nil {
				b.Fatal(err)
			}
			bundle := e.makeBundle(b, "bench", ann("bench"))
			direct := newDirect(b, e)
			var prov, dir verbTimes
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				id := "bench-" + strconv.Itoa(i)
				t0 := time.Now()
				if err := e.p.Create(ctx, CreateSpec{ID: id, Bundle: bundle, ConsoleLog: e.consoleLog("bench")}); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := e.p.Start(ctx, id); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				if err := e.p.Delete(ctx, id, true); err != nil {
					b.Fatal(err)
				}
				prov.add(t0, t1, t2, time.Now())
				direct.cycle(b, "direct-"+strconv.Itoa(i), bundle, &dir)
			}
			b.StopTimer()
			prov.report(b, "prov")
			dir.report(b, "direct")
			b.ReportMetric(float64(prov.total())/float64(dir.total()), "ratio")
		})
	}
}

// verbTimes accumulates per-verb durations.
type verbTimes struct {
	n                  int
	create, start, del time.Duration
}

// add records one cycle from its four instants.
func (v *verbTimes) add(t0, t1, t2, t3 time.Time) {
	v.n++
	v.create += t1.Sub(t0)
	v.start += t2.Sub(t1)
	v.del += t3.Sub(t2)
}

func (v *verbTimes) total() time.Duration { return v.create + v.start + v.del }

// report adds the mean per-verb milliseconds as metrics.
func (v *verbTimes) report(b *testing.B, prefix string) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(v.n) }
	b.ReportMetric(ms(v.create), prefix+"-create-ms")
	b.ReportMetric(ms(v.start), prefix+"-start-ms")
	b.ReportMetric(ms(v.del), prefix+"-delete-ms")
}

// direct runs the provider's runtime argv with os/exec.
type direct struct {
	p       *cli
	console *os.File
	logFile string
}

func newDirect(b *testing.B, e *testEnv) *direct {
	console, err := os.OpenFile(e.consoleLog("direct"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { console.Close() })
	return &direct{p: e.p.(*cli), console: console, logFile: filepath.Join(e.cfg.LogDir, "direct.log")}
}

// run runs one verb.
func (d *direct) run(b *testing.B, v verb, args ...string) {
	exe, argv := d.p.t.command(v, append(append(globals(d.p.root, d.logFile), v.name), args...))
	cmd := exec.Command(exe, argv...)
	cmd.Stdout, cmd.Stderr = d.console, d.console
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s %s: %v", d.p.name, v.name, err)
	}
}

// cycle creates, starts and force-deletes id, then reaps its init (as the
// provider's Delete does, outside the timing).
func (d *direct) cycle(b *testing.B, id, bundle string, vt *verbTimes) {
	pidFile := filepath.Join(d.p.logDir, id+".pid")
	t0 := time.Now()
	d.run(b, verbCreate, "--bundle", bundle, "--pid-file", pidFile, id)
	t1 := time.Now()
	d.run(b, verbStart, id)
	t2 := time.Now()
	d.run(b, verbDelete, "--force", id)
	vt.add(t0, t1, t2, time.Now())
	if pid, ok := readPidFile(pidFile); ok {
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, 0, nil)
	}
	os.Remove(pidFile)
}

// BenchmarkList measures List over 100 containers in `created` (the
// helper's observe) through the provider and the runtime's `list --format
// json` run directly with os/exec, alternating in every iteration. For
// crun the provider also reads and decodes each container's stored config
// (its list has no annotations).
//
//	go test -run '^$' -bench List -benchtime 20x ./internal/provider/
func BenchmarkList(b *testing.B) {
	const n = 100
	for _, name := range runtimes {
		b.Run(name, func(b *testing.B) {
			e := newEnv(b, name)
			ctx := context.Background()
			for i := 0; i < n; i++ {
				id := "list-" + strconv.Itoa(i)
				bundle := e.makeBundle(b, id, ann("list"))
				if err := e.p.Create(ctx, CreateSpec{ID: id, Bundle: bundle, ConsoleLog: e.consoleLog("list")}); err != nil {
					b.Fatal(err)
				}
				e.cleanup(b, e.p, id)
			}
			p := e.p.(*cli)
			exe, argv := p.t.command(verbList, append(globals(p.root, filepath.Join(e.cfg.LogDir, "direct.log")), "list", "--format", "json"))
			var prov, dir time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				l, err := e.p.List(ctx)
				if err != nil || len(l) != n || l[0].Annotations["dev.hostkit.fence"] != "7" {
					b.Fatalf("list: %d entries, %v", len(l), err)
				}
				t1 := time.Now()
				if err := exec.Command(exe, argv...).Run(); err != nil {
					b.Fatal(err)
				}
				prov += t1.Sub(t0)
				dir += time.Since(t1)
			}
			b.StopTimer()
			b.ReportMetric(float64(prov.Microseconds())/1000/float64(b.N), "prov-ms")
			b.ReportMetric(float64(dir.Microseconds())/1000/float64(b.N), "direct-ms")
		})
	}
}
