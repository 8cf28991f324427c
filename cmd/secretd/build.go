package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path/filepath"

	"hostkit.dev/cmd/secretd/internal/credential"
	"hostkit.dev/cmd/secretd/internal/credsrc"
	"hostkit.dev/cmd/secretd/internal/lease"
	"hostkit.dev/cmd/secretd/internal/secmem"
	"hostkit.dev/cmd/secretd/internal/server"
	"hostkit.dev/cmd/secretd/internal/store"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/daemon"
)

// deps are secretd's wired parts, closed in reverse order.
type deps struct {
	log   *slog.Logger
	alloc *secmem.Allocator
	audit *audit.Log
	reg   *credential.Registry
	table *lease.Table
	srv   *server.Server
}

// build opens the audit log and the store, imports systemd credentials,
// and makes the lease table and server. Credential values are not
// registered with the log scrubber: it would keep them as Go strings,
// which cannot be zeroed; values never reach a logger by construction.
func build(env *daemon.Env, cfg *Config) (*deps, error) {
	d := &deps{log: env.Logger}
	var epoch [lease.EpochLen]byte
	if n, err := hex.Decode(epoch[:], []byte(env.Epoch)); err != nil || n != lease.EpochLen {
		return nil, fmt.Errorf("secretd: epoch %q is not 16 hex characters", env.Epoch)
	}
	alloc := secmem.New(env.Logger)
	d.alloc = alloc
	st, err := store.Open(filepath.Join(env.Layout.StateDir(daemon.NameSecretd), "credentials"))
	if err != nil {
		return nil, err
	}
	if d.audit, err = daemon.OpenAudit(env.Layout, daemon.NameSecretd, env.Scrubber); err != nil {
		return nil, fmt.Errorf("secretd: audit log: %w", err)
	}
	d.reg = credential.NewRegistry(st, alloc, nil)
	stored, bad, err := st.Load(alloc)
	if err != nil {
		d.close(context.Background())
		return nil, err
	}
	for _, e := range bad {
		env.Logger.Error("secretd.credential_unreadable", slog.String("dir", st.Dir()), slog.String("err", e.Error()))
	}
	imported, err := credsrc.Load(cfg.CredentialsDir, alloc)
	if err != nil {
		for _, c := range stored {
			c.Value.Free()
		}
		d.close(context.Background())
		return nil, err
	}
	d.reg.Add(stored...)
	for _, name := range d.reg.Add(imported.Credentials...) {
		env.Logger.Warn("secretd.credential_shadowed", slog.String("credential", name),
			slog.String("effect", "the $CREDENTIALS_DIRECTORY credential replaces the stored one of the same name"))
	}
	logStartup(env.Logger, len(stored), len(imported.Credentials), imported.Unused)
	if d.table, err = lease.New(lease.Config{Epoch: epoch, MaxLeases: cfg.MaxLeases, Alloc: alloc}); err != nil {
		d.close(context.Background())
		return nil, err
	}
	d.srv = server.New(server.Config{Registry: d.reg, Leases: d.table, Alloc: alloc, Logger: env.Logger, Audit: d.auditor()})
	return d, nil
}

// auditor adapts the audit log to the server's Auditor; a failed append
// is logged, never dropped silently.
func (d *deps) auditor() server.Auditor {
	return func(ctx context.Context, ev server.Event) {
		_, err := d.audit.Append(context.WithoutCancel(ctx), audit.Record{
			Actor:   audit.Actor{UID: int(ev.Peer.UID), PID: int(ev.Peer.PID)},
			Op:      ev.Op,
			Outcome: audit.Outcome(ev.Outcome),
			Code:    ev.Code,
			Corr:    ev.Corr,
			Fields:  ev.Fields,
		})
		if err != nil {
			d.log.Error("audit.append_failed", slog.String(daemon.KeyOp, ev.Op), slog.Any(daemon.KeyErr, err))
		}
	}
}

// close flushes flood summaries, zeroes every value and closes the audit
// log.
func (d *deps) close(ctx context.Context) {
	if d.srv != nil {
		d.srv.FlushFloods(ctx, true)
	}
	if d.table != nil {
		d.table.Close()
	}
	if d.reg != nil {
		d.reg.Close()
	}
	if d.alloc != nil {
		d.alloc.Close()
	}
	if d.audit != nil {
		if err := d.audit.Close(); err != nil {
			d.log.Error("audit.close_failed", slog.Any(daemon.KeyErr, err))
		}
	}
}
