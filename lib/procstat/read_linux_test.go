package procstat

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/matryer/is"
	"golang.org/x/sys/unix"
)

func TestReadSelf(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a, err := Read(os.Getpid())
	is.NoErr(err)
	is.True(!a.Exited()) // the main thread's state: any live one
	is.Equal(a.PPID, os.Getppid())
	is.Equal(a.PGRP, unix.Getpgrp())
	sid, err := unix.Getsid(0)
	is.NoErr(err)
	is.Equal(a.Session, sid)
	is.True(a.StartTime > 0)
	is.Equal(a.ExitCode, 0) // running (Linux 3.5+, as every supported kernel)
	b, err := Read(os.Getpid())
	is.NoErr(err)
	is.Equal(b.StartTime, a.StartTime) // the same process, the same start time
}

func TestReadGone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		pid  int
	}{
		{"no such pid", 1 << 30},
		{"zero", 0},
		{"negative", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Read(tc.pid)
			is.New(t).True(errors.Is(err, unix.ENOENT))
		})
	}
}

// A child that exited and was not waited for reads as a zombie with its
// exit status; once reaped it is gone.
func TestReadZombie(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	cmd := exec.Command("/bin/sh", "-c", "exit 3")
	is.NoErr(cmd.Start())
	pid := cmd.Process.Pid
	var st Stat
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		var err error
		st, err = Read(pid)
		is.NoErr(err)
		if st.Exited() {
			break
		}
	}
	is.Equal(st.State, byte('Z'))
	ws := unix.WaitStatus(st.ExitCode)
	is.True(ws.Exited())
	is.Equal(ws.ExitStatus(), 3)
	_ = cmd.Wait()
	_, err := Read(pid)
	is.True(errors.Is(err, unix.ENOENT))
}

func BenchmarkRead(b *testing.B) {
	pid := os.Getpid()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Read(pid); err != nil {
			b.Fatal(err)
		}
	}
}
