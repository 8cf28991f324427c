package provider

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
	"hostkit.dev/lib/procstat"
)

// initProc identifies a container's init: its pid and start time.
type initProc struct {
	pid   int
	start uint64
}

// reapBudget bounds how long Delete waits for a deleted container's init
// to become a zombie it can reap.
const reapBudget = 2 * time.Second

// remember records the init of a live container (from state or list) for
// reapInit; a stopped one keeps what was recorded while it lived.
func (p *cli) remember(st State) {
	if st.Pid > 0 && st.Status != StatusStopped {
		p.rememberPid(st.ID, st.Pid)
	}
}

// rememberPid records pid as id's init, with its start time.
func (p *cli) rememberPid(id string, pid int) {
	ps, err := procstat.Read(pid)
	if err != nil || ps.Session != pid { // an init is a session leader (setsid in runc's nsexec and crun)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inits[id] = initProc{pid: pid, start: ps.StartTime}
}

// reapInit reaps the deleted container id's init if this process adopted
// it. The runtime exits right after create and the init is reparented to
// the nearest child subreaper, which the helper is (procexec's doc asks
// it to be); nobody else reaps it, and procexec reaps only its own process
// groups. Only a process that is still the one recorded (same pid, same
// start time, its own session) and whose parent is this process is waited
// for, so no other child's status is ever taken.
func (p *cli) reapInit(id string) {
	p.mu.Lock()
	ip, ok := p.inits[id]
	delete(p.inits, id)
	p.mu.Unlock()
	if !ok {
		return
	}
	deadline := time.Now().Add(reapBudget)
	for {
		ps, err := procstat.Read(ip.pid)
		if err != nil || ps.StartTime != ip.start || ps.Session != ip.pid || ps.PPID != os.Getpid() {
			return // gone, reused, or not ours to reap
		}
		if ps.State == 'Z' {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(ip.pid, &ws, unix.WNOHANG, nil)
			return
		}
		if time.Now().After(deadline) {
			p.log.Warn("provider.reap", "runtime", p.name, "id", id, "outcome", "init still alive after delete")
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
