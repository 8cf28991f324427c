package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

type testCA struct {
	cert tls.Certificate
	pool *x509.CertPool
	pem  []byte
}

// newCA makes a CA and a leaf for 127.0.0.1 signed by it.
func newCA() *testCA {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	caCert, _ := x509.ParseCertificate(der)
	lkey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"up.test"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	lder, _ := x509.CreateCertificate(rand.Reader, leaf, caCert, &lkey.PublicKey, key)
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return &testCA{cert: tls.Certificate{Certificate: [][]byte{lder}, PrivateKey: lkey}, pool: pool,
		pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// serveTLS serves h over HTTPS (HTTP/1.1 only, like the proxies' inside).
func serveTLS(ca *testCA, addr string, h http.Handler) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	tl := tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{ca.cert}, NextProtos: []string{"http/1.1"}})
	go (&http.Server{Handler: h}).Serve(tl)
	return l.Addr().String(), nil
}

var (
	wrkRPS = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkPct = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([0-9.]+)(us|ms|s)`)
)

// wrk runs wrk against target, through proxy when set (absolute-form path
// from a Lua script, with Proxy-Authorization when auth is set).
func wrk(dir, proxy, target, auth string, conc int, dur time.Duration) (row, error) {
	bin, err := exec.LookPath("wrk")
	if err != nil {
		return row{}, fmt.Errorf("wrk is not installed")
	}
	args := []string{"-t", "2", "-c", strconv.Itoa(conc), "-d", fmt.Sprintf("%ds", int(dur.Seconds())), "--latency"}
	url := target
	if proxy != "" {
		script := filepath.Join(dir, "abs.lua")
		lua := fmt.Sprintf("wrk.path = %q\n", target)
		if auth != "" {
			lua += fmt.Sprintf("wrk.headers[\"Proxy-Authorization\"] = %q\n", auth)
		}
		if err := os.WriteFile(script, []byte(lua), 0o644); err != nil {
			return row{}, err
		}
		args = append(args, "-s", script)
		url = "http://" + proxy + "/"
	}
	cmd := exec.Command(bin, append(args, url)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return row{}, fmt.Errorf("wrk: %v: %s", err, out)
	}
	wrkCPU := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	m := wrkRPS.FindSubmatch(out)
	if m == nil {
		return row{}, fmt.Errorf("wrk output not understood: %s", out)
	}
	r := row{loadCPU: wrkCPU}
	r.value, _ = strconv.ParseFloat(string(m[1]), 64)
	for _, p := range wrkPct.FindAllSubmatch(out, -1) {
		d, _ := time.ParseDuration(string(p[2]) + string(p[3]))
		if string(p[1]) == "50" {
			r.p50 = d
		} else {
			r.p99 = d
		}
	}
	if regexp.MustCompile(`Non-2xx or 3xx responses`).Match(out) {
		r.note = "non-2xx responses"
	}
	return r, nil
}

// upTest is where a direct client dials "up.test" (the (c) upstream).
var upTest string

func client(proxy string, roots *x509.CertPool, conns int) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, MaxIdleConnsPerHost: conns, DisableCompression: true}
	if upTest != "" {
		d := &net.Dialer{}
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if strings.HasPrefix(addr, "up.test:") {
				addr = upTest
			}
			return d.DialContext(ctx, network, addr)
		}
	}
	if proxy != "" {
		u, _ := url.Parse(proxy)
		tr.Proxy = http.ProxyURL(u)
	}
	return &http.Client{Transport: tr}
}

// download fetches target (size MiB) three times over one connection and
// reports the best MB/s (1 MB = 2^20 bytes).
func download(section, mode, proxy, target string, roots *x509.CertPool, size int) row {
	c := client(proxy, roots, 1)
	best := 0.0
	for range 3 {
		start := time.Now()
		resp, err := c.Get(target)
		if err != nil {
			return row{section: section, mode: mode, note: err.Error()}
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n != int64(size)<<20 {
			return row{section: section, mode: mode, note: fmt.Sprintf("got %d bytes, status %d", n, resp.StatusCode)}
		}
		best = max(best, float64(size)/time.Since(start).Seconds())
	}
	return row{section: section, mode: mode, value: best}
}

// load sends GET target with Authorization auth from conc goroutines for
// dur (after 1 s of warm-up) and reports req/s, p50 and p99. It closes
// its connections at the end: through a proxy each is a tunnel that the
// proxy counts against the invocation's bound (egressd's
// MaxTunnelsPerInvocation, 128) until its idle timeout (120 s), so
// rounds that left theirs open got 503 server.busy a few rounds later.
func load(section, mode, proxy, target, auth string, roots *x509.CertPool, conc int, dur time.Duration) row {
	c := client(proxy, roots, conc)
	defer c.CloseIdleConnections()
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	runFor := func(d time.Duration, record bool) time.Duration {
		var wg sync.WaitGroup
		start := time.Now()
		for range conc {
			wg.Go(func() {
				var mine []time.Duration
				for time.Since(start) < d {
					t0 := time.Now()
					req, _ := http.NewRequest("GET", target, nil)
					req.Header.Set("Authorization", auth)
					resp, err := c.Do(req)
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							err = fmt.Errorf("status %d", resp.StatusCode)
						}
					}
					if err != nil {
						mu.Lock()
						firstErr = err
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
	runFor(time.Second, false)
	elapsed := runFor(dur, true)
	r := row{section: section, mode: mode}
	if firstErr != nil {
		r.note = firstErr.Error()
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		r.value = float64(len(lat)) / elapsed.Seconds()
		r.p50, r.p99 = lat[len(lat)/2], lat[int(0.99*float64(len(lat)-1))]
	}
	return r
}

// report prints the table and the summary; it reports whether every
// target measured passed.
func report(rows []row, conc int, dur time.Duration, bigMB int, sqErr, tpErr error) bool {
	fmt.Printf("bench/proxy: %d connections, %s per mode; (b) %d MiB download, best of 3\n", conc, dur, bigMB)
	if sqErr != nil {
		fmt.Println("squid skipped:", sqErr)
	}
	if tpErr != nil {
		fmt.Println("tinyproxy skipped:", tpErr)
	}
	// Ratios are against direct and squid of the same section and round.
	base := map[string]float64{}
	key := func(r row, mode string) string { return fmt.Sprint(r.section, r.round, mode) }
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].section != rows[j].section {
			return rows[i].section < rows[j].section
		}
		return rows[i].round < rows[j].round
	})
	for _, r := range rows {
		if r.mode == "direct" || r.mode == "squid" {
			base[key(r, r.mode)] = r.value
		}
	}
	unit := map[string]string{"a": "req/s", "b": "MB/s", "c": "req/s"}
	fmt.Printf("\n| test | round | mode | value | p50 | p99 | CPU/req | load CPU/req | / direct | / squid | note |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		rs := "—"
		if s := base[key(r, "squid")]; s > 0 {
			rs = fmt.Sprintf("%.2f×", r.value/s)
		}
		p50, p99 := "—", "—"
		if r.p50 > 0 {
			p50, p99 = r.p50.Round(time.Microsecond).String(), r.p99.Round(time.Microsecond).String()
		}
		cpu := "—"
		if r.cpu > 0 {
			cpu = fmt.Sprintf("%dµs", r.cpu.Microseconds())
		}
		rd := "—"
		if d := base[key(r, "direct")]; d > 0 {
			rd = fmt.Sprintf("%.2f×", r.value/d)
		}
		lcpu := "—"
		if r.loadCPU > 0 {
			lcpu = fmt.Sprintf("%dµs", r.loadCPU.Microseconds())
		}
		fmt.Printf("| (%s) | %d | %s | %.0f %s | %s | %s | %s | %s | %s | %s | %s |\n", r.section, r.round+1, r.mode, r.value, unit[r.section], p50, p99,
			cpu, lcpu, rd, rs, r.note)
	}
	fmt.Println("\ntargets: (a) egressd >= squid req/s; (b) egressd >= 0.8x direct MB/s; (c) egressd >= 0.3x direct req/s")
	return summarize(rows, base, key)
}

// summarize prints, for each target, egressd's ratio in every round, the
// median of them, how many rounds met the target and PASS or FAIL by the
// median; it reports whether every target measured passed.
func summarize(rows []row, base map[string]float64, key func(row, string) string) (pass bool) {
	pass = true
	targets := []struct {
		section, against string
		line             float64
	}{{"a", "squid", 1}, {"b", "direct", 0.8}, {"c", "direct", 0.3}}
	for _, t := range targets {
		var ratios []float64
		for _, r := range rows {
			if d := base[key(r, t.against)]; r.section == t.section && strings.HasPrefix(r.mode, "egressd") &&
				!strings.HasPrefix(r.mode, "egressd (base)") && r.value > 0 && d > 0 {
				ratios = append(ratios, r.value/d)
			}
		}
		if len(ratios) == 0 {
			continue
		}
		met, list := 0, make([]string, len(ratios))
		for i, x := range ratios {
			list[i] = fmt.Sprintf("%.2f", x)
			if x >= t.line {
				met++
			}
		}
		sort.Float64s(ratios)
		med := ratios[len(ratios)/2]
		if len(ratios)%2 == 0 {
			med = (ratios[len(ratios)/2-1] + ratios[len(ratios)/2]) / 2
		}
		verdict := "PASS"
		if med < t.line {
			verdict, pass = "FAIL", false
		}
		fmt.Printf("(%s) egressd / %s per round: %s — median %.2f×, %d of %d rounds >= %.1f×: %s\n",
			t.section, t.against, strings.Join(list, " "), med, met, len(ratios), t.line, verdict)
	}
	return pass
}
