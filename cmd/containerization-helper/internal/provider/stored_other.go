//go:build !linux

package provider

import (
	"context"
	"time"

	"hostkit.dev/cmd/containerization-helper/internal/codec"
)

// storedState needs /proc; elsewhere the runtime is always asked.
func (p *cli) storedState(codec.Codec, string) (State, bool) { return State{}, false }

// storedList needs /proc; elsewhere the runtime is always asked.
func (p *cli) storedList(codec.Codec) ([]State, bool) { return nil, false }

// waitExit needs /proc; elsewhere nothing is waited for.
func waitExit(context.Context, int, time.Duration) bool { return false }
