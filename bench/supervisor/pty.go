package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/creack/pty"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// ptyThroughput cats a file of mib MiB ('x' bytes, no newline, so the
// line discipline passes it unchanged) through an attached instance's PTY
// and, for the floor, through a PTY this process reads directly. It
// returns MB/s (10^6 bytes/s) for each.
func ptyThroughput(d *daemon, mib int) (attach, direct float64, err error) {
	size := int64(mib) << 20
	file := filepath.Join(d.root, "big")
	f, err := os.Create(file)
	if err != nil {
		return 0, 0, err
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = 'x'
	}
	for i := 0; i < mib; i++ {
		f.Write(chunk)
	}
	f.Close()
	os.Chmod(file, 0o644)
	defer os.Remove(file)

	// Direct: cat on a PTY whose master this process reads.
	cmd := exec.Command("cat", file)
	m, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 80})
	if err != nil {
		return 0, 0, err
	}
	t0, c0 := time.Now(), cpuOf(os.Getpid())
	n, _ := io.Copy(io.Discard, m) // EIO at the end
	el := time.Since(t0)
	fmt.Fprintf(os.Stderr, "direct CPU (user+sys): this reader %v\n", cpuOf(os.Getpid())-c0)
	m.Close()
	cmd.Wait()
	if n < size {
		return 0, 0, fmt.Errorf("direct PTY read %d of %d bytes", n, size)
	}
	direct = float64(n) / el.Seconds() / 1e6

	// Through attach: the agent waits for a line, then cats.
	ctx := context.Background()
	in, err := d.c.Provision(ctx, &api.ProvisionRequest{Command: []string{"sh", "-c", "read x; cat " + file + "; sleep 1000"},
		WorkingDir: "/tmp", Start: true, PTY: true, StopTimeoutMS: 1000})
	if err != nil {
		return 0, 0, err
	}
	defer d.c.Destroy(ctx, in.InstanceID)
	st, _, err := d.c.Attach(ctx, &api.AttachRequest{InstanceID: in.InstanceID})
	if err != nil {
		return 0, 0, err
	}
	defer st.Close()
	st.Conn().SetReadDeadline(time.Now().Add(5 * time.Minute))
	hpid := holderPID(d, in.InstanceID)
	h0, s0, c0 := cpuOf(hpid), cpuOf(d.cmd.Process.Pid), cpuOf(os.Getpid())
	defer func() {
		fmt.Fprintf(os.Stderr, "attach CPU (user+sys): holder %v, supervisord %v, this client %v\n",
			cpuOf(hpid)-h0, cpuOf(d.cmd.Process.Pid)-s0, cpuOf(os.Getpid())-c0)
	}()
	t0 = time.Now()
	if err := st.Send(&wire.StreamFrame{T: wire.StreamData, B: []byte("go\n")}); err != nil {
		return 0, 0, err
	}
	var got int64
	for got < size {
		fr, err := st.Recv()
		if err != nil {
			return 0, 0, fmt.Errorf("attach after %d bytes: %w", got, err)
		}
		if fr.T == wire.StreamData {
			got += int64(bytes.Count(fr.B, []byte{'x'}))
		} else if fr.Ends() {
			// A client that falls 64 chunks behind is dropped by design
			// (stream.slow_client): report how far it got.
			el = time.Since(t0)
			fmt.Fprintf(os.Stderr, "attach ended (%s %s) after %d of %d bytes, %.0f MB/s until then\n", fr.T, fr.Code, got, size, float64(got)/el.Seconds()/1e6)
			return -float64(got) / el.Seconds() / 1e6, direct, nil
		}
	}
	el = time.Since(t0)
	attach = float64(got) / el.Seconds() / 1e6
	return attach, direct, nil
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
