//go:build linux

package manager

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/holder"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// spawnTimeout bounds the wait for a holder's ready line.
const spawnTimeout = 15 * time.Second

// spawn writes the intent record, starts the holder in a session of its
// own (so it outlives supervisord) and waits for its ready line on fd 3.
// While the holder starts, the instance record (agent.env, metadata.json)
// is made durable; the intent record and the post-spawn metadata are only
// atomic (docs/supervisord.md, "Durability"). The caller holds the
// instance lock.
func (m *Manager) spawn(ctx context.Context, md *store.Metadata) error {
	id := md.ID
	synced := make(chan error, 1)
	go func() { synced <- m.syncRecord(id) }()
	nonce := newNonce()
	if err := store.WriteJSONAtomic(m.st.Path(id, store.FileIntent), store.Intent{Nonce: nonce, CreatedAt: time.Now().UnixMilli()}); err != nil {
		return err
	}
	if err := os.MkdirAll(m.cfg.HolderDir, 0o700); err != nil {
		return err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pr.Close()
	errf, err := os.OpenFile(m.st.Path(id, store.FileHolderErr), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		pw.Close()
		return err
	}
	cmd := exec.Command(m.cfg.Exe, "holder", "-dir", m.st.Dir(id), "-sock", m.sockPath(id), "-nonce", nonce)
	cmd.Env = []string{"PATH=" + DefaultPath}
	cmd.Stderr = errf
	cmd.ExtraFiles = []*os.File{pw}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	pw.Close()
	errf.Close()
	if err != nil {
		return wire.Wrap(api.CodeInstanceSpawnFailed, "the holder could not start", err)
	}
	go cmd.Wait() // reap the holder if it ends while we run; it owns its tree
	type result struct {
		r   holder.Ready
		err error
	}
	done := make(chan result, 1)
	go func() {
		var res result
		line, err := bufio.NewReader(pr).ReadBytes('\n')
		if err == nil {
			err = json.Unmarshal(line, &res.r)
		}
		res.err = err
		done <- res
	}()
	var res result
	select {
	case res = <-done:
	case <-time.After(spawnTimeout):
		pr.Close()
		return wire.Errorf(api.CodeInstanceSpawnFailed, "the holder did not report ready in time")
	}
	if res.err != nil {
		return wire.Wrap(api.CodeInstanceSpawnFailed, "the holder ended before it was ready", res.err)
	}
	if res.r.Error != "" {
		code := api.CodeInstanceSpawnFailed
		if res.r.Code == api.CodeRuntimeUnavailable { // e.g. no network namespace: never a fallback
			code = res.r.Code
		}
		return wire.Errorf(code, "the agent could not start: %s", res.r.Error)
	}
	rec := res.r.Record
	md.Holder, md.Agent, md.PGID, md.StartedAt = rec.Holder, rec.Agent, rec.PGID, rec.StartedAt
	md.State = api.StateRunning
	md.UpdatedAt = time.Now().UnixMilli()
	if err := <-synced; err != nil {
		// The agent runs; only its record's survival of a host crash is
		// in doubt. Not a reason to report a running instance as failed.
		m.cfg.Logger.Error("instance.sync", slog.String("instance", id), slog.Any("err", err))
	}
	return m.st.SaveAtomic(md)
}

var errNoHolder = errors.New("manager: holder is not running")
