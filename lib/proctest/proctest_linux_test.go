package proctest

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
)

func TestMain(m *testing.M) {
	if err := Subreaper(); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// TestLeftovers leaves a child and an orphan behind, from both sides:
// nothing is found when nothing was left, and both are found, ended and
// reaped when they were (the orphan only once its parent died).
func TestLeftovers(t *testing.T) {
	is := is.New(t)
	is.Equal(len(Leftovers()), 0) // nothing left yet

	// sh starts a background sleep (the future orphan), prints its pid and
	// waits on a sleep of its own.
	cmd := exec.Command("sh", "-c", `sleep 300 & echo $!; exec sleep 301`)
	out, err := cmd.StdoutPipe()
	is.NoErr(err)
	is.NoErr(cmd.Start())
	buf := make([]byte, 32)
	n, err := out.Read(buf)
	is.NoErr(err)
	orphan, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	is.NoErr(err)

	left := Leftovers()
	var args []string
	for _, p := range left {
		args = append(args, p.Args)
	}
	is.True(len(left) >= 2)                                         // the child, then the orphan it left
	is.True(strings.Contains(strings.Join(args, "|"), "sleep 301")) // the child
	is.True(strings.Contains(strings.Join(args, "|"), "sleep 300")) // the orphan, reparented here
	is.True(syscall.Kill(orphan, 0) != nil)                         // gone (and reaped: no zombie left to signal)
	_ = cmd.Wait()
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) && len(children(os.Getpid())) > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	is.Equal(len(children(os.Getpid())), 0)
}

// TestLeftoversGrace: a child that ends on its own within LeftoverGrace
// (as an idle holder does once its supervisord is gone) is not reported;
// the refused side is TestLeftovers.
func TestLeftoversGrace(t *testing.T) {
	is := is.New(t)
	cmd := exec.Command("sleep", "0.5")
	is.NoErr(cmd.Start())
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	start := time.Now()
	is.Equal(len(Leftovers()), 0)
	<-done
	is.True(time.Since(start) < LeftoverGrace) // it ended on its own, well before the grace ran out
}
