//go:build linux

package holder

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"hostkit.dev/cmd/supervisord/internal/store"
)

// AgentExec is `supervisord agent-exec -dir D` (hidden), the process a
// tmux pane starts: it reads the agent's command, working directory and
// uid from D's metadata.json and its exact environment from agent.env
// (plus the pane's TERM), makes the pane's terminal the agent's (chown to
// the agent uid, 0620), drops to the agent uid and group with no
// supplementary groups (when root), and execs the agent in place, so the
// pane's process is the agent. It returns only on failure.
func AgentExec(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("supervisord agent-exec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "instance directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var md store.Metadata
	if err := json.Unmarshal(mustRead(*dir+"/"+store.FileMetadata), &md); err != nil {
		return fmt.Errorf("agent-exec: metadata: %w", err)
	}
	env, err := store.ReadEnv(*dir + "/" + store.FileAgentEnv)
	if err != nil {
		return fmt.Errorf("agent-exec: %w", err)
	}
	env = StripEnv(env)
	if term := os.Getenv("TERM"); term != "" { // the pane's terminal type wins
		kept := env[:0]
		for _, kv := range env {
			if !strings.HasPrefix(kv, "TERM=") {
				kept = append(kept, kv)
			}
		}
		env = append(kept, "TERM="+term)
	}
	spec := md.Spec
	if len(spec.Command) == 0 {
		return fmt.Errorf("agent-exec: no command")
	}
	path, err := lookPath(spec.Command[0], env)
	if err != nil {
		return err
	}
	if spec.AgentUID >= 0 && os.Geteuid() == 0 {
		uid := spec.AgentUID
		if err := unix.Fchown(0, uid, uid); err != nil {
			return fmt.Errorf("agent-exec: chown terminal: %w", err)
		}
		_ = unix.Fchmod(0, 0o620)
		// syscall's set*id calls apply to every thread of the process.
		if err := syscall.Setgroups(nil); err != nil {
			return fmt.Errorf("agent-exec: setgroups: %w", err)
		}
		if err := syscall.Setresgid(uid, uid, uid); err != nil {
			return fmt.Errorf("agent-exec: setresgid: %w", err)
		}
		if err := syscall.Setresuid(uid, uid, uid); err != nil {
			return fmt.Errorf("agent-exec: setresuid: %w", err)
		}
	}
	if err := os.Chdir(spec.WorkingDir); err != nil {
		return fmt.Errorf("agent-exec: %w", err)
	}
	resetSignals()
	return syscall.Exec(path, spec.Command, env)
}

// resetSignals sets every catchable signal to its default action (and
// unblocks all) right before exec, so that the agent inherits no ignored
// signal from tmux (SIGTTIN, SIGTTOU) or from this process. A handler
// (Go's) resets to default across exec anyway; an ignored one would not.
func resetSignals() {
	var dfl [4]uint64 // struct sigaction: handler SIG_DFL, no flags, empty mask
	for sig := 1; sig <= 64; sig++ {
		if sig == int(unix.SIGKILL) || sig == int(unix.SIGSTOP) {
			continue
		}
		unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
	}
	var none unix.Sigset_t
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &none, nil)
}
