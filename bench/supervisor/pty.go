package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/creack/pty"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// ptyResult is the attach leg's figures: medians over the rounds, and the
// median of each round's attach/direct ratio (the two legs of a round run
// back to back, so they share the machine's load of the moment).
type ptyResult struct {
	attach, direct, ratio float64 // MB/s, MB/s, ×; attach < 0: the client was dropped
	cpuPerMB              string
}

// ptyThroughput cats a file of mib MiB ('x' bytes, no newline, so the
// line discipline passes it unchanged) through an attached instance's PTY
// and, for the floor, through a PTY this process reads directly, rounds
// times each, alternating. MB/s are 10^6 bytes/s. With perfOut not "",
// the first attach leg runs under `perf record -g` of the holder,
// supervisord and this process, written to perfOut.
func ptyThroughput(d *daemon, mib, rounds int, perfOut string) (ptyResult, error) {
	size := int64(mib) << 20
	file := filepath.Join(d.root, "big")
	f, err := os.Create(file)
	if err != nil {
		return ptyResult{}, err
	}
	chunk := bytes.Repeat([]byte{'x'}, 1<<20)
	for i := 0; i < mib; i++ {
		f.Write(chunk)
	}
	f.Close()
	os.Chmod(file, 0o644)
	defer os.Remove(file)

	var atts, dirs, ratios []float64
	var cpu [4]time.Duration // direct reader; holder, supervisord, client
	for r := 0; r < max(rounds, 1); r++ {
		dir, dcpu, err := directOnce(file, size)
		if err != nil {
			return ptyResult{}, err
		}
		att, acpu, err := attachOnce(d, file, size, perfOut)
		perfOut = ""
		if err != nil {
			return ptyResult{}, err
		}
		fmt.Fprintf(os.Stderr, "round %d: direct %.0f MB/s, attach %.0f MB/s (%.2f×); CPU: direct reader %v; holder %v, supervisord %v, client %v\n",
			r+1, dir, att, att/dir, dcpu, acpu[0], acpu[1], acpu[2])
		dirs, atts, ratios = append(dirs, dir), append(atts, att), append(ratios, att/dir)
		cpu[0] += dcpu
		for i := range acpu {
			cpu[i+1] += acpu[i]
		}
	}
	mb := float64(size) / 1e6 * float64(len(dirs))
	perMB := func(c time.Duration) string { return fmt.Sprintf("%.1f", float64(c.Microseconds())/1000/mb) }
	return ptyResult{attach: median(atts), direct: median(dirs), ratio: median(ratios),
		cpuPerMB: fmt.Sprintf("direct reader %s; holder %s, supervisord %s, client %s ms/MB", perMB(cpu[0]), perMB(cpu[1]), perMB(cpu[2]), perMB(cpu[3]))}, nil
}

// directOnce: cat on a PTY whose master this process reads.
func directOnce(file string, size int64) (float64, time.Duration, error) {
	cmd := exec.Command("cat", file)
	m, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 80})
	if err != nil {
		return 0, 0, err
	}
	t0, c0 := time.Now(), cpuOf(os.Getpid())
	n, _ := io.Copy(io.Discard, m) // EIO at the end
	el := time.Since(t0)
	c := cpuOf(os.Getpid()) - c0
	m.Close()
	cmd.Wait()
	if n < size {
		return 0, 0, fmt.Errorf("direct PTY read %d of %d bytes", n, size)
	}
	return float64(n) / el.Seconds() / 1e6, c, nil
}

// attachOnce: the agent waits for a line, then cats; this process reads
// through instance.attach. A dropped client (stream.slow_client) is
// reported as a negative rate: how fast it went until then.
func attachOnce(d *daemon, file string, size int64, perfOut string) (float64, [3]time.Duration, error) {
	var cpu [3]time.Duration
	ctx := context.Background()
	in, err := d.c.Provision(ctx, &api.ProvisionRequest{Command: []string{"sh", "-c", "read x; cat " + file + "; sleep 1000"},
		WorkingDir: "/tmp", Start: true, PTY: true, StopTimeoutMS: 1000})
	if err != nil {
		return 0, cpu, err
	}
	defer d.c.Destroy(ctx, in.InstanceID)
	st, _, err := d.c.Attach(ctx, &api.AttachRequest{InstanceID: in.InstanceID})
	if err != nil {
		return 0, cpu, err
	}
	defer st.Close()
	st.Conn().SetReadDeadline(time.Now().Add(5 * time.Minute))
	hpid := holderPID(d, in.InstanceID)
	pids := []int{hpid, d.cmd.Process.Pid, os.Getpid()}
	if perfOut != "" {
		rec := exec.Command("perf", "record", "-g", "-o", perfOut, "-p", fmt.Sprintf("%d,%d,%d", pids[0], pids[1], pids[2]))
		if err := rec.Start(); err != nil {
			return 0, cpu, fmt.Errorf("perf: %w", err)
		}
		time.Sleep(500 * time.Millisecond) // let perf attach
		defer func() { rec.Process.Signal(os.Interrupt); rec.Wait() }()
	}
	var c0 [3]time.Duration
	for i, p := range pids {
		c0[i] = cpuOf(p)
	}
	t0 := time.Now()
	if err := st.Send(&wire.StreamFrame{T: wire.StreamData, B: []byte("go\n")}); err != nil {
		return 0, cpu, err
	}
	var got int64
	rate := 0.0
	for got < size {
		fr, err := st.Recv()
		if err != nil {
			return 0, cpu, fmt.Errorf("attach after %d bytes: %w", got, err)
		}
		if fr.T == wire.StreamData {
			got += int64(bytes.Count(fr.B, []byte{'x'}))
		} else if fr.Ends() {
			// A client that falls too far behind is dropped by design
			// (stream.slow_client): report how far it got.
			el := time.Since(t0)
			fmt.Fprintf(os.Stderr, "attach ended (%s %s) after %d of %d bytes\n", fr.T, fr.Code, got, size)
			rate = -float64(got) / el.Seconds() / 1e6
			break
		}
	}
	if rate == 0 {
		rate = float64(got) / time.Since(t0).Seconds() / 1e6
	}
	for i, p := range pids {
		cpu[i] = cpuOf(p) - c0[i]
	}
	return rate, cpu, nil
}

// cpuOf is pid's user+system CPU time so far (/proc/<pid>/stat, in clock
// ticks of 10 ms); 0 when unreadable.
func cpuOf(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
