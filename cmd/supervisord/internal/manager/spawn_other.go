//go:build !linux

package manager

import (
	"context"
	"time"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/holder"
	"hostkit.dev/cmd/supervisord/internal/proc"
	"hostkit.dev/cmd/supervisord/internal/store"
)

func (m *Manager) spawn(ctx context.Context, md *store.Metadata) error {
	return wire.Errorf(api.CodeRuntimeNotImplemented, "the host runtime needs Linux")
}

func (h procHolders) start(a holder.Assignment, record func(proc.Identity) error) (holder.Ready, func(time.Time), error) {
	return holder.Ready{}, nil, wire.Errorf(api.CodeRuntimeNotImplemented, "the host runtime needs Linux")
}
