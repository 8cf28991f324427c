// Command secretd-bench measures secretd's stage+consume pair over its real
// socket next to the raw floor: two round trips of a length-prefixed echo
// server on a Unix socket, in the same run (docs/secretd.md, "Performance").
//
// It builds secretd from ../../cmd/secretd (or takes -secretd), starts it
// under a fresh -root (on /dev/shm when present, so the audit log's fsync
// measures the broker rather than the disk; see -base), stores one
// credential and then alternates blocks of echo pairs and stage+consume
// pairs on one connection each. Run it with GOWORK=off from this directory:
//
//	GOWORK=off go run . -n 20000
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/rpc"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "secretd-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	n := flag.Int("n", 20000, "pairs to measure (and as many echo pairs)")
	block := flag.Int("block", 500, "alternate echo and secretd in blocks of this many")
	bin := flag.String("secretd", "", "secretd binary (default: build ../../cmd/secretd)")
	base := flag.String("base", defaultBase(), "directory for the -root (tmpfs recommended: secretd fsyncs its audit log per record)")
	inProc := flag.Bool("echo-in-process", false, "serve the raw echo from this process instead of a separate one")
	serveOnly := flag.String("serve-echo", "", "internal: serve the raw echo on this socket path until killed")
	flag.Parse()
	if *serveOnly != "" {
		if _, err := serveEcho(*serveOnly); err != nil {
			return err
		}
		select {}
	}

	root, err := os.MkdirTemp(*base, "hkb")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	if *bin == "" {
		*bin = filepath.Join(root, "secretd")
		build := exec.Command("go", "build", "-o", *bin, ".")
		build.Dir = filepath.Join("..", "..", "cmd", "secretd")
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	d := exec.Command(*bin, "-root", root, "-log-level", "warn")
	d.Stderr = os.Stderr
	if err := d.Start(); err != nil {
		return err
	}
	defer func() { d.Process.Signal(os.Interrupt); d.Wait() }()
	sock := filepath.Join(root, "run", "secretd", "api.sock")
	c := rpc.NewClient(sock, 10*time.Second)
	defer c.Close()
	if err := waitReady(c); err != nil {
		return err
	}
	api := secretdapi.NewClient(c)
	ctx := context.Background()
	if _, err := api.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: "bench",
		Value:        []byte("bench-value-0123456789abcdef0123456789abcdef"),
		Destinations: []string{"https://api.example.com"},
		Targets:      []secretdapi.TargetSpec{{Target: "header:Authorization", Template: "Bearer {}"}}}, ""); err != nil {
		return err
	}

	// The floor for a daemon in another process is an echo in another
	// process: both pay the same cross-process wakeups.
	echoPath := filepath.Join(root, "echo.sock")
	if *inProc {
		stop, err := serveEcho(echoPath)
		if err != nil {
			return err
		}
		defer stop()
	} else {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		e := exec.Command(self, "-serve-echo", echoPath)
		e.Stderr = os.Stderr
		if err := e.Start(); err != nil {
			return err
		}
		defer func() { e.Process.Kill(); e.Wait() }()
	}
	var ec net.Conn
	for i := 0; ; i++ {
		if ec, err = net.Dial("unix", echoPath); err == nil {
			break
		}
		if i > 200 {
			return fmt.Errorf("echo server: %w", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	defer ec.Close()
	payload := make([]byte, 128) // about the size of a stage request frame

	pair := func() error {
		st, err := api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "bench", Invocation: "bench-inv"})
		if err != nil {
			return err
		}
		out, err := api.LeaseConsume(ctx, "bench-inv", [][]byte{st.Handle})
		if err != nil {
			return err
		}
		clear(out.Leases[0].Value)
		return nil
	}
	health2 := func() error { // two rpc round trips that do no work: the lib/rpc floor
		for range 2 {
			if _, err := healthapi.GetAll(ctx, c); err != nil {
				return err
			}
		}
		return nil
	}
	echo2 := func() error {
		for range 2 {
			if err := echoOnce(ec, payload); err != nil {
				return err
			}
		}
		return nil
	}
	for range 500 { // warm up both paths
		if err := pair(); err != nil {
			return err
		}
		if err := echo2(); err != nil {
			return err
		}
	}
	var pairLat, echoLat, healthLat []time.Duration
	var pairTotal time.Duration
	for done := 0; done < *n; done += *block {
		k := min(*block, *n-done)
		for range k {
			t0 := time.Now()
			if err := echo2(); err != nil {
				return err
			}
			echoLat = append(echoLat, time.Since(t0))
		}
		for range k {
			t0 := time.Now()
			if err := health2(); err != nil {
				return err
			}
			healthLat = append(healthLat, time.Since(t0))
		}
		for range k {
			t0 := time.Now()
			if err := pair(); err != nil {
				return err
			}
			el := time.Since(t0)
			pairLat = append(pairLat, el)
			pairTotal += el
		}
	}
	report(os.Stdout, *base, pairLat, echoLat, healthLat, pairTotal)
	return nil
}

func report(w io.Writer, base string, pairLat, echoLat, healthLat []time.Duration, pairTotal time.Duration) {
	slices.Sort(pairLat)
	slices.Sort(echoLat)
	slices.Sort(healthLat)
	pp50, pp99 := pct(pairLat, 50), pct(pairLat, 99)
	ep50, ep99 := pct(echoLat, 50), pct(echoLat, 99)
	ratio := float64(pp50) / float64(ep50)
	verdict := "PASS"
	if ratio > 3 {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "secretd stage+consume over the real socket (root on %s, %d pairs, one connection)\n", base, len(pairLat))
	fmt.Fprintf(w, "  stage+consume pair: %8.0f pairs/s  p50 %-9v p99 %v\n", float64(len(pairLat))/pairTotal.Seconds(), pp50, pp99)
	fmt.Fprintf(w, "  two raw echo RTTs:  %8.0f pairs/s  p50 %-9v p99 %v\n", float64(len(echoLat))/sum(echoLat).Seconds(), ep50, ep99)
	fmt.Fprintf(w, "  two health calls:   %8.0f pairs/s  p50 %-9v p99 %v  (lib/rpc floor: no handler work, no audit)\n",
		float64(len(healthLat))/sum(healthLat).Seconds(), pct(healthLat, 50), pct(healthLat, 99))
	fmt.Fprintf(w, "  ratio (p50): %.2fx  p99 ratio: %.2fx  (vs two health calls: %.2fx)\n", ratio, float64(pp99)/float64(ep99),
		float64(pp50)/float64(pct(healthLat, 50)))
	fmt.Fprintf(w, "target: pair <= 3x two raw echoes: %s\n", verdict)
}

func pct(s []time.Duration, p int) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, len(s)*p/100)]
}

func sum(s []time.Duration) (t time.Duration) {
	for _, d := range s {
		t += d
	}
	return t
}

func defaultBase() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

func waitReady(c *rpc.Client) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := healthapi.GetAll(context.Background(), c)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("secretd not ready: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serveEcho answers each 4-byte big-endian length-prefixed frame with
// itself, one goroutine per connection.
func serveEcho(path string) (stop func(), err error) {
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4+64<<10)
				for {
					if _, err := io.ReadFull(c, buf[:4]); err != nil {
						return
					}
					n := binary.BigEndian.Uint32(buf[:4])
					if int(n) > len(buf)-4 {
						return
					}
					if _, err := io.ReadFull(c, buf[4:4+n]); err != nil {
						return
					}
					if _, err := c.Write(buf[:4+n]); err != nil {
						return
					}
				}
			}()
		}
	}()
	return func() { l.Close() }, nil
}

// echoOnce sends payload as one frame and reads the echo.
func echoOnce(c net.Conn, payload []byte) error {
	frame := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(payload)), uint32(len(payload)))
	frame = append(frame, payload...)
	if _, err := c.Write(frame); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, frame); err != nil {
		return err
	}
	if len(frame) != 4+len(payload) {
		return errors.New("short echo")
	}
	return nil
}
