//go:build linux

package manager

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/fault"
	"hostkit.dev/cmd/supervisord/internal/holder"
	"hostkit.dev/cmd/supervisord/internal/proc"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// spawnTimeout bounds the wait for a holder's ready line.
const spawnTimeout = 15 * time.Second

// spawn takes a holder (an idle one from the pool, else a freshly started
// one; each in a session of its own, so it outlives supervisord), records
// it in the provision intent, gives it the instance and waits for its
// Ready message, then for holder.json. Once the agent runs, the
// post-spawn metadata.json (intent cleared) is written and the instance
// record (agent.env, metadata.json, their directory entries) made
// durable, while the audit "after" record is fsynced and the holder
// writes holder.json: on ext4 those fsyncs share one journal commit,
// where a sync running during the holder's start made each of its file
// operations wait for commits (docs/supervisord.md, "Durability"). The
// caller holds the instance lock.
func (m *Manager) spawn(ctx context.Context, md *store.Metadata) error {
	id := md.ID
	if md.Intent == nil { // Provision writes it first; a spawn is always part of one
		md.Intent = &store.Intent{Op: store.OpProvision, Nonce: newNonce(), CreatedAt: time.Now().UnixMilli(), Invocation: id}
	}
	if err := os.MkdirAll(m.cfg.HolderDir, 0o700); err != nil {
		return err
	}
	a := holder.Assignment{Dir: m.st.Dir(id), Sock: m.sockPath(id), Nonce: md.Intent.Nonce}
	// The holder's identity goes into the intent, with agent.env's bundle
	// record (one atomic write), before the assignment is sent: a restart
	// that finds the intent waits for that holder rather than undo an
	// instance it is starting.
	record := func(hid proc.Identity) error {
		md.Intent.Holder = &hid
		if err := m.st.SaveAtomic(md); err != nil {
			return err
		}
		fault.Point(fault.ProvisionRecord)
		return nil
	}
	r, recorded, err := m.h.start(a, record)
	if recorded != nil {
		// The answer waits for holder.json too (written by the holder
		// right after its Ready message, while we save metadata.json):
		// once acknowledged, an instance has both records.
		defer recorded(time.Now().Add(spawnTimeout))
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return wire.Wrap(api.CodeInstanceSpawnFailed, "the holder did not report ready in time", err)
	case err != nil:
		return wire.Wrap(api.CodeInstanceSpawnFailed, "the holder ended before it was ready", err)
	}
	if r.Error != "" {
		code := api.CodeInstanceSpawnFailed
		if r.Code == api.CodeNetworkUnavailable || r.Code == api.CodeRuntimeUnavailable || r.Code == api.CodeNetworkNftUnavailable { // e.g. no network namespace or no nftables: never a fallback
			code = r.Code
		}
		return wire.Errorf(code, "the agent could not start: %s", r.Error)
	}
	// The agent runs: from here on the provision succeeds, so its audit
	// "after" record may be written while the rest finishes.
	decided(ctx)
	rec := r.Record
	md.Holder, md.Agent, md.PGID, md.StartedAt = rec.Holder, rec.Agent, rec.PGID, rec.StartedAt
	md.State = api.StateRunning
	md.Intent = nil // the provision is done: reconcile adopts the instance like any other
	md.UpdatedAt = time.Now().UnixMilli()
	if err := m.st.SaveAtomic(md); err != nil {
		// holder.json holds the same facts, and reconcile reads it (the
		// intent, still on disk, names the holder): not a reason to
		// report a running agent as failed.
		m.cfg.Logger.Error("instance.save", slog.String("instance", id), slog.Any("err", err))
	}
	if err := m.syncRecord(id); err != nil { // with the post-spawn metadata.json
		// The agent runs; only its record's survival of a host crash is
		// in doubt. Not a reason to report a running instance as failed.
		m.cfg.Logger.Error("instance.sync", slog.String("instance", id), slog.Any("err", err))
	}
	fault.Point(fault.ProvisionRunning)
	return nil
}

// start is holders.start with the pool's holders; it wakes the pool's
// filler once the provision that took a holder is past its own start,
// so the two do not race for the CPU.
func (h procHolders) start(a holder.Assignment, record func(proc.Identity) error) (holder.Ready, func(time.Time), error) {
	r, ph, err := h.assign(a, record)
	h.pool.refill()
	if ph == nil {
		return r, nil, err
	}
	return r, ph.recorded, err
}

// assign gives instance a to a holder and returns its Ready message and
// the holder (nil when none took the assignment). A pooled holder that
// cannot take the assignment (it died while idle) is replaced once by a
// fresh one: the assignment never reached it, so nothing of the instance
// happened there.
func (h procHolders) assign(a holder.Assignment, record func(proc.Identity) error) (holder.Ready, *pooledHolder, error) {
	var err error
	for try := 0; try < 2; try++ {
		var ph *pooledHolder
		if ph, err = h.pool.get(); err != nil {
			return holder.Ready{}, nil, err
		}
		hid, ierr := proc.Identify(ph.cmd.Process.Pid)
		if ierr != nil {
			err = ierr
			ph.discard()
			continue
		}
		if err = record(hid); err != nil {
			ph.discard()
			return holder.Ready{}, nil, err
		}
		r, sent, aerr := ph.assign(a, spawnTimeout)
		if sent {
			return r, ph, aerr
		}
		err = aerr
		ph.discard()
	}
	return holder.Ready{}, nil, err
}
