// Command proxy benchmarks egressd's proxy face (docs/egressd.md, "The proxy
// face"; figures: bench/RESULTS.md) side by side, in one run, against the
// same loopback upstreams: (a) plain-HTTP forward proxying req/s with wrk
// (absolute-form request path) — direct, squid, tinyproxy, a bare
// httputil.ReverseProxy and egressd; (b) HTTPS through an opaque CONNECT
// tunnel, MB/s for a large download — direct, squid, tinyproxy and egressd;
// (c) intercepted HTTPS with placeholder substitution vs direct HTTPS req/s.
// Three streaming sections compare egressd (intercepted, placeholder
// substituted, as (c)) with a direct HTTPS client against the credentialed
// upstream: sse, the one-way latency of server-sent events (stamped with
// CLOCK_MONOTONIC by the upstreams' child, read by the client at dispatch;
// the direct and the egressd stream run at the same time, so that a stall of
// a loaded machine falls on both) and the time to first byte; bulk, MB/s and
// egressd's CPU per GiB for a chunked 1 GiB answer of three kinds of body;
// streams, egressd's VmRSS above idle with 200 streams held open (once per
// run, before the rounds; egressd only). They run only when named (-sections
// sse,bulk,streams) and only for egressd, not -base; sse always runs both
// modes. transparent (transparent.go) compares, from an isolated supervisord
// instance, the proxy variables with the transparent path through the same
// egressd, and times the bridge's DNS answers; it needs root and also builds
// supervisord. squid and tinyproxy run from config files generated into a
// temporary directory (caching and access logs off); a missing one is
// reported and skipped. egressd and secretd are built from ../../cmd. Run
// from this directory: `GOWORK=off go run .`.
//
// For before/after comparisons on a shared machine, -base DIR builds a
// second egressd (and secretd) from another source tree (a snapshot taken
// before a change) and runs it in the same run as mode "egressd (base)";
// -rounds N repeats every section, alternating which egressd goes first,
// and the summary gives each target's median ratio over the rounds;
// -modes picks modes; -perf DIR records a `perf record -g` profile of each
// proxy process during its measured modes. The exit status is 1 when a
// target's median ratio over the rounds misses its line. Besides req/s and latency,
// each row gives the proxy process's CPU per request (from /proc) and the
// load's: the client (wrk, or the Go client of (b) and (c)) plus the
// upstreams (their own child process, see upstreams), which rises when a
// proxy sits in the path.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/proxy:", err)
		os.Exit(1)
	}
}

type row struct {
	section, mode string
	round         int
	value         float64 // req/s or MB/s
	p50, p99      time.Duration
	cpu           time.Duration // the proxy process's CPU time per request (0: not measured)
	loadCPU       time.Duration // the load's CPU per request: client (wrk or Go) and the upstreams
	note          string
}

func run() error {
	conc := flag.Int("c", 32, "concurrent connections for (a) and (c)")
	dur := flag.Duration("d", 5*time.Second, "measured time per mode")
	bigMB := flag.Int("big", 256, "download size for (b), MiB")
	sections := flag.String("sections", "abc", "sections to run: letters of a, b, c (\"ac\"), or a comma-separated list of a, b, c, sse, bulk, streams, transparent")
	sseEvents := flag.Int("sse-events", 1000, "sse: events in the latency stream")
	sseSize := flag.Int("sse-size", 200, "sse: bytes per event")
	sseGap := flag.Duration("sse-gap", 5*time.Millisecond, "sse: time between events")
	sseTTFB := flag.Int("sse-ttfb", 20, "sse: short streams timed for time to first byte, warm and cold each")
	bulkMiB := flag.Int("bulk-mib", 1024, "bulk: size of the streamed answer, MiB")
	bulkWrite := flag.Int("bulk-write", 64<<10, "bulk: bytes per write of the upstream (the chunk size)")
	bulkBodies := flag.String("bulk-body", "text,json,binary", "bulk: comma-separated bodies, each a download per mode and round: text (random printable words), json (SSE chat chunks with escapes), binary (random bytes)")
	nStreams := flag.Int("streams", 200, "streams: streams held open at once")
	streamsGap := flag.Duration("streams-gap", 3*time.Second, "streams: time between events of each stream")
	streamsDur := flag.Duration("streams-duration", 10*time.Minute, "streams: how long the streams are held open")
	cIP := flag.String("c-ip", "", "address (c)'s upstream listens on (default: this machine's first non-loopback IPv4); 127.0.0.1 makes every (c) request go through egressd's loopback owner check")
	modes := flag.String("modes", "", "comma-separated modes to run (direct, squid, tinyproxy, revproxy, egressd, base); empty: all")
	base := flag.String("base", "", "a second source tree (e.g. a snapshot before a change): its egressd and secretd also run, as mode \"egressd (base)\", in (a) and (c)")
	rounds := flag.Int("rounds", 1, "repeat every section this many times; with -base, egressd and its base alternate which goes first")
	logLevel := flag.String("egressd-log-level", "info", "egressd's -log-level: info writes its egress.decision line per request (its access log); warn leaves it out, as squid and tinyproxy run with their access logs off")
	var egEnv []string
	flag.Func("egressd-env", "KEY=VALUE added to egressd's environment (repeatable; e.g. GOGC=100 to see what the collector's target costs in the streams section); not to -base", func(v string) error {
		if !strings.Contains(v, "=") {
			return errors.New("want KEY=VALUE")
		}
		egEnv = append(egEnv, v)
		return nil
	})
	pprofDir := flag.String("pprof", "", "directory for heap and goroutine profiles of egressd in the streams section, idle and with the streams open: egressd is then built with net/http/pprof added by go build -overlay (the bench's build only; its VmRSS is then not the product's)")
	perfDir := flag.String("perf", "", "directory for `perf record -g` profiles of each proxy process during its measured (a) and (c) modes")
	inProcess := flag.Bool("upstream-in-process", false, "run the upstreams in this process, beside the Go clients of (b) and (c), as before 2026-12-01 (their direct modes then skip cross-process wakeups)")
	childCA := flag.String("serve-upstreams", "", "internal: be the upstreams' child process, writing the test CA to this file")
	tMode, tTarget := transparentFlags()
	flag.Parse()
	if *tMode != "" {
		return transparentClient(*tMode, *tTarget, *conc, *dur)
	}
	want := func(m string) bool {
		if *modes == "" {
			return true
		}
		for f := range strings.SplitSeq(*modes, ",") {
			if f == m {
				return true
			}
		}
		return false
	}
	secs := strings.Split(*sections, ",")
	if !strings.Contains(*sections, ",") && strings.Trim(*sections, "abc") == "" {
		secs = strings.Split(*sections, "")
	}
	has := func(s string) bool { return slices.Contains(secs, s) }
	nInv := 0
	if has("streams") {
		nInv = (*nStreams + streamsPerInvocation - 1) / streamsPerInvocation
	}
	if *cIP == "" {
		*cIP = localIP()
	}
	if *childCA != "" {
		return childUpstreams(*childCA, *bigMB, *cIP)
	}
	dir, err := os.MkdirTemp("/tmp", "hkpb")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	caFile := filepath.Join(dir, "upstream-ca.pem")
	up, err := startUpstreams(caFile, *inProcess, *bigMB, *cIP)
	if err != nil {
		return err
	}
	defer up.stop()
	plain, tlsUp, cAddr := up.plain, up.tls, up.c
	_, cPort, _ := net.SplitHostPort(cAddr)
	upTest = cAddr
	// loadCPU is the load's CPU so far: the clients in this process and
	// the upstreams (here or in their child).
	loadCPU := func() time.Duration {
		if up.cmd == nil {
			return cpuTime(os.Getpid())
		}
		return cpuTime(os.Getpid()) + cpuTime(up.pid())
	}

	eg, err := startEgressd(filepath.Join(dir, "new"), filepath.Join("..", ".."), plain, tlsUp, "up.test:"+cPort, cAddr, caFile,
		egressdOpts{logLevel: *logLevel, nInv: nInv, pprof: *pprofDir != "", env: egEnv})
	if err != nil {
		return err
	}
	defer eg.stop()
	egs := []*egressdProc{eg}
	names := []string{"egressd"}
	if *base != "" {
		eb, err := startEgressd(filepath.Join(dir, "base"), *base, plain, tlsUp, "up.test:"+cPort, cAddr, caFile, egressdOpts{logLevel: *logLevel})
		if err != nil {
			return fmt.Errorf("base: %w", err)
		}
		defer eb.stop()
		egs, names = append(egs, eb), append(names, "egressd (base)")
	}
	sq, sqErr := startSquid(dir)
	if sqErr == nil {
		defer sq.stop()
	}
	tp, tpErr := startTinyproxy(dir)
	if tpErr == nil {
		defer tp.stop()
	}
	rp, err := serve(&httputil.ReverseProxy{ErrorLog: log.New(io.Discard, "", 0), Rewrite: func(pr *httputil.ProxyRequest) { pr.Out.URL = pr.In.URL }})
	if err != nil {
		return err
	}
	// order returns the egressd instances in the order round i runs them.
	order := func(i int) []int {
		if len(egs) == 2 && i%2 == 1 {
			return []int{1, 0}
		}
		if len(egs) == 2 {
			return []int{0, 1}
		}
		return []int{0}
	}
	modeKey := func(i int) string { return []string{"egressd", "base"}[i] }

	var rows []row
	small := "https://up.test:" + cPort + "/small"
	target := "http://" + plain + "/bench"
	// (b) opaque CONNECT tunnel, MB/s.
	bigURL := "https://" + tlsUp + "/big"
	// pid 0: the proxy's CPU is not measured (squid and tinyproxy run
	// several processes).
	b := func(round int, mode, proxy string, pid int) {
		cpu0, self0 := cpuTime(pid), loadCPU()
		r := download("b", mode, proxy, bigURL, up.pool, *bigMB)
		gib := float64(3**bigMB) / 1024 // three downloads
		if r.value > 0 {
			r.note = fmt.Sprintf("load CPU %.0f ms/GiB", float64((loadCPU()-self0).Milliseconds())/gib)
			if pid > 0 {
				r.note = fmt.Sprintf("proxy CPU %.0f ms/GiB, ", float64((cpuTime(pid)-cpu0).Milliseconds())/gib) + r.note
			}
		}
		r.round = round
		rows = append(rows, r)
	}
	cBase := "https://up.test:" + cPort
	var sses []sseResult
	var bulks []bulkResult
	sc := streamingCfg{sse: has("sse"), bulk: has("bulk"), sseEvents: *sseEvents, sseSize: *sseSize, sseTTFB: *sseTTFB, sseGap: *sseGap,
		bulkMiB: *bulkMiB, bulkWrite: *bulkWrite, bulkBodies: strings.Split(*bulkBodies, ","), perfDir: *perfDir}
	var streams *streamsResult
	if has("streams") && want("egressd") {
		r := streamsRun(eg, up.pid(), cBase, *nStreams, *streamsGap, *streamsDur, *pprofDir)
		streams = &r
	}
	for round := range *rounds {
		ss, bs := streamingRound(round, sc, eg, up, cBase, want, loadCPU)
		sses, bulks = append(sses, ss...), append(bulks, bs...)
		// (c) first: with -c-ip 127.0.0.1 its upstream is a loopback
		// credential destination, whose listener's owner egressd checks on
		// every request, and (a) leaves tens of thousands of TIME_WAIT
		// sockets behind.
		if has("c") {
			if want("direct") {
				self0 := loadCPU()
				r := load("c", "direct", "", small, "Bearer "+secret, up.pool, *conc, *dur)
				r.loadCPU = perRequest(loadCPU()-self0, r.value, *dur+time.Second)
				r.round = round
				rows = append(rows, r)
			}
			for _, i := range order(round) {
				if !want(modeKey(i)) {
					continue
				}
				e := egs[i]
				cpu0, self0 := cpuTime(e.pid()), loadCPU()
				stop := profile(*perfDir, "c", names[i], e.pid(), *dur)
				r := load("c", names[i]+" (intercepted, substituted)", e.proxyURL("benchc"), small, "Bearer "+e.placeholder, e.pool, *conc, *dur)
				stop()
				r.cpu = perRequest(cpuTime(e.pid())-cpu0, r.value, *dur+time.Second) // load warms up for 1 s
				r.loadCPU = perRequest(loadCPU()-self0, r.value, *dur+time.Second)
				r.round = round
				rows = append(rows, r)
			}
		}
		// (a) plain HTTP forward proxying, wrk.
		a := func(mode, proxy, auth string, pid int) {
			cpu0, self0 := cpuTime(pid), loadCPU()
			stop := profile(*perfDir, "a", mode, pid, *dur)
			r, err := wrk(dir, proxy, target, auth, *conc, *dur)
			stop()
			self := loadCPU() - self0 // the upstream (and, for the reverse proxy, the proxy too)
			if err != nil {
				rows = append(rows, row{section: "a", mode: mode, round: round, note: err.Error()})
				return
			}
			r.section, r.mode, r.round = "a", mode, round
			r.cpu = perRequest(cpuTime(pid)-cpu0, r.value, *dur)
			r.loadCPU = perRequest(r.loadCPU+self, r.value, *dur)
			rows = append(rows, r)
		}
		if has("a") {
			if want("direct") {
				a("direct", "", "", 0)
			}
			if sqErr == nil && want("squid") {
				a("squid", sq.addr, "", sq.cmd.Process.Pid)
			}
			if tpErr == nil && want("tinyproxy") {
				a("tinyproxy", tp.addr, "", tp.cmd.Process.Pid)
			}
			if want("revproxy") {
				a("httputil.ReverseProxy", rp, "", 0)
			}
			for _, i := range order(round) {
				if want(modeKey(i)) {
					a(names[i], egs[i].proxy, egs[i].basic("bench"), egs[i].pid())
				}
			}
		}
		if has("b") {
			if want("direct") {
				b(round, "direct", "", 0)
			}
			if sqErr == nil && want("squid") {
				b(round, "squid", "http://"+sq.addr, 0)
			}
			if tpErr == nil && want("tinyproxy") {
				b(round, "tinyproxy", "http://"+tp.addr, 0)
			}
			for _, i := range order(round) {
				if want(modeKey(i)) {
					b(round, names[i], egs[i].proxyURL("bench"), egs[i].pid())
				}
			}
		}
	}

	var trs []transparentResult
	if has("transparent") {
		trs, err = transparentRounds(dir, eg, cPort, *rounds, *conc, *dur)
		if err != nil {
			return err
		}
	}

	pass := true
	if len(trs) > 0 {
		pass = reportTransparent(trs, *conc, *dur)
	}
	if len(rows) > 0 {
		pass = report(rows, *conc, *dur, *bigMB, sqErr, tpErr)
	}
	if len(sses) > 0 {
		pass = reportSSE(sses, *sseEvents, *sseGap, *sseTTFB) && pass
	}
	if len(bulks) > 0 {
		pass = reportBulk(bulks, *bulkMiB, *bulkWrite, strings.Split(*bulkBodies, ",")) && pass
	}
	if streams != nil {
		pass = reportStreams(*streams, *streamsGap) && pass
	}
	if !pass {
		return errors.New("a target was missed (by the median over the rounds)")
	}
	return nil
}

// profile starts `perf record -e cpu-clock -g` on pid for d into
// dir/<section>-<mode>.data when dir is set, and returns a function that
// waits for it. perf's own CPU is not counted in pid's.
func profile(dir, section, mode string, pid int, d time.Duration) (wait func()) {
	if dir == "" || pid == 0 {
		return func() {}
	}
	name := strings.NewReplacer(" ", "_", "(", "", ")", "", ",", "").Replace(section + "-" + mode)
	cmd := exec.Command("perf", "record", "-q", "-e", "cpu-clock", "-g", "-p", strconv.Itoa(pid), "-o", filepath.Join(dir, name+".data"),
		"--", "sleep", strconv.Itoa(int(d.Seconds())))
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "perf:", err)
		return func() {}
	}
	return func() { _ = cmd.Wait() }
}

func serve(h http.Handler) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go (&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}).Serve(l)
	return l.Addr().String(), nil
}

// localIP returns the first non-loopback IPv4 address of this machine, or
// 127.0.0.1 when there is none.
func localIP() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return "127.0.0.1"
}
