package egresstest

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"sync"
)

// Lookups is a transport.Resolver that records every name it is asked
// and resolves none (tests reach no DNS), and records every dial
// (Dial, for transport.Config.OnDial): tests use it to show that a
// refused request was never looked up or dialled.
type Lookups struct {
	mu      sync.Mutex
	names   []string
	dialled []netip.AddrPort
}

// LookupNetIP records host and fails.
func (l *Lookups) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.names = append(l.names, host)
	return nil, errors.New("egresstest: no lookups in tests")
}

// Dial records a dial.
func (l *Lookups) Dial(a netip.AddrPort) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dialled = append(l.dialled, a)
}

// Seen returns the names looked up and the addresses dialled so far.
func (l *Lookups) Seen() ([]string, []netip.AddrPort) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.names...), append([]netip.AddrPort(nil), l.dialled...)
}

// Buffer is a bytes.Buffer safe for concurrent writers (a logger's
// output read by a test).
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
