//go:build linux

package proc

import (
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
	"hostkit.dev/lib/procstat"
)

// Descendants returns every live (not zombie) descendant of root, found by
// a parent-pid scan of /proc, in no particular order.
func Descendants(root int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	kids := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		s, err := procstat.Read(pid)
		if err != nil || s.Exited() {
			continue
		}
		kids[s.PPID] = append(kids[s.PPID], pid)
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range kids[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// FreezeKill kills every descendant of root (root itself is spared; it is
// the holder): it repeatedly sends SIGSTOP to each descendant until a scan
// finds no process it has not stopped, so nothing can fork out of the
// kill, then SIGKILLs them all and SIGCONTs them. It returns the number of
// processes killed. The caller reaps them (it is their subreaper) and
// verifies with Descendants that none remains.
func FreezeKill(root int) int {
	frozen := map[int]bool{}
	for round := 0; round < 1000; round++ {
		fresh := 0
		for _, pid := range Descendants(root) {
			if !frozen[pid] {
				frozen[pid] = true
				fresh++
				_ = Kill(pid, unix.SIGSTOP)
			}
		}
		if fresh == 0 {
			break
		}
	}
	for pid := range frozen {
		_ = Kill(pid, unix.SIGKILL)
	}
	for pid := range frozen {
		_ = Kill(pid, unix.SIGCONT)
	}
	return len(frozen)
}

// WaitNone waits until root has no live descendant or timeout passes, and
// reports whether none remains.
func WaitNone(root int, timeout time.Duration) bool {
	end := time.Now().Add(timeout)
	for {
		if len(Descendants(root)) == 0 {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}
