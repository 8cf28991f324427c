//go:build linux

package holder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
	api "hostkit.dev/lib/api/supervisordapi"

	"hostkit.dev/cmd/supervisord/internal/store"
)

// chanFD is the holder's end of its channel to supervisord.
const chanFD = 3

// maxMsg bounds one channel message (an Assignment or a Ready is far
// smaller; SOCK_SEQPACKET keeps each one a single packet).
const maxMsg = 64 << 10

// errUnassigned means the channel closed, or the holder was told to end,
// before an assignment came: the holder held nothing and just ends.
var errUnassigned = errors.New("holder: channel closed before an assignment")

// await prepares what belongs to no instance, reports itself idle and
// waits for its Assignment. On one, it points fd 2 at the instance's
// holder.err and returns the channel (for the Ready message) and the
// holder's configuration. Until then the holder has no instance directory,
// socket, terminal, uid or environment of any instance.
func await(ctx context.Context, hdir string) (*net.UnixConn, Config, error) {
	// Whatever supervisord inherited without close-on-exec (from its own
	// parent) reached us too: mark it close-on-exec, so the agent starts
	// with its terminal or pipes on 0-2 and nothing else.
	closeOnExecFrom(chanFD + 1)
	f := os.NewFile(chanFD, "holder-channel")
	c, err := net.FileConn(f) // a close-on-exec duplicate: no agent ever inherits the channel
	f.Close()
	if err != nil {
		return nil, Config{}, fmt.Errorf("holder: channel: %w", err)
	}
	ch, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, Config{}, errors.New("holder: channel: fd 3 is not a Unix socket")
	}
	prewarm()
	// A holder started for a provision (the pool was empty) is sent its
	// assignment at once: should supervisord die before this idle message
	// is written, the write fails but the assignment is queued, and the
	// read below still gets it (the restarted supervisord waits for this
	// holder, named in the provision intent). Only an empty channel at
	// EOF means nothing was assigned.
	_ = writeMsg(ch, Ready{Idle: true})
	stop := context.AfterFunc(ctx, func() { ch.SetReadDeadline(time.Unix(1, 0)) })
	buf := make([]byte, maxMsg)
	n, err := ch.Read(buf)
	stop()
	if err != nil { // io.EOF: supervisord closed its end (shutdown, crash, pool emptied)
		ch.Close()
		return nil, Config{}, errUnassigned
	}
	fail := func(err error) (*net.UnixConn, Config, error) {
		_ = writeMsg(ch, Ready{Error: err.Error(), Code: api.CodeInstanceSpawnFailed})
		ch.Close()
		return nil, Config{}, err
	}
	var a Assignment
	if err := json.Unmarshal(buf[:n], &a); err != nil {
		return fail(fmt.Errorf("holder: assignment: %w", err))
	}
	cfg, err := a.Config(hdir)
	if err != nil {
		return fail(err)
	}
	errf, err := os.OpenFile(cfg.Dir+"/"+store.FileHolderErr, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fail(err)
	}
	err = unix.Dup3(int(errf.Fd()), 2, 0) // slog, panics and the runtime write to fd 2
	errf.Close()
	if err != nil {
		return fail(err)
	}
	return ch, cfg, nil
}

// closeOnExecFrom sets close-on-exec on every fd from lo up
// (close_range(2), Linux 5.11; else one fcntl per fd in /proc/self/fd).
func closeOnExecFrom(lo int) {
	if unix.CloseRange(uint(lo), ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= lo {
			unix.CloseOnExec(fd)
		}
	}
}

// prewarm does, before the holder is needed, the one-time work of a Go
// process that would otherwise land on the provision path: os/exec's probe
// of pidfd support (pidfd_open, waitid and a clone, made on the first
// start of a process) and encoding/json's per-type codecs.
func prewarm() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		p.Release()
	}
	var md store.Metadata
	_ = json.Unmarshal([]byte(`{"spec":{"command":["x"]},"agent":{"pid":1}}`), &md)
	_, _ = json.Marshal(Ready{})
}

// writeMsg sends m as one JSON packet.
func writeMsg(ch *net.UnixConn, m Ready) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	ch.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err = ch.Write(b)
	return err
}
