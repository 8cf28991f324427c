//go:build !linux

package manager

import (
	"context"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/store"
)

func (m *Manager) spawn(ctx context.Context, md *store.Metadata) error {
	return wire.Errorf(api.CodeRuntimeNotImplemented, "the host runtime needs Linux")
}
