//go:build linux

package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"hostkit.dev/cmd/supervisord/internal/fault"
	"hostkit.dev/cmd/supervisord/internal/holder"
)

// MaxHolderPool bounds Config.HolderPool.
const MaxHolderPool = 64

// poolRetry is the filler's pause after a holder failed to start.
const poolRetry = time.Second

// pooledHolder is a started holder: `supervisord holder -hdir H`, in a
// session of its own, with fd 3 the other end of ch. Until it receives
// an Assignment it holds nothing of any instance (holder.Assignment).
type pooledHolder struct {
	cmd  *exec.Cmd
	ch   *net.UnixConn // supervisord's end of the channel (SOCK_SEQPACKET)
	done chan struct{} // closed once the process has been reaped
}

// startHolder starts one holder. The channel is a socketpair made here,
// close-on-exec on our side, so only this holder gets its other end.
func startHolder(exe, hdir string) (*pooledHolder, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("manager: holder channel: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "holder-channel"), os.NewFile(uintptr(fds[1]), "holder-channel")
	defer theirs.Close()
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, fmt.Errorf("manager: holder channel: %w", err)
	}
	cmd := exec.Command(exe, "holder", "-hdir", hdir)
	cmd.Env = []string{"PATH=" + DefaultPath}
	cmd.ExtraFiles = []*os.File{theirs} // fd 3; stdin, stdout, stderr: /dev/null until assigned
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		c.Close()
		return nil, err
	}
	ph := &pooledHolder{cmd: cmd, ch: c.(*net.UnixConn), done: make(chan struct{})}
	go func() { cmd.Wait(); close(ph.done) }() // its tree is its own: we only reap the holder
	return ph, nil
}

// read returns the holder's next message, waiting until deadline.
func (ph *pooledHolder) read(deadline time.Time) (holder.Ready, error) {
	var r holder.Ready
	buf := make([]byte, 64<<10)
	ph.ch.SetReadDeadline(deadline)
	n, err := ph.ch.Read(buf)
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(buf[:n], &r)
}

// assign gives ph its instance and returns its Ready message (the
// agent's identity, or why it could not start). sent reports whether the
// assignment reached the holder: when not, nothing of the instance
// happened and another holder may take it. The channel stays open for
// recorded.
func (ph *pooledHolder) assign(a holder.Assignment, timeout time.Duration) (r holder.Ready, sent bool, err error) {
	b, err := json.Marshal(a)
	if err != nil {
		return r, false, err
	}
	deadline := time.Now().Add(timeout)
	ph.ch.SetWriteDeadline(deadline)
	if _, err := ph.ch.Write(b); err != nil {
		return r, false, err
	}
	fault.Point(fault.ProvisionAssigned)
	for {
		r, err = ph.read(deadline)
		if err != nil || !r.Idle { // a fresh holder's idle message comes first
			return r, true, err
		}
	}
}

// recorded waits (until deadline) for the holder to close its end of the
// channel, which it does once holder.json is written after its Ready
// message, or by ending; then it closes ours.
func (ph *pooledHolder) recorded(deadline time.Time) {
	defer ph.ch.Close()
	for {
		if _, err := ph.read(deadline); err != nil {
			return
		}
	}
}

// discard ends an unassigned holder: closing the channel makes it exit;
// one that does not within a second is killed. Either way it is reaped.
func (ph *pooledHolder) discard() {
	ph.ch.Close()
	select {
	case <-ph.done:
		return
	case <-time.After(time.Second):
	}
	ph.cmd.Process.Kill()
	<-ph.done
}

// holderPool keeps up to size holders started and idle, so that a
// provision does not wait for the exec and start-up of a Go program
// (docs/supervisord.md, "Holder pool").
type holderPool struct {
	exe, hdir string
	size      int
	log       *slog.Logger
	idle      chan *pooledHolder
	want      chan struct{} // wakes the filler
}

func newHolderPool(exe, hdir string, size int, log *slog.Logger) *holderPool {
	size = max(0, min(size, MaxHolderPool))
	return &holderPool{exe: exe, hdir: hdir, size: size, log: log,
		idle: make(chan *pooledHolder, max(size, 1)), want: make(chan struct{}, 1)}
}

// get returns an idle holder, or starts one when none is idle (the pool
// is off, empty, or not running).
func (p *holderPool) get() (*pooledHolder, error) {
	for {
		select {
		case ph := <-p.idle:
			select {
			case <-ph.done: // it died while idle
				continue
			default:
				return ph, nil
			}
		default:
			return startHolder(p.exe, p.hdir)
		}
	}
}

// refill wakes the filler (after a take, once the provision that took a
// holder is past its own start, so the two do not race for the CPU).
func (p *holderPool) refill() {
	select {
	case p.want <- struct{}{}:
	default:
	}
}

// run keeps the pool filled until ctx ends, then ends every idle holder
// and waits for them: none outlives supervisord's shutdown. Should
// supervisord crash instead, each idle holder reads EOF on its channel
// and exits.
func (p *holderPool) run(ctx context.Context) {
	defer p.drain()
	if p.size == 0 {
		<-ctx.Done()
		return
	}
	for {
		for len(p.idle) < p.size && ctx.Err() == nil {
			if err := p.add(); err != nil {
				p.log.Error("holder.pool", slog.Any("err", err))
				select {
				case <-ctx.Done():
				case <-time.After(poolRetry):
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-p.want:
		}
	}
}

// add starts one holder and puts it in the pool once it reports idle.
func (p *holderPool) add() error {
	ph, err := startHolder(p.exe, p.hdir)
	if err != nil {
		return err
	}
	r, err := ph.read(time.Now().Add(spawnTimeout))
	if err == nil && !r.Idle {
		err = errors.New("manager: a pooled holder did not report idle: " + r.Error)
	}
	if err != nil {
		ph.discard()
		return err
	}
	select {
	case p.idle <- ph:
	default:
		ph.discard()
	}
	return nil
}

// drain ends every idle holder.
func (p *holderPool) drain() {
	for {
		select {
		case ph := <-p.idle:
			ph.discard()
		default:
			return
		}
	}
}
