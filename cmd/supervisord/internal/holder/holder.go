package holder

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"hostkit.dev/cmd/supervisord/internal/netns"
	"hostkit.dev/cmd/supervisord/internal/store"
	api "hostkit.dev/lib/api/supervisordapi"
)

// Config is what a holder holds: the instance it was assigned (see
// Assignment).
type Config struct {
	Dir   string // the instance directory
	Sock  string // the holder socket path
	Nonce string // the spawn's intent nonce, echoed in holder.json
}

// ParseArgs parses the holder's command line, `supervisord holder -hdir H`
// (fd 3 is its channel to supervisord), and returns H: the directory its
// socket must be in. The instance comes later, over the channel.
func ParseArgs(args []string, stderr io.Writer) (string, error) {
	fs := flag.NewFlagSet("supervisord holder", flag.ContinueOnError)
	fs.SetOutput(stderr)
	hdir := fs.String("hdir", "", "the holder socket directory (<run>/supervisord/h)")
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if *hdir == "" || !filepath.IsAbs(*hdir) || fs.NArg() > 0 {
		return "", fmt.Errorf("holder: -hdir (absolute) is required, and nothing else")
	}
	return filepath.Clean(*hdir), nil
}

// Assignment is the one message supervisord sends a holder over its
// channel (a private SOCK_SEQPACKET socketpair, the holder's end on fd 3),
// as JSON in one packet: the instance it now holds. Until it arrives a
// holder holds nothing of any instance; this is what lets supervisord keep
// a few holders started ahead of need (docs/supervisord.md, "Holder pool").
type Assignment struct {
	Dir   string `json:"dir"`   // the instance directory: absolute, clean
	Sock  string `json:"sock"`  // the holder socket: directly in the holder directory
	Nonce string `json:"nonce"` // the intent's nonce (metadata.json), echoed in holder.json
}

// Config checks a against hdir (the holder's -hdir) and returns the
// holder's configuration.
func (a Assignment) Config(hdir string) (Config, error) {
	switch {
	case a.Dir == "" || !filepath.IsAbs(a.Dir) || filepath.Clean(a.Dir) != a.Dir:
		return Config{}, fmt.Errorf("holder: assignment: bad instance directory %q", a.Dir)
	case filepath.Dir(a.Sock) != hdir || !strings.HasSuffix(a.Sock, ".sock"):
		return Config{}, fmt.Errorf("holder: assignment: socket %q is not in %s", a.Sock, hdir)
	case a.Nonce == "":
		return Config{}, fmt.Errorf("holder: assignment: no nonce")
	}
	return Config{Dir: a.Dir, Sock: a.Sock, Nonce: a.Nonce}, nil
}

// Ready is a message a holder sends over its channel, as JSON in one
// packet: first {"idle": true} once it has started and waits for its
// Assignment, then, after the assignment, one Ready with the agent's
// identity or the error that kept it from starting.
type Ready struct {
	Idle   bool               `json:"idle,omitempty"`  // the first message: started, waiting for an assignment
	Record store.HolderRecord `json:"record"`          // the agent's identity (what holder.json holds); zero on error
	Error  string             `json:"error,omitempty"` // why the agent did not start; "" on success
	Code   string             `json:"code,omitempty"`  // the error's code (e.g. instance.spawn_failed); "" on success
}

// holder is one running holder's state.
type holder struct {
	cfg  Config
	spec store.Spec
	log  *slog.Logger
	hub  *hub
	env  []string  // the agent's environment (agent.env), kept for restarts
	ns   *netns.NS // network isolated: the agent's namespace; nil on the host network

	// attaching counts the attach streams being served: once the tree
	// has ended, the holder serves on while any is (attachGrace).
	attaching atomic.Int32

	mu         sync.Mutex
	pty        *os.File        // PTY master of the current run, nil without a PTY
	leader     int             // agent pid; 0 before start
	pgid       int             // agent's process group (= leader, by Setsid)
	exit       *api.ExitStatus // set when the leader is reaped
	stopping   bool
	stopCh     chan struct{} // closed by the first stop: no restart after it
	killed     int
	leaderDone chan struct{} // closed when the leader is reaped (per run)
	treeEmpty  chan struct{} // closed when wait4 reports ECHILD after the leader was reaped (per run)
	outputDone chan struct{} // closed when the output reached EOF (per run)
	finished   chan struct{} // closed when exit.json is written

	// Restarts (restart on-failure) and the tmux backend.
	restarts   int       // restarts made, in all
	restarting bool      // waiting out a restart's backoff
	policy     backoff   // on-failure backoff state
	runStart   time.Time // when the current run started
	tmuxServer int       // tmux backend: the current run's server pid (spared by stop's SIGTERM pass)
	afterTree  func()    // per run, called once its tree is empty (tmux: ends the output FIFO)
}

// state reports the holder's state (api.State*); h.mu must be held.
func (h *holder) stateLocked() string {
	switch {
	case isClosed(h.finished) && h.stopping:
		return api.StateStopped
	case isClosed(h.finished):
		return api.StateExited
	case h.stopping:
		return api.StateStopping
	case h.restarting:
		return api.StateRestarting
	case h.exit != nil:
		return api.StateLeaderExited
	}
	return api.StateRunning
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Main runs a holder: it waits on its channel (fd 3) for its assignment,
// then runs until its tree has ended and exit.json is written. A holder
// whose channel closes before an assignment (supervisord ended or emptied
// its pool) returns nil at once: it held nothing.
func Main(ctx context.Context, args []string, stderr io.Writer) error {
	// One P: a holder's goroutines (the output drain, a sender per
	// attached client, the reaper, its socket) mostly wait, and with one P
	// the drain hands output to a sender without waking another thread,
	// and no idle thread spins looking for work: about 20% less CPU per MB
	// of bulk output (docs/supervisord.md, "Attach").
	runtime.GOMAXPROCS(1)
	hdir, err := ParseArgs(args, stderr)
	if err != nil {
		return err
	}
	ch, cfg, err := await(ctx, hdir)
	if errors.Is(err, errUnassigned) {
		return nil
	}
	if err != nil {
		return err
	}
	// await pointed fd 2 at the instance's holder.err.
	return run(ctx, cfg, ch, slog.New(slog.NewJSONHandler(os.Stderr, nil)))
}
