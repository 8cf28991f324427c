package state

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

// crashEnv names the state directory of the child that TestCrashChild
// runs as.
const crashEnv = "HOSTKIT_STATE_CRASH_CHILD"

// TestCrashChild is not a test: run as a child process by
// TestCrashLosesNothing (the re-exec pattern of hashicorp/go-plugin), it
// writes records as fast as it can and, after each mutation returns,
// appends "<round> <i> <fence>" to the ack file, until it is killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("only runs as TestCrashLosesNothing's child")
	}
	round := os.Getenv(crashEnv + "_ROUND")
	s, err := Open(dir, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(3)
	}
	ack, err := os.OpenFile(filepath.Join(filepath.Dir(dir), "ack"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		os.Exit(4)
	}
	result := make([]byte, 8<<10) // bigger documents: longer writes to land a kill in
	for i := 0; ; i++ {
		if err := s.PutIdem(fmt.Sprintf("r%s-%06d", round, i), "container.create", "h", result); err != nil {
			fmt.Fprintln(os.Stderr, "child put:", err)
			os.Exit(5)
		}
		n, err := s.AdvanceFence(inst1)
		if err != nil {
			os.Exit(6)
		}
		// One write(2) per line, so a kill never leaves half a line.
		if _, err := ack.WriteString(fmt.Sprintf("%s %d %d\n", round, i, n)); err != nil {
			os.Exit(7)
		}
	}
}

// A child killed with SIGKILL in the middle of writing loses nothing it
// acknowledged, and leaves a state that opens cleanly (torn temporary
// files are removed). Five rounds, each killed at another moment.
func TestCrashLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	is := is.New(t)
	base := t.TempDir()
	dir := filepath.Join(base, "helper")
	var project string
	for round, delay := range []time.Duration{0, 7 * time.Millisecond, 30 * time.Millisecond, 75 * time.Millisecond, 150 * time.Millisecond} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir, crashEnv+"_ROUND="+strconv.Itoa(round))
		cmd.Stderr = os.Stderr
		is.NoErr(cmd.Start())
		deadline := time.Now().Add(20 * time.Second)
		for countRound(t, base, round) < 5 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(delay)
		is.NoErr(cmd.Process.Kill())
		_ = cmd.Wait() // reap: killed by SIGKILL

		acks := readAcks(t, base)
		is.True(countRound(t, base, round) >= 5)
		torn := 0
		before, err := os.ReadDir(dir)
		is.NoErr(err)
		for _, e := range before {
			if strings.HasPrefix(e.Name(), tmpPrefix) {
				torn++
			}
		}
		s, err := Open(dir, Options{})
		is.NoErr(err)
		if project == "" {
			project = s.ProjectID()
		}
		is.Equal(s.ProjectID(), project)
		var maxFence uint64
		for _, a := range acks {
			_, ok, err := s.Idem(fmt.Sprintf("r%d-%06d", a.round, a.i), "container.create", "h")
			is.NoErr(err)
			is.True(ok) // every acknowledged record survived
			maxFence = max(maxFence, a.fence)
		}
		n, err := s.Fence(inst1)
		is.NoErr(err)
		is.True(n >= maxFence && n <= maxFence+1) // at most the one unacknowledged advance
		ents, err := os.ReadDir(dir)
		is.NoErr(err)
		for _, e := range ents {
			is.True(!strings.HasPrefix(e.Name(), tmpPrefix))
		}
		is.NoErr(s.Close())
		t.Logf("round %d: %d acknowledged writes, fence %d, %d torn temporary file(s) removed", round, len(acks), n, torn)
	}
}

type ackLine struct {
	round, i int
	fence    uint64
}

func readAcks(t *testing.T, base string) []ackLine {
	t.Helper()
	f, err := os.Open(filepath.Join(base, "ack"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []ackLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var a ackLine
		if _, err := fmt.Sscanf(sc.Text(), "%d %d %d", &a.round, &a.i, &a.fence); err != nil {
			t.Fatalf("ack line %q: %v", sc.Text(), err)
		}
		out = append(out, a)
	}
	return out
}

func countRound(t *testing.T, base string, round int) int {
	n := 0
	for _, a := range readAcks(t, base) {
		if a.round == round {
			n++
		}
	}
	return n
}
