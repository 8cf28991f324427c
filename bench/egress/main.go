// Command egress benchmarks egressd's mediated egress.request against a
// loopback upstream, side by side in one run with the same requests sent
// directly by a Go client (the floor) and through a bare
// httputil.ReverseProxy (figures: bench/RESULTS.md, "egressd native op vs
// direct and a bare reverse proxy"). It builds egressd from
// ../../cmd/egressd, runs it under a temporary -root, registers a bundle
// without credentials that may reach the upstream, and prints req/s, p50/p99
// and the ratios. Run it from this directory: `go run .`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/rpc"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/egress:", err)
		os.Exit(1)
	}
}

type result struct {
	name     string
	n        int
	elapsed  time.Duration
	p50, p99 time.Duration
}

func (r result) rps() float64 { return float64(r.n) / r.elapsed.Seconds() }

func run() error {
	conc := flag.Int("c", 32, "concurrent clients")
	dur := flag.Duration("d", 5*time.Second, "measured time per mode (after 1 s of warm-up)")
	size := flag.Int("size", 64, "response body bytes")
	fsync := flag.Bool("fsync", false, "also run egressd with -audit-fsync always (its production default)")
	flag.Parse()

	body := make([]byte, *size)
	for i := range body {
		body[i] = 'x'
	}
	up, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write(body)
	}))
	if err != nil {
		return err
	}
	target, _ := url.Parse("http://" + up)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 2 * *conc}
	proxy, err := serve(rp)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * *conc}}
	get := func(base string) func(int) error {
		return func(int) error {
			resp, err := client.Get(base + "/bench")
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return nil
		}
	}
	results := []result{
		measure("direct", *conc, *dur, get("http://"+up)),
		measure("reverse-proxy", *conc, *dur, get("http://"+proxy)),
	}
	modes := []string{"never"}
	if *fsync {
		modes = append(modes, "always")
	}
	for _, m := range modes {
		r, err := benchEgressd(up, m, *conc, *dur)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	report(results, *conc, *size)
	return nil
}

func serve(h http.Handler) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go http.Serve(l, h)
	return l.Addr().String(), nil
}

// measure runs fn from conc goroutines: 1 s of warm-up, then dur measured.
func measure(name string, conc int, dur time.Duration, fn func(worker int) error) result {
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	run := func(d time.Duration, record bool) time.Duration {
		var wg sync.WaitGroup
		start := time.Now()
		stop := start.Add(d)
		for w := range conc {
			wg.Go(func() {
				var mine []time.Duration
				for time.Now().Before(stop) {
					t0 := time.Now()
					if err := fn(w); err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
						return
					}
					mine = append(mine, time.Since(t0))
				}
				if record {
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	run(time.Second, false)
	elapsed := run(dur, true)
	if firstErr != nil {
		fmt.Fprintf(os.Stderr, "%s: error: %v\n", name, firstErr)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[int(p*float64(len(lat)-1))]
	}
	return result{name: name, n: len(lat), elapsed: elapsed, p50: pct(0.50), p99: pct(0.99)}
}

// benchEgressd builds and starts egressd, registers a bundle allowed to
// reach up, and measures egress.request from conc clients (one connection
// each: an rpc.Client sends one request at a time).
func benchEgressd(up, fsync string, conc int, dur time.Duration) (result, error) {
	root, err := os.MkdirTemp("/tmp", "hkb")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(root)
	bin := filepath.Join(root, "egressd")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "..", "cmd", "egressd")
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		return result{}, fmt.Errorf("building egressd: %v\n%s", err, out)
	}
	// A free proxy port: the default 127.0.0.1:4750 may be taken by another
	// egressd on a shared machine.
	cmd := exec.Command(bin, "-root", root, "-audit-fsync", fsync, "-log-level", "info", "-proxy-address", "127.0.0.1:0")
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	sock := filepath.Join(root, "run", "egressd", "api.sock")
	admin := rpc.NewClient(sock, 5*time.Second)
	defer admin.Close()
	ctx := context.Background()
	for i := 0; ; i++ {
		if _, err := healthapi.Get(ctx, admin); err == nil {
			break
		} else if i > 200 {
			return result{}, errors.New("egressd did not start: " + err.Error())
		}
		time.Sleep(25 * time.Millisecond)
	}
	api := egressdapi.NewClient(admin)
	_, err = api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "bench", ProxyToken: "benchbenchbenchbenchbenchbenchbenchbenchben",
		Policy: egressdapi.Policy{Allow: []egressdapi.AllowRule{{Origin: "http://" + up}}}})
	if err != nil {
		return result{}, err
	}
	clients := make([]*egressdapi.Client, conc)
	for i := range clients {
		c := rpc.NewClient(sock, 10*time.Second)
		defer c.Close()
		clients[i] = egressdapi.NewClient(c)
	}
	req := egressdapi.RequestRequest{Invocation: "bench", Method: "GET", URL: "http://" + up + "/bench"}
	return measure("egressd (audit fsync "+fsync+")", conc, dur, func(w int) error {
		r := req
		_, err := clients[w].Request(ctx, &r)
		return err
	}), nil
}

func report(rs []result, conc, size int) {
	fmt.Printf("bench/egress: %d concurrent clients, GET with a %d-byte response from a loopback upstream\n\n", conc, size)
	fmt.Printf("%-28s %10s %10s %10s %12s %12s\n", "mode", "req/s", "p50", "p99", "p50/direct", "p50/revproxy")
	direct, rp := rs[0], rs[1]
	for _, r := range rs {
		fmt.Printf("%-28s %10.0f %10s %10s %11.2fx %11.2fx\n", r.name, r.rps(), r.p50.Round(time.Microsecond),
			r.p99.Round(time.Microsecond), ratio(r.p50, direct.p50), ratio(r.p50, rp.p50))
	}
	fmt.Println("\ntargets: egressd p50 <= 3x direct, and within 1.3x of the bare reverse proxy")
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "FAIL"
	}
	for _, r := range rs[2:] {
		fmt.Printf("%s: p50 <= 3x direct: %s (%.2fx); within 1.3x of the reverse proxy: %s (%.2fx)\n", r.name,
			verdict(ratio(r.p50, direct.p50) <= 3), ratio(r.p50, direct.p50),
			verdict(ratio(r.p50, rp.p50) <= 1.3), ratio(r.p50, rp.p50))
	}
	fmt.Printf("(the bare reverse proxy alone is %.2fx direct here: a second hop on this machine starts there)\n", ratio(rp.p50, direct.p50))
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
