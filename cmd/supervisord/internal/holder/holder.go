package holder

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"hostkit.dev/cmd/supervisord/internal/netns"
	"hostkit.dev/cmd/supervisord/internal/store"
	api "hostkit.dev/lib/api/supervisordapi"
)

// Config is a holder's command line: `supervisord holder -dir D -sock S
// -nonce N` (with fd 3 the ready pipe).
type Config struct {
	Dir   string // the instance directory
	Sock  string // the holder socket path
	Nonce string // the spawn's intent nonce, echoed in holder.json
}

// ParseArgs parses the holder's arguments.
func ParseArgs(args []string, stderr io.Writer) (Config, error) {
	fs := flag.NewFlagSet("supervisord holder", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c Config
	fs.StringVar(&c.Dir, "dir", "", "instance directory")
	fs.StringVar(&c.Sock, "sock", "", "holder socket path")
	fs.StringVar(&c.Nonce, "nonce", "", "spawn nonce")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.Dir == "" || c.Sock == "" {
		return c, fmt.Errorf("holder: -dir and -sock are required")
	}
	return c, nil
}

// Ready is the one JSON line a holder writes to its ready pipe (fd 3):
// the agent's identity, or the error that kept it from starting.
type Ready struct {
	Record store.HolderRecord `json:"record"`
	Error  string             `json:"error,omitempty"`
	Code   string             `json:"code,omitempty"`
}

// holder is one running holder's state.
type holder struct {
	cfg  Config
	spec store.Spec
	log  *slog.Logger
	hub  *hub
	env  []string  // the agent's environment (agent.env), kept for restarts
	ns   *netns.NS // network isolated: the agent's namespace; nil on the host network

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

// Main runs a holder until its tree has ended and exit.json is written.
func Main(ctx context.Context, args []string, stderr io.Writer) error {
	cfg, err := ParseArgs(args, stderr)
	if err != nil {
		return err
	}
	return run(ctx, cfg, slog.New(slog.NewJSONHandler(stderr, nil)))
}
