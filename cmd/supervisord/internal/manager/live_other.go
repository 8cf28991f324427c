//go:build !linux

package manager

import (
	"hostkit.dev/cmd/supervisord/internal/proc"
	"hostkit.dev/cmd/supervisord/internal/store"
)

func (h procHolders) alive(id string) bool { return false }

func (h procHolders) running(id proc.Identity) bool { return false }

func (h procHolders) kill(id proc.Identity) {}

func (h procHolders) killOrphan(md *store.Metadata) bool { return false }

func (m *Manager) holderTook(md *store.Metadata) bool { return false }
