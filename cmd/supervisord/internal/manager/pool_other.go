//go:build !linux

package manager

import (
	"context"
	"log/slog"
)

// MaxHolderPool bounds Config.HolderPool.
const MaxHolderPool = 64

// holderPool has nothing to hold where the host runtime is not built.
type holderPool struct{}

func newHolderPool(exe, hdir string, size int, log *slog.Logger) *holderPool { return &holderPool{} }

func (p *holderPool) run(ctx context.Context) { <-ctx.Done() }
