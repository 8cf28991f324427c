package main

import (
	"context"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"hostkit.dev/lib/api/healthapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/rpc"
)

// The transparent section (docs/supervisord.md "Transparent egress") compares, side by side in one
// run, the same intercepted, substituted requests to the (c) upstream
// from an isolated supervisord instance through the proxy variables
// (the bridge on 127.0.0.1:4750, the client's own CONNECT) and through
// the transparent path (a plain connect to the name's synthetic address,
// the namespace's redirect rule, the relay's CONNECT): each round
// provisions one instance per mode, running this binary as the client
// (-transparent-client), alternating which mode goes first. It also
// reports the bridge's DNS answer time (UDP, 127.0.0.1:53 in the
// namespace). It needs root (a network namespace, agents under their
// own uid) and builds supervisord from the tree.

// transparentResult is what the in-namespace client prints, one JSON line.
type transparentResult struct {
	Mode    string  `json:"mode"`
	RPS     float64 `json:"rps"`
	P50US   int64   `json:"p50_us"`
	P99US   int64   `json:"p99_us"`
	DNSP50  int64   `json:"dns_p50_us"` // transparent mode only
	DNSP99  int64   `json:"dns_p99_us"`
	Err     string  `json:"err,omitempty"`
	egCPU   time.Duration
	holdCPU time.Duration
	round   int
}

// transparentClient is -transparent-client MODE: inside the instance, it
// loads target for dur with conc connections, through HTTPS_PROXY (mode
// proxy) or ignoring it (mode transparent, Go's own resolver), and prints
// a transparentResult.
func transparentClient(mode, target string, conc int, dur time.Duration) error {
	pool, err := x509.SystemCertPool() // SSL_CERT_FILE: egressd's bundle
	if err != nil {
		return err
	}
	net.DefaultResolver.PreferGo = true // ask the namespace's resolver, as a static binary does
	res := transparentResult{Mode: mode}
	if mode == "transparent" {
		res.DNSP50, res.DNSP99 = dnsLatency("up.test", 2000)
	}
	proxy := ""
	if mode == "proxy" {
		proxy = os.Getenv("HTTPS_PROXY")
	}
	r := load("t", mode, proxy, target, "Bearer "+os.Getenv("API_KEY"), pool, conc, dur)
	res.RPS, res.P50US, res.P99US, res.Err = r.value, r.p50.Microseconds(), r.p99.Microseconds(), r.note
	return json.NewEncoder(os.Stdout).Encode(res)
}

// dnsLatency times n A queries for name over one UDP socket to the
// namespace's resolver and returns the p50 and p99, in µs (-1: failed).
func dnsLatency(name string, n int) (int64, int64) {
	c, err := net.Dial("udp", "127.0.0.1:53")
	if err != nil {
		return -1, -1
	}
	defer c.Close()
	q := []byte{0x42, 0x42, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0}
	for l := range strings.SplitSeq(name, ".") {
		q = append(append(q, byte(len(l))), l...)
	}
	q = binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(append(q, 0), 1), 1)
	buf := make([]byte, 512)
	lat := make([]time.Duration, 0, n)
	c.SetDeadline(time.Now().Add(60 * time.Second))
	for range n {
		t0 := time.Now()
		if _, err := c.Write(q); err != nil {
			return -1, -1
		}
		if k, err := c.Read(buf); err != nil || k < 12 || buf[3]&0x0f != 0 {
			return -1, -1
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	return lat[n/2].Microseconds(), lat[n*99/100].Microseconds()
}

// supervisordProc is a supervisord on egressd's root, as the client of
// its secretd and egressd.
type supervisordProc struct {
	p    *proc
	c    *api.Client
	root string
}

// startSupervisord builds supervisord from tree and starts it on root
// (egressd's), which it makes traversable: the agents, under their own
// uid, read egressd's CA bundle below it.
func startSupervisord(dir, tree, root string) (*supervisordProc, error) {
	bin, err := build(dir, tree, "supervisord", "")
	if err != nil {
		return nil, err
	}
	for d := root; d != "/" && d != "/tmp"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	cmd := exec.Command(bin, "-root", root, "-host-runtime-enabled", "yes")
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &supervisordProc{p: &proc{cmd: cmd}, root: root}
	rc := rpc.NewClient(filepath.Join(root, "run", "supervisord", "api.sock"), 30*time.Second)
	for n := 0; ; n++ {
		if _, err := healthapi.Get(context.Background(), rc); err == nil {
			break
		} else if n > 800 {
			s.p.stop()
			return nil, errors.New("supervisord did not start: " + err.Error())
		}
		time.Sleep(25 * time.Millisecond)
	}
	s.c = api.NewClient(rc)
	return s, nil
}

// runTransparent provisions one isolated instance running the client in
// mode, waits for it to end and returns its result with egressd's and
// the holder's CPU per request.
func (s *supervisordProc) runTransparent(client, mode, target string, cPort string, egPID, conc int, dur time.Duration) transparentResult {
	ctx := context.Background()
	fail := func(err error) transparentResult { return transparentResult{Mode: mode, Err: err.Error()} }
	cpu0 := cpuTime(egPID)
	in, err := s.c.Provision(ctx, &api.ProvisionRequest{Command: []string{client, "-transparent-client", mode, "-c", strconv.Itoa(conc), "-d", dur.String(),
		"-transparent-target", target}, WorkingDir: "/tmp", Start: true, StopTimeoutMS: 1000,
		Network:     &api.Network{Mode: api.NetworkIsolated, Allow: []string{"https://up.test:" + cPort}},
		Credentials: []api.CredentialSpec{{Credential: "bench", Env: "API_KEY"}}})
	if err != nil {
		return fail(err)
	}
	defer s.c.Destroy(ctx, in.InstanceID)
	holder := s.holderPID(in.InstanceID)
	var hold time.Duration
	for end := time.Now().Add(dur + 2*time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if h := cpuTime(holder); h > 0 {
			hold = h // the holder's last reading before it ends with its agent
		}
		st, err := s.c.Status(ctx, in.InstanceID)
		if err == nil && st.State != api.StateRunning && st.State != api.StateCreated {
			break
		}
		if time.Now().After(end) {
			return fail(errors.New("the client did not end"))
		}
	}
	eg := cpuTime(egPID) - cpu0
	l, err := s.c.Logs(ctx, &api.LogsRequest{InstanceID: in.InstanceID})
	if err != nil {
		return fail(err)
	}
	var res transparentResult
	for line := range strings.SplitSeq(string(l.Data), "\n") {
		if json.Unmarshal([]byte(strings.TrimSpace(line)), &res) == nil && res.Mode != "" {
			res.egCPU = perRequest(eg, res.RPS, dur+time.Second)
			res.holdCPU = perRequest(hold, res.RPS, dur+time.Second)
			return res
		}
	}
	return fail(fmt.Errorf("no result in the client's output: %q", l.Data))
}

// holderPID reads instance id's holder from its metadata.json (the API
// does not show it), or 0.
func (s *supervisordProc) holderPID(id string) int {
	var md struct {
		Holder struct {
			PID int `json:"pid"`
		} `json:"holder"`
	}
	b, _ := os.ReadFile(filepath.Join(s.root, "state", "supervisord", "instances", id, "metadata.json"))
	_ = json.Unmarshal(b, &md)
	return md.Holder.PID
}

// transparentRounds runs the section: rounds × (proxy, transparent).
func transparentRounds(dir string, eg *egressdProc, cPort string, rounds, conc int, dur time.Duration) ([]transparentResult, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("transparent: needs root (a network namespace; agents under their own uid)")
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(self)
	if err != nil {
		return nil, err
	}
	pub := filepath.Join(dir, "pub")
	if err := os.MkdirAll(pub, 0o755); err != nil {
		return nil, err
	}
	client := filepath.Join(pub, "client")
	if err := os.WriteFile(client, b, 0o755); err != nil {
		return nil, err
	}
	sv, err := startSupervisord(dir, filepath.Join("..", ".."), eg.root)
	if err != nil {
		return nil, err
	}
	defer sv.p.stop()
	target := "https://up.test:" + cPort + "/small"
	var out []transparentResult
	for round := range rounds {
		modes := []string{"proxy", "transparent"}
		if round%2 == 1 {
			slices.Reverse(modes)
		}
		for _, m := range modes {
			r := sv.runTransparent(client, m, target, cPort, eg.pid(), conc, dur)
			r.round = round
			out = append(out, r)
		}
	}
	return out, nil
}

// reportTransparent prints the section's table and verdict: transparent
// >= 0.95x the proxy variables' req/s by the median ratio over the
// rounds, and the DNS answer's p50 <= 100 µs by the median.
func reportTransparent(rs []transparentResult, conc int, dur time.Duration) bool {
	fmt.Printf("\ntransparent: isolated instance → real egressd, intercepted and substituted, %d connections, %s per mode\n", conc, dur)
	fmt.Printf("\n| round | path | req/s | p50 | p99 | egressd CPU/req | holder CPU/req | DNS p50 | DNS p99 | note |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	byRound := map[int]map[string]float64{}
	var dns []int64
	for _, r := range rs {
		if byRound[r.round] == nil {
			byRound[r.round] = map[string]float64{}
		}
		byRound[r.round][r.Mode] = r.RPS
		d50, d99 := "—", "—"
		if r.Mode == "transparent" && r.DNSP50 >= 0 && r.Err == "" {
			d50, d99 = fmt.Sprintf("%dµs", r.DNSP50), fmt.Sprintf("%dµs", r.DNSP99)
			dns = append(dns, r.DNSP50)
		}
		fmt.Printf("| %d | %s | %.0f | %dµs | %dµs | %dµs | %dµs | %s | %s | %s |\n", r.round+1, r.Mode, r.RPS, r.P50US, r.P99US,
			r.egCPU.Microseconds(), r.holdCPU.Microseconds(), d50, d99, r.Err)
	}
	var ratios []float64
	for i := 0; i < len(byRound); i++ {
		if p, t := byRound[i]["proxy"], byRound[i]["transparent"]; p > 0 && t > 0 {
			ratios = append(ratios, t/p)
		}
	}
	if len(ratios) == 0 {
		fmt.Println("transparent: no round measured both paths: FAIL")
		return false
	}
	slices.Sort(ratios)
	slices.Sort(dns)
	med := ratios[len(ratios)/2]
	if len(ratios)%2 == 0 {
		med = (ratios[len(ratios)/2-1] + ratios[len(ratios)/2]) / 2
	}
	list := make([]string, len(ratios))
	for i, x := range ratios {
		list[i] = fmt.Sprintf("%.3f", x)
	}
	pass := med >= 0.95
	verdict := map[bool]string{true: "PASS", false: "FAIL"}
	fmt.Printf("transparent / proxy variables per round (sorted): %s — median %.3f×, target >= 0.95×: %s\n", strings.Join(list, " "), med, verdict[pass])
	if len(dns) > 0 {
		d := dns[len(dns)/2]
		fmt.Printf("bridge DNS answer p50 (median over rounds): %dµs, target <= 100µs: %s\n", d, verdict[d <= 100])
		pass = pass && d <= 100
	}
	return pass
}

// transparentFlags are the client mode's flags (parsed with the rest).
func transparentFlags() (mode, target *string) {
	return flag.String("transparent-client", "", "internal: be the in-namespace client of the transparent section in this mode (proxy or transparent)"),
		flag.String("transparent-target", "", "internal: the transparent client's URL")
}
