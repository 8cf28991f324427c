// Command proxy benchmarks egressd's proxy face (issue 5) side by side, in
// one run, against the same loopback upstreams: (a) plain-HTTP forward
// proxying req/s with wrk (absolute-form request path) — direct, squid,
// tinyproxy, a bare httputil.ReverseProxy and egressd; (b) HTTPS through an
// opaque CONNECT tunnel, MB/s for a large download — direct, squid,
// tinyproxy and egressd; (c) intercepted HTTPS with placeholder
// substitution vs direct HTTPS req/s. squid and tinyproxy run from config
// files generated into a temporary directory (caching and access logs
// off); a missing one is reported and skipped. egressd and secretd are
// built from ../../cmd. Run from this directory: `GOWORK=off go run .`.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
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
	value         float64 // req/s or MB/s
	p50, p99      time.Duration
	cpu           time.Duration // the proxy process's CPU time per request (0: not measured)
	note          string
}

func run() error {
	conc := flag.Int("c", 32, "concurrent connections for (a) and (c)")
	dur := flag.Duration("d", 5*time.Second, "measured time per mode")
	bigMB := flag.Int("big", 256, "download size for (b), MiB")
	sections := flag.String("sections", "abc", "which of (a), (b), (c) to run")
	cIP := flag.String("c-ip", "", "address (c)'s upstream listens on (default: this machine's first non-loopback IPv4); 127.0.0.1 makes every (c) request go through egressd's loopback owner check")
	flag.Parse()
	dir, err := os.MkdirTemp("/tmp", "hkpb")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	body := make([]byte, 64)
	plain, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	if err != nil {
		return err
	}
	ca := newCA()
	big := make([]byte, 1<<20)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", fmt.Sprint(*bigMB<<20))
			for range *bigMB {
				w.Write(big)
			}
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "bad auth", 401)
			return
		}
		w.Write(body)
	})
	tlsUp, err := serveTLS(ca, "127.0.0.1:0", handler)
	if err != nil {
		return err
	}
	// (c)'s upstream listens on a non-loopback local address, reached as
	// up.test through egressd's host map, like a real credential
	// destination (no loopback owner check), unless -c-ip says otherwise.
	if *cIP == "" {
		*cIP = localIP()
	}
	cAddr, err := serveTLS(ca, net.JoinHostPort(*cIP, "0"), handler)
	if err != nil {
		return err
	}
	_, cPort, _ := net.SplitHostPort(cAddr)
	upTest = cAddr
	caFile := dir + "/upstream-ca.pem"
	if err := os.WriteFile(caFile, ca.pem, 0o600); err != nil {
		return err
	}

	eg, err := startEgressd(dir, plain, tlsUp, "up.test:"+cPort, cAddr, caFile)
	if err != nil {
		return err
	}
	defer eg.stop()
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

	var rows []row
	// (c) first: with -c-ip 127.0.0.1 its upstream is a loopback credential
	// destination, whose listener's owner egressd checks on every request,
	// and (a) leaves tens of thousands of TIME_WAIT sockets behind (the
	// /proc/net/tcp reader's cost grew with them; sock_diag's does not).
	small := "https://up.test:" + cPort + "/small"
	if strings.Contains(*sections, "c") {
		rows = append(rows, load("c", "direct", "", small, "Bearer "+secret, ca.pool, *conc, *dur))
		cpu0 := cpuTime(eg.pid())
		r := load("c", "egressd (intercepted, substituted)", eg.proxyURL("benchc"), small, "Bearer "+eg.placeholder, eg.pool, *conc, *dur)
		r.cpu = perRequest(cpuTime(eg.pid())-cpu0, r.value, *dur+time.Second) // load warms up for 1 s
		rows = append(rows, r)
	}
	// (a) plain HTTP forward proxying, wrk.
	target := "http://" + plain + "/bench"
	a := func(mode, proxy, auth string, pid int) {
		cpu0 := cpuTime(pid)
		r, err := wrk(dir, proxy, target, auth, *conc, *dur)
		if err != nil {
			rows = append(rows, row{section: "a", mode: mode, note: err.Error()})
			return
		}
		r.section, r.mode = "a", mode
		r.cpu = perRequest(cpuTime(pid)-cpu0, r.value, *dur)
		rows = append(rows, r)
	}
	if strings.Contains(*sections, "a") {
		a("direct", "", "", 0)
		if sqErr == nil {
			a("squid", sq.addr, "", sq.cmd.Process.Pid)
		}
		if tpErr == nil {
			a("tinyproxy", tp.addr, "", tp.cmd.Process.Pid)
		}
		a("httputil.ReverseProxy", rp, "", 0)
		a("egressd", eg.proxy, eg.basic("bench"), eg.pid())
	}

	// (b) opaque CONNECT tunnel, MB/s.
	bigURL := "https://" + tlsUp + "/big"
	b := func(mode, proxy string) {
		rows = append(rows, download("b", mode, proxy, bigURL, ca.pool, *bigMB))
	}
	if strings.Contains(*sections, "b") {
		b("direct", "")
		if sqErr == nil {
			b("squid", "http://"+sq.addr)
		}
		if tpErr == nil {
			b("tinyproxy", "http://"+tp.addr)
		}
		b("egressd", eg.proxyURL("bench"))
	}

	report(rows, *conc, *dur, *bigMB, sqErr, tpErr)
	return nil
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
