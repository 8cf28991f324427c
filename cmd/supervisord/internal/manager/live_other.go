//go:build !linux

package manager

import "hostkit.dev/cmd/supervisord/internal/store"

func (m *Manager) holderAlive(id string) bool { return false }

func killOrphan(md *store.Metadata) bool { return false }

func (m *Manager) holderTook(md *store.Metadata) bool { return false }
