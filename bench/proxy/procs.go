package main

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/rpc"
)

const (
	secret = "bench-secret-value-0123456789"
	token  = "benchbenchbenchbenchbenchbenchbenchbenchben"
)

type proc struct {
	cmd  *exec.Cmd
	addr string
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// egressdProc is egressd (with secretd) registered with two invocations:
// "bench" (no credentials; may reach both upstreams) and "benchc" (one
// credential for the HTTPS upstream, header:Authorization "Bearer {}"),
// and as many more like "benchc" as the streams mode asks for
// ("benchs0", "benchs1", ...: egressd bounds each invocation's tunnels
// and in-flight requests, see streamsPerInvocation).
type egressdProc struct {
	procs       []*proc
	proxy       string
	placeholder string
	streamInv   []invocation
	pool        *x509.CertPool
	pprof       string // net/http/pprof's address in the bench's pprof build, or ""
	root        string // the daemons' -root
}

// invocation is a registered invocation with the credential and its
// placeholder.
type invocation struct{ name, placeholder string }

func (e *egressdProc) stop() {
	for i := len(e.procs) - 1; i >= 0; i-- {
		e.procs[i].stop()
	}
}

func (e *egressdProc) basic(inv string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(inv+":"+token))
}

func (e *egressdProc) proxyURL(inv string) string {
	return "http://" + inv + ":" + token + "@" + e.proxy
}

// build builds tree/cmd/name into dir, with go build's -overlay file
// overlay when set.
func build(dir, tree, name, overlay string) (string, error) {
	bin := filepath.Join(dir, name)
	args := []string{"build", "-o", bin}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = filepath.Join(tree, "cmd", name)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %v\n%s", name, err, out)
	}
	return bin, nil
}

// egressdOpts are the bench's choices for one egressd.
type egressdOpts struct {
	logLevel string   // -log-level
	nInv     int      // extra credentialed invocations for the streams section
	pprof    bool     // build with pprofOverlay and serve net/http/pprof on a free loopback port (e.pprof)
	env      []string // added to egressd's environment (e.g. GOGC=100)
}

// startEgressd builds secretd and egressd from tree (the repository's
// root) into dir and starts them with their root under dir.
func startEgressd(dir, tree, plain, tlsUp, cHost, cAddr, caFile string, o egressdOpts) (*egressdProc, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	root := filepath.Join(dir, "r")
	e := &egressdProc{root: root}
	var bins [2]string
	overlay := ""
	if o.pprof {
		var err error
		if overlay, err = pprofOverlay(dir, tree); err != nil {
			return nil, err
		}
		if e.pprof, err = freePort(); err != nil {
			return nil, err
		}
	}
	for i, n := range []string{"secretd", "egressd"} {
		ov := overlay
		if n == "secretd" {
			ov = ""
		}
		b, err := build(dir, tree, n, ov)
		if err != nil {
			return nil, err
		}
		bins[i] = b
	}
	free, err := freePort()
	if err != nil {
		return nil, err
	}
	e.proxy = free
	ctx := context.Background()
	for i, args := range [][]string{{"-root", root}, {"-root", root, "-audit-fsync", "never", "-log-level", o.logLevel,
		"-proxy-address", free, "-ca-file", caFile, "-resolve", cHost + ":" + strings.Split(cAddr, ":")[0]}} {
		cmd := exec.Command(bins[i], args...)
		if i == 1 {
			cmd.Env = append(os.Environ(), o.env...)
			if e.pprof != "" {
				cmd.Env = append(cmd.Env, pprofEnv+"="+e.pprof)
			}
		}
		if err := cmd.Start(); err != nil {
			e.stop()
			return nil, err
		}
		e.procs = append(e.procs, &proc{cmd: cmd})
		name := []string{"secretd", "egressd"}[i]
		c := rpc.NewClient(filepath.Join(root, "run", name, "api.sock"), 5*time.Second)
		for n := 0; ; n++ {
			if _, err := healthapi.Get(ctx, c); err == nil {
				break
			} else if n > 400 {
				e.stop()
				return nil, errors.New(name + " did not start: " + err.Error())
			}
			time.Sleep(25 * time.Millisecond)
		}
		c.Close()
	}
	sd := secretdapi.NewClient(rpc.NewClient(filepath.Join(root, "run", "secretd", "api.sock"), 5*time.Second))
	eg := egressdapi.NewClient(rpc.NewClient(filepath.Join(root, "run", "egressd", "api.sock"), 5*time.Second))
	dest := "https://" + tlsUp
	allow := egressdapi.Policy{Allow: []egressdapi.AllowRule{{Origin: "http://" + plain}, {Origin: dest}}}
	if _, err := eg.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "bench", ProxyToken: token, Policy: allow}); err != nil {
		e.stop()
		return nil, err
	}
	if _, err := sd.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: "bench", Value: []byte(secret), Destinations: []string{"https://" + cHost},
		Targets: []secretdapi.TargetSpec{{Target: "header:Authorization", Template: "Bearer {}"}}}, ""); err != nil {
		e.stop()
		return nil, err
	}
	st, err := sd.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "bench", Invocation: "benchc"})
	if err == nil {
		_, err = eg.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "benchc", ProxyToken: token, Handles: [][]byte{st.Handle}})
	}
	if err != nil {
		e.stop()
		return nil, err
	}
	e.placeholder = st.Placeholder
	for i := range o.nInv {
		name := fmt.Sprintf("benchs%d", i)
		st, err := sd.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "bench", Invocation: name})
		if err == nil {
			_, err = eg.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: name, ProxyToken: token, Handles: [][]byte{st.Handle}})
		}
		if err != nil {
			e.stop()
			return nil, fmt.Errorf("invocation %s: %w", name, err)
		}
		e.streamInv = append(e.streamInv, invocation{name, st.Placeholder})
	}
	info, err := eg.Info(ctx)
	if err != nil {
		e.stop()
		return nil, err
	}
	pem, err := os.ReadFile(info.CABundlePath)
	if err != nil {
		e.stop()
		return nil, err
	}
	e.pool = x509.NewCertPool()
	e.pool.AppendCertsFromPEM(pem)
	return e, nil
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startSquid runs squid -N on a free loopback port: no cache, no access
// log, one worker.
func startSquid(dir string) (*proc, error) {
	bin, err := exec.LookPath("squid")
	if err != nil {
		return nil, errors.New("squid is not installed")
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	d := filepath.Join(dir, "squid")
	os.MkdirAll(d, 0o777)
	os.Chmod(d, 0o777)
	conf := strings.Join([]string{"http_port " + addr, "pid_filename " + d + "/squid.pid", "cache deny all", "cache_mem 0 MB",
		"access_log none", "cache_store_log none", "cache_log /dev/null", "logfile_rotate 0", "http_access allow all",
		"coredump_dir " + d, "visible_hostname bench", "shutdown_lifetime 0 seconds", "via off", "forwarded_for delete", ""}, "\n")
	return startWith(bin, addr, filepath.Join(d, "squid.conf"), conf, "-N", "-f")
}

// startTinyproxy runs tinyproxy -d on a free loopback port without logs.
func startTinyproxy(dir string) (*proc, error) {
	bin, err := exec.LookPath("tinyproxy")
	if err != nil {
		return nil, errors.New("tinyproxy is not installed")
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	conf := strings.Join([]string{"User nobody", "Group nogroup", "Port " + port, "Listen 127.0.0.1", "Timeout 600",
		"MaxClients 1024", "LogLevel Critical", "LogFile \"/dev/null\"", "DisableViaHeader Yes", ""}, "\n")
	return startWith(bin, addr, filepath.Join(dir, "tinyproxy.conf"), conf, "-d", "-c")
}

func startWith(bin, addr, confPath, conf string, args ...string) (*proc, error) {
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append(args, confPath)...)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, addr: addr}
	for n := 0; n < 200; n++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return p, nil
		}
		time.Sleep(25 * time.Millisecond)
	}
	p.stop()
	return nil, fmt.Errorf("%s did not listen on %s", filepath.Base(bin), addr)
}

func (e *egressdProc) pid() int { return e.procs[len(e.procs)-1].cmd.Process.Pid }

// rss returns process pid's resident set (VmRSS of /proc/PID/status), or
// 0 when it cannot be read.
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" && f[2] == "kB" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// runqWait returns the time process pid's threads have spent runnable
// but waiting for a CPU (the second field of /proc/PID/task/TID/schedstat,
// ns; sched-stats.rst), summed over its threads, or 0 when it cannot be
// read. On a loaded machine it says how much of a latency the scheduler
// added.
func runqWait(pid int) time.Duration {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var sum int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if f := strings.Fields(string(b)); err == nil && len(f) >= 2 {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			sum += n
		}
	}
	return time.Duration(sum)
}

// cpuTime returns the user+system CPU time process pid has used so far
// (all its threads; /proc/PID/stat fields 14 and 15, in clock ticks of
// 1/100 s), or 0 for pid 0 or when it cannot be read.
func cpuTime(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // after "pid (comm)"
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	k, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond
}

// perRequest spreads cpu over the requests of a run of rps for d.
func perRequest(cpu time.Duration, rps float64, d time.Duration) time.Duration {
	n := rps * d.Seconds()
	if cpu <= 0 || n < 1 {
		return 0
	}
	return time.Duration(float64(cpu) / n)
}
