// Command rpc-bench compares hostkit's rpc round trip (health) with the
// physical floor: a raw echo of a length-prefixed frame of the same size
// over the same kind of Unix socket. It prints p50/p99 latency and
// throughput for one client and for -c concurrent clients, the rpc/raw
// ratios, and the allocations of decoding a 1 KiB request envelope.
//
//	cd bench/rpc && GOWORK=off go run . -n 20000
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

// target is the acceptance bound: rpc p50 at most this many times the raw
// echo p50 (one client, sequential).
const target = 2.5

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "rpc-bench:", err)
		os.Exit(1)
	}
}

// config holds the parsed flags.
type config struct {
	n, conc, warmup int
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rpc-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.IntVar(&cfg.n, "n", 20000, "round trips per measurement")
	fs.IntVar(&cfg.conc, "c", 8, "concurrent clients in the concurrent measurement")
	fs.IntVar(&cfg.warmup, "warmup", 2000, "round trips before each measurement")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.n < 1 || cfg.conc < 1 {
		return errors.New("-n and -c must be at least 1")
	}
	dir, err := os.MkdirTemp("/tmp", "hkb")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()

	rpcPath := filepath.Join(dir, "d", "api.sock")
	served, err := serveRPC(sctx, rpcPath)
	if err != nil {
		return err
	}
	rawPath := filepath.Join(dir, "raw.sock")
	rawStop, err := serveRaw(rawPath)
	if err != nil {
		return err
	}
	defer rawStop()
	defer func() { cancel(); <-served }()

	frameLen := len(wire.AppendFrame(nil, wire.AppendRequest(nil, &wire.Request{ID: make([]byte, wire.IDLen), Op: "health", Deadline: time.Now().UnixMilli()})))
	rawDial := func() (func() error, func(), error) { return rawRoundTrip(rawPath, frameLen) }
	rpcDial := func() (func() error, func(), error) { return rpcRoundTrip(ctx, rpcPath) }

	type row struct {
		name string
		res  result
	}
	var rows []row
	for _, m := range []struct {
		name string
		dial func() (func() error, func(), error)
		conc int
	}{
		{"raw echo, 1 client", rawDial, 1},
		{"rpc health, 1 client", rpcDial, 1},
		{fmt.Sprintf("raw echo, %d clients", cfg.conc), rawDial, cfg.conc},
		{fmt.Sprintf("rpc health, %d clients", cfg.conc), rpcDial, cfg.conc},
	} {
		r, err := measure(m.dial, cfg.n, cfg.warmup, m.conc)
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		rows = append(rows, row{m.name, r})
	}

	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "measurement\tround trips\tp50 µs\tp99 µs\treq/s\t\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.0f\t\n", r.name, r.res.n, us(r.res.p50), us(r.res.p99), r.res.rps)
	}
	tw.Flush()
	fmt.Fprintln(stdout)
	seqP50 := ratio(rows[1].res.p50, rows[0].res.p50)
	fmt.Fprintf(stdout, "rpc/raw, 1 client:   p50 %.2fx  p99 %.2fx  throughput %.2fx\n", seqP50, ratio(rows[1].res.p99, rows[0].res.p99), rows[1].res.rps/rows[0].res.rps)
	fmt.Fprintf(stdout, "rpc/raw, %d clients:  p50 %.2fx  p99 %.2fx  throughput %.2fx\n", cfg.conc, ratio(rows[3].res.p50, rows[2].res.p50), ratio(rows[3].res.p99, rows[2].res.p99), rows[3].res.rps/rows[2].res.rps)

	env, full := decodeAllocs()
	fmt.Fprintf(stdout, "allocs per decode of a 1 KiB request envelope: %.0f (envelope), %.0f (envelope + body into its struct)\n", env, full)
	verdict := "PASS"
	if seqP50 > target {
		verdict = "FAIL"
	}
	fmt.Fprintf(stdout, "target: rpc p50 <= %.1fx raw echo: %s (%.2fx)\n", target, verdict, seqP50)
	return nil
}

// result is one measurement.
type result struct {
	n        int
	p50, p99 time.Duration
	rps      float64
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

// measure runs n round trips (after warmup) spread over conc clients, each
// with its own connection from dial, and reports latency percentiles and
// throughput.
func measure(dial func() (func() error, func(), error), n, warmup, conc int) (result, error) {
	per := (n + conc - 1) / conc
	lat := make([][]time.Duration, conc)
	trips := make([]func() error, conc)
	for i := range conc {
		rt, closeFn, err := dial()
		if err != nil {
			return result{}, err
		}
		defer closeFn()
		for range warmup / conc {
			if err := rt(); err != nil {
				return result{}, err
			}
		}
		trips[i] = rt
		lat[i] = make([]time.Duration, 0, per)
	}
	var wg sync.WaitGroup
	errs := make([]error, conc)
	start := make(chan struct{})
	for i := range conc {
		wg.Go(func() {
			<-start
			for range per {
				t0 := time.Now()
				if err := trips[i](); err != nil {
					errs[i] = err
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		})
	}
	begin := time.Now()
	close(start)
	wg.Wait()
	wall := time.Since(begin)
	if err := errors.Join(errs...); err != nil {
		return result{}, err
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	return result{
		n:   len(all),
		p50: all[len(all)/2],
		p99: all[len(all)*99/100],
		rps: float64(len(all)) / wall.Seconds(),
	}, nil
}

type healthBody struct {
	Status string `msgpack:"status"`
}

// serveRPC starts an rpc server with a health op on path; the returned
// channel is closed when Serve returns.
func serveRPC(ctx context.Context, path string) (<-chan struct{}, error) {
	l, err := sock.Listen(ctx, sock.Config{Path: path, Group: -1})
	if err != nil {
		return nil, err
	}
	srv, err := rpc.NewServer(rpc.Config{
		Daemon: "bench",
		Roles:  rpc.Roles{"admin": {uint32(os.Geteuid())}},
		Logger: slog.New(slog.DiscardHandler),
	}, rpc.Op{Name: "health", Handler: func(context.Context, *rpc.Call) (any, error) {
		return &healthBody{Status: "ok"}, nil
	}})
	if err != nil {
		l.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ctx, l) }()
	return done, nil
}

func rpcRoundTrip(ctx context.Context, path string) (func() error, func(), error) {
	c := rpc.NewClient(path, 0)
	var out healthBody
	rt := func() error { return c.Call(ctx, "health", nil, &out) }
	return rt, func() { c.Close() }, nil
}

// serveRaw echoes 4-byte length-prefixed frames on path: the physical
// floor of a request/response round trip on this socket kind.
func serveRaw(path string) (func(), error) {
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					if _, err := io.ReadFull(c, buf[:4]); err != nil {
						return
					}
					n := 4 + int(binary.BigEndian.Uint32(buf))
					if n > len(buf) {
						return
					}
					if _, err := io.ReadFull(c, buf[4:n]); err != nil {
						return
					}
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
			})
		}
	})
	return func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}, nil
}

func rawRoundTrip(path string, frameLen int) (func() error, func(), error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, nil, err
	}
	frame := binary.BigEndian.AppendUint32(nil, uint32(frameLen-4))
	frame = append(frame, make([]byte, frameLen-4)...)
	back := make([]byte, frameLen)
	rt := func() error {
		if _, err := c.Write(frame); err != nil {
			return err
		}
		if _, err := io.ReadFull(c, back[:4]); err != nil {
			return err
		}
		_, err := io.ReadFull(c, back[4:4+binary.BigEndian.Uint32(back)])
		return err
	}
	return rt, func() { c.Close() }, nil
}

type echoBody struct {
	Msg string `msgpack:"msg,omitempty"`
}

// decodeAllocs returns the allocations per decode of a request envelope
// whose body holds 1 KiB of text: the envelope alone, and the envelope plus
// the strict decode of its body.
func decodeAllocs() (envelope, full float64) {
	body, err := wire.Marshal(&echoBody{Msg: strings.Repeat("x", 1024)})
	if err != nil {
		panic(err)
	}
	payload := wire.AppendRequest(nil, &wire.Request{ID: make([]byte, wire.IDLen), Op: "test.echo", Deadline: time.Now().UnixMilli(), Body: body})
	envelope = testing.AllocsPerRun(1000, func() {
		if _, err := wire.DecodeRequest(payload, wire.Limits{}); err != nil {
			panic(err)
		}
	})
	full = testing.AllocsPerRun(1000, func() {
		r, err := wire.DecodeRequest(payload, wire.Limits{})
		if err != nil {
			panic(err)
		}
		var e echoBody
		if err := (&rpc.Call{Body: r.Body}).Decode(&e); err != nil {
			panic(err)
		}
	})
	return envelope, full
}
