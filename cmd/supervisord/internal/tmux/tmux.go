// Package tmux builds the tmux command lines of the tmux session backend
// (docs/supervisord.md, "Session backends, isolated network, restart"): one
// tmux server per instance on its own socket, the agent in the single pane of
// session "agent", the pane's output piped to a FIFO the holder drains into
// the log and ring, and the pane kept after its process exits
// (remain-on-exit) so its exit status can be read.
//
// Every argument is supervisord's own (socket, binary, instance directory
// and FIFO paths): the agent's argv never passes through tmux's command
// parser, where an argument ending in ';' would split the command. The
// pane runs `supervisord agent-exec -dir D`, which reads the command and
// environment from the instance directory and execs the agent.
package tmux

import (
	"errors"
	"strconv"
	"strings"

	api "hostkit.dev/lib/api/supervisordapi"
)

// Session is the name of the instance's tmux session (target "agent:").
const Session = "agent"

// StartArgs returns the argv (after the tmux binary) that starts the
// server on sock with one detached session of rows×cols running paneCmd,
// without reading any tmux configuration file, and pipes the pane's output
// to fifo. The commands run in one client invocation, in order, before the
// server reads any pane output, so no output is missed.
func StartArgs(sock string, rows, cols uint16, fifo string, paneCmd []string) []string {
	a := []string{"-S", sock, "-f", "/dev/null", "-u",
		"set-option", "-g", "remain-on-exit", "on", ";",
		"set-option", "-g", "status", "off", ";",
		"set-option", "-g", "history-limit", "10000", ";",
		"new-session", "-d", "-s", Session, "-x", strconv.Itoa(int(cols)), "-y", strconv.Itoa(int(rows))}
	a = append(a, paneCmd...)
	return append(a, ";", "pipe-pane", "-O", "-t", Session+":", "exec cat >"+Quote(fifo))
}

// QueryArgs returns the argv that prints the pane's state as parsed by
// ParsePane.
func QueryArgs(sock string) []string {
	return []string{"-S", sock, "display-message", "-p", "-t", Session + ":",
		"#{pane_pid} #{pid} #{pane_dead}|#{pane_dead_status}|#{pane_dead_signal}"}
}

// KillArgs returns the argv that ends the server.
func KillArgs(sock string) []string { return []string{"-S", sock, "kill-server"} }

// Pane is the state of the session's pane.
type Pane struct {
	PID       int             // the pane's process (the agent)
	ServerPID int             // the tmux server
	Dead      bool            // the pane's process has exited
	Exit      *api.ExitStatus // its exit status; nil until tmux has reaped it
}

// ParsePane parses QueryArgs' output. signame maps a signal number to its
// name (SIGKILL).
func ParsePane(out string, signame func(int) string) (Pane, error) {
	var p Pane
	f := strings.Fields(strings.SplitN(strings.TrimSpace(out), "\n", 2)[0])
	if len(f) != 3 {
		return p, errors.New("tmux: unexpected pane query output")
	}
	var err1, err2 error
	p.PID, err1 = strconv.Atoi(f[0])
	p.ServerPID, err2 = strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || p.PID <= 0 {
		return p, errors.New("tmux: bad pids in pane query output")
	}
	st := strings.Split(f[2], "|")
	if len(st) != 3 {
		return p, errors.New("tmux: bad pane state")
	}
	p.Dead = st[0] == "1"
	if !p.Dead {
		return p, nil
	}
	switch {
	case st[2] != "":
		n, err := strconv.Atoi(st[2])
		if err != nil {
			return p, errors.New("tmux: bad pane signal")
		}
		p.Exit = &api.ExitStatus{Signal: signame(n)}
	case st[1] != "":
		n, err := strconv.Atoi(st[1])
		if err != nil {
			return p, errors.New("tmux: bad pane status")
		}
		p.Exit = &api.ExitStatus{Code: int64(n)}
	default:
		// tmux reports the pane dead once its terminal closes, which can
		// come before it has reaped the process: no status yet.
	}
	return p, nil
}

// Quote single-quotes s for sh(1).
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
