// Command reregister benchmarks what an egressd restart costs running
// agents (docs/supervisord.md "Egress", restarts): with -n live credentialed
// instances under supervisord, egressd is killed (-9) and started again,
// and every instance's proxy token and placeholder (read from its
// agent.env, as the agent would use them) is tried through egressd's
// proxy until the upstream gets the real value. It reports the time from
// the new egressd's READY (its first health answer) to the first and to
// the last instance working again, side by side with what the old rule
// ("credentials_lost until re-provisioned") would cost: provisioning the
// same number of credentialed instances afresh. It builds secretd,
// egressd and supervisord from ../../cmd (GOWORK=off), runs them under a
// temporary root with an HTTPS upstream of its own, and needs root (the
// agents run under their own uids). `GOWORK=off go run . [-n 100]`.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/api/secretdapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/rpc"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/reregister:", err)
		os.Exit(1)
	}
}

func run() error {
	n := flag.Int("n", 100, "live credentialed instances")
	base := flag.String("dir", "/var/tmp", "directory for the temporary root")
	flag.Parse()
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root (agents run under their own uids)")
	}
	bin, err := os.MkdirTemp("", "hkrr")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	for _, d := range []string{"secretd", "egressd", "supervisord"} {
		b := exec.Command("go", "build", "-o", filepath.Join(bin, d), ".")
		b.Dir, b.Env = "../../cmd/"+d, append(os.Environ(), "GOWORK=off")
		if out, err := b.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", d, err, out)
		}
	}
	root, err := os.MkdirTemp(*base, "hkrr")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	os.Chmod(root, 0o755)
	up, err := startUpstream(root)
	if err != nil {
		return err
	}
	defer up.close()

	st := &stack{bin: bin, root: root}
	defer st.stopAll()
	sd, err := st.start("secretd", "secretd")
	if err != nil {
		return err
	}
	// A fixed proxy port, as in production (4750): the agents' proxy URL
	// must reach the restarted egressd.
	port, err := freePort()
	if err != nil {
		return err
	}
	egArgs := []string{"-audit-fsync", "never", "-proxy-address", port, "-ca-file", up.caFile, "-resolve", up.resolve}
	if _, err := st.start("egressd", "egressd", egArgs...); err != nil {
		return err
	}
	sdc := secretdapi.NewClient(sd.rc)
	ctx := context.Background()
	if _, err := sdc.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: "api", Value: []byte(value), Destinations: []string{up.origin},
		Targets: []secretdapi.TargetSpec{{Target: "header:Authorization", Template: "Bearer {}"}}}, ""); err != nil {
		return err
	}
	sv, err := st.start("supervisord", "supervisord", "-host-runtime-enabled", "yes", "-egress-poll", "3s")
	if err != nil {
		return err
	}
	svc := api.NewClient(sv.rc)

	// Side by side: the old rule's remedy, provisioning every instance
	// afresh, timed.
	t0 := time.Now()
	ids := make([]string, *n)
	// Destroy what was provisioned whatever happens: holders outlive
	// supervisord by design.
	defer parallel(*n, 4, func(i int) error {
		if ids[i] == "" {
			return nil
		}
		return svc.Destroy(context.Background(), ids[i])
	})
	if err := parallel(*n, 4, func(i int) error {
		in, err := svc.Provision(ctx, &api.ProvisionRequest{Command: []string{"sleep", "100000"}, WorkingDir: "/tmp", Start: true, StopTimeoutMS: 1000,
			Credentials: []api.CredentialSpec{{Credential: "api", Env: "API_TOKEN"}}})
		if err == nil {
			ids[i] = in.InstanceID
		}
		return err
	}); err != nil {
		return err
	}
	provisionAll := time.Since(t0)
	agents := make([]*agent, *n)
	for i, id := range ids {
		if agents[i], err = newAgent(root, id, up); err != nil {
			return err
		}
	}
	// Every agent tries on its own, as agents do (each its own process).
	if err := parallel(*n, *n, func(i int) error { return agents[i].tryUntil(time.Now().Add(30 * time.Second)) }); err != nil {
		return fmt.Errorf("before the restart: %w", err)
	}

	st.kill("egressd")
	time.Sleep(500 * time.Millisecond)
	eg, err := st.start("egressd", "egressd", egArgs...)
	if err != nil {
		return err
	}
	ready := eg.ready
	eh, err := healthapi.Get(ctx, eg.rc)
	if err != nil {
		return err
	}
	// When supervisord learnt the new epoch: its health names it.
	learnt := make(chan time.Duration, 1)
	go func() {
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
			var h map[string]any
			if sv.rc.Call(ctx, healthapi.Op, nil, &h) == nil && h["egressd_epoch"] == eh.Epoch {
				learnt <- time.Since(ready)
				return
			}
		}
		learnt <- -1
	}()
	back := make([]time.Duration, *n)
	if err := parallel(*n, *n, func(i int) error {
		if err := agents[i].tryUntil(ready.Add(60 * time.Second)); err != nil {
			return err
		}
		back[i] = time.Since(ready)
		return nil
	}); err != nil {
		return fmt.Errorf("after the restart: %w", err)
	}
	sort.Slice(back, func(i, j int) bool { return back[i] < back[j] })
	last := back[len(back)-1]
	var leases secretdapi.LeaseListResponse
	if err := sd.rc.Call(ctx, secretdapi.OpLeaseList, &secretdapi.LeaseListRequest{}, &leases); err != nil {
		return err
	}
	verdict := pass(last <= 2*time.Second)
	fmt.Printf("| measurement (%d credentialed instances) | value | target |\n|---|---|---|\n", *n)
	l := <-learnt
	first, lastReg, regs := reregistered(filepath.Join(root, "supervisord.stderr"), ready)
	fmt.Printf("| egressd restart: READY → supervisord's first / last bundle registered again (%d; its log) | %s / %s | |\n", regs, ms(first), ms(lastReg))
	fmt.Printf("| egressd restart: READY → supervisord knows the new epoch (health, polled every 2 ms) | %s | ≤ 500 ms: %s |\n", ms(l), pass(l >= 0 && l <= 500*time.Millisecond))
	fmt.Printf("| egressd restart: READY → first instance working again | %s | |\n", ms(back[0]))
	fmt.Printf("| egressd restart: READY → half working again (p50) | %s | |\n", ms(back[len(back)/2]))
	fmt.Printf("| egressd restart: READY → **all** working again | %s | ≤ 2 s: %s |\n", ms(last), verdict)
	fmt.Printf("| side by side: provisioning %d credentialed instances afresh (the old remedy), 4 at a time | %s | |\n", *n, ms(provisionAll))
	fmt.Printf("| leases left staged afterwards | %d | 0 |\n", len(leases.Leases))
	return nil
}

// reregistered reads supervisord's log for its instance.egress_reregistered
// lines after ready and returns the first's and the last's time after
// ready, and how many there were.
func reregistered(path string, ready time.Time) (first, last time.Duration, n int) {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1, -1, 0
	}
	first = -1
	for _, line := range strings.Split(string(b), "\n") {
		var rec struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "instance.egress_reregistered" || rec.Time.Before(ready) {
			continue
		}
		d := rec.Time.Sub(ready)
		if first < 0 || d < first {
			first = d
		}
		last, n = max(last, d), n+1
	}
	return first, last, n
}

// freePort returns a loopback address whose port was free a moment ago.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func pass(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

// parallel runs f(0..n-1) on w goroutines and returns the first error.
func parallel(n, w int, f func(int) error) error {
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		next  = make(chan int)
	)
	for range min(w, n) {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// daemon is one started daemon.
type daemon struct {
	cmd   *exec.Cmd
	rc    *rpc.Client
	ready time.Time // its first health answer
}

// stack starts the daemons under one root.
type stack struct {
	bin, root string
	mu        sync.Mutex
	running   map[string]*daemon
}

// start runs daemon name and waits (polling health every 2 ms) for its
// first answer.
func (s *stack) start(name, sockName string, args ...string) (*daemon, error) {
	d := &daemon{cmd: exec.Command(filepath.Join(s.bin, name), append([]string{"-root", s.root}, args...)...)}
	f, err := os.Create(filepath.Join(s.root, name+".stderr"))
	if err != nil {
		return nil, err
	}
	d.cmd.Stderr = f
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	// Generous: the machine may be loaded (health below has its own
	// 200 ms bound).
	d.rc = rpc.NewClient(filepath.Join(s.root, "run", sockName, "api.sock"), time.Minute)
	for end := time.Now().Add(60 * time.Second); ; {
		c, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := healthapi.Get(c, d.rc)
		cancel()
		if err == nil {
			d.ready = time.Now()
			break
		}
		if time.Now().After(end) {
			return nil, fmt.Errorf("%s did not start: %v", name, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	s.mu.Lock()
	if s.running == nil {
		s.running = map[string]*daemon{}
	}
	s.running[name] = d
	s.mu.Unlock()
	return d, nil
}

// kill kills daemon name with SIGKILL and waits for it.
func (s *stack) kill(name string) {
	s.mu.Lock()
	d := s.running[name]
	delete(s.running, name)
	s.mu.Unlock()
	if d != nil {
		d.rc.Close()
		d.cmd.Process.Kill()
		d.cmd.Wait()
	}
}

// stopAll stops supervisord first (its instances are destroyed before),
// then the others.
func (s *stack) stopAll() {
	for _, name := range []string{"supervisord", "egressd", "secretd"} {
		s.mu.Lock()
		d := s.running[name]
		delete(s.running, name)
		s.mu.Unlock()
		if d != nil {
			d.rc.Close()
			d.cmd.Process.Signal(os.Interrupt)
			done := make(chan struct{})
			go func() { d.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				d.cmd.Process.Kill()
				<-done
			}
		}
	}
}
