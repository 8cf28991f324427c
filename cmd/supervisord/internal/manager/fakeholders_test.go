//go:build linux

package manager

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/holder"
	"hostkit.dev/cmd/supervisord/internal/proc"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// journal records, in order, what the holder side and the daemons were
// asked to do, so that a test can check the order of an operation's
// steps across them.
type journal struct {
	mu sync.Mutex
	ev []string
}

func (j *journal) add(format string, a ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.ev = append(j.ev, fmt.Sprintf(format, a...))
}

// list returns the events so far whose first word is one of kinds (every
// event when kinds is empty).
func (j *journal) list(kinds ...string) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := []string{}
	for _, e := range j.ev {
		kind, _, _ := strings.Cut(e, " ")
		if len(kinds) == 0 || slices.Contains(kinds, kind) {
			out = append(out, e)
		}
	}
	return out
}

// fakeHolders is the holder side of a manager under test. Its holders
// are entries in maps, plus the files a real holder writes in the
// instance directory (holder.json after the agent started, exit.json
// when the tree ended): the manager reads those from disk as it does in
// production. Faults a real holder only shows under a crash or a broken
// host (it cannot start, it refuses the agent) are set in fields.
type fakeHolders struct {
	j    *journal
	root string // the instances directory

	mu       sync.Mutex
	live     map[string]bool  // instance id → its holder runs (alive)
	procs    map[int]bool     // holder pids that still run (running)
	restarts map[string]int64 // instance id → on-failure restarts its holder reports
	pid      int              // the last holder pid handed out
	startErr error            // start fails before any holder took the assignment
	refuse   string           // a holder takes the assignment but cannot start the agent: Ready's code
}

func newFakeHolders(j *journal, root string) *fakeHolders {
	return &fakeHolders{j: j, root: root, live: map[string]bool{}, procs: map[int]bool{}, restarts: map[string]int64{}, pid: 1000}
}

// setLive makes instance id's holder run (or end, without a trace).
func (h *fakeHolders) setLive(id string, on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live[id] = on
}

// setRunning makes the process pid (a holder named in an intent) run.
func (h *fakeHolders) setRunning(pid int, on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.procs[pid] = on
}

func (h *fakeHolders) start(a holder.Assignment, record func(proc.Identity) error) (holder.Ready, func(time.Time), error) {
	id := filepath.Base(a.Dir)
	h.mu.Lock()
	h.pid += 2
	hid := proc.Identity{PID: h.pid, StartTime: 100, BootID: "boot"}
	startErr, refuse := h.startErr, h.refuse
	h.mu.Unlock()
	if startErr != nil {
		h.j.add("holder.start %s failed", id)
		return holder.Ready{}, nil, startErr
	}
	if err := record(hid); err != nil {
		h.j.add("holder.start %s record_failed", id)
		return holder.Ready{}, nil, err
	}
	// What the holder would find on disk when the assignment reaches it.
	md, err := store.Store{Root: h.root}.Load(id)
	switch {
	case err != nil:
		h.j.add("holder.start %s metadata=%v", id, err)
	case md.Intent == nil || md.Intent.Holder == nil || *md.Intent.Holder != hid:
		h.j.add("holder.start %s holder_unrecorded", id)
	default:
		h.j.add("holder.start %s intent=%s", id, md.Intent.Op)
	}
	if refuse != "" {
		return holder.Ready{Error: "the agent could not start", Code: refuse}, func(time.Time) {}, nil
	}
	rec := store.HolderRecord{Nonce: a.Nonce, Holder: hid, Agent: proc.Identity{PID: hid.PID + 1, StartTime: 101, BootID: "boot"},
		PGID: hid.PID + 1, StartedAt: time.Now().UnixMilli()}
	h.setLive(id, true)
	recorded := func(time.Time) {
		if err := store.WriteJSONAtomic(filepath.Join(a.Dir, store.FileHolder), rec); err != nil {
			h.j.add("holder.recorded %s %v", id, err)
		}
	}
	return holder.Ready{Record: rec}, recorded, nil
}

func (h *fakeHolders) alive(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.live[id]
}

func (h *fakeHolders) status(ctx context.Context, id string) (*holder.Status, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.live[id] {
		return nil, wire.Errorf(wire.CodeUnavailable, "no holder listens")
	}
	return &holder.Status{State: api.StateRunning, Restarts: h.restarts[id], AgentPID: 7, PGID: 7}, nil
}

// stop ends the tree as a holder does: exit.json (stopped), then the
// holder ends.
func (h *fakeHolders) stop(ctx context.Context, id string, timeoutMS int64) error {
	h.j.add("holder.stop %s %d", id, timeoutMS)
	h.mu.Lock()
	live := h.live[id]
	delete(h.live, id)
	h.mu.Unlock()
	if !live {
		return wire.Errorf(wire.CodeUnavailable, "no holder listens")
	}
	ex := store.ExitRecord{Exit: api.ExitStatus{Signal: "SIGTERM"}, Stopped: true, ExitedAt: time.Now().UnixMilli()}
	return store.WriteJSONAtomic(filepath.Join(h.root, id, store.FileExit), ex)
}

func (h *fakeHolders) signal(ctx context.Context, id string, n int64) error {
	h.j.add("holder.signal %s %d", id, n)
	return nil
}

func (h *fakeHolders) running(p proc.Identity) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.procs[p.PID]
}

func (h *fakeHolders) kill(p proc.Identity) {
	h.j.add("holder.kill %d", p.PID)
	h.setRunning(p.PID, false)
}

func (h *fakeHolders) killOrphan(md *store.Metadata) bool {
	h.j.add("holder.kill_orphan %s %d", md.ID, md.Agent.PID)
	return md.Agent.PID > 1
}
