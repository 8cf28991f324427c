package state

import (
	"fmt"
	"time"

	"hostkit.dev/lib/wire"
)

// Fence returns instance's current fence; 0 when none was recorded.
func (s *Store) Fence(instance string) (uint64, error) {
	var n uint64
	err := s.read(func() error {
		if !ValidUUID(instance) {
			return wire.Errorf(CodeInvalid, "instance id is not a canonical UUID")
		}
		n = s.d.Fences[instance]
		return nil
	})
	return n, err
}

// AdvanceFence raises instance's fence by one, durably, and returns the
// new value (1 for an instance never fenced). Every op planned with an
// older fence becomes stale. Errors: CodeInvalid, CodeFull, CodeIO.
func (s *Store) AdvanceFence(instance string) (uint64, error) {
	var n uint64
	err := s.mutate(func(_ time.Time) error {
		if !ValidUUID(instance) {
			return wire.Errorf(CodeInvalid, "instance id is not a canonical UUID")
		}
		if _, ok := s.d.Fences[instance]; !ok && len(s.d.Fences) >= s.opt.MaxContainers {
			return wire.Errorf(CodeFull, "too many fenced instances")
		}
		n = s.d.Fences[instance] + 1
		s.d.Fences[instance] = n
		return nil
	}, nil)
	return n, err
}

// MaxFenceStep is how far ahead of an instance's recorded fence a
// request's fence may be (an instance never fenced counts as 0).
const MaxFenceStep = 1 << 16

// CheckFence reports whether an op planned with fence n may still act on
// instance: CodeFenceStale when the instance's fence has moved past n
// (n below the current fence); n equal to or above it passes. It records
// nothing. Errors: CodeFenceStale, CodeInvalid.
func (s *Store) CheckFence(instance string, n uint64) error {
	return s.read(func() error { return s.checkFence(instance, n) })
}

func (s *Store) checkFence(instance string, n uint64) error {
	if !ValidUUID(instance) {
		return wire.Errorf(CodeInvalid, "instance id is not a canonical UUID")
	}
	cur := s.d.Fences[instance]
	if n < cur {
		return &wire.Error{Code: CodeFenceStale, Msg: fmt.Sprintf("the instance's fence is %d, this request carries %d: a newer manager of the instance acted; use its fence (or a higher one)", cur, n), Retry: wire.RetryAfterObserve}
	}
	// A fence moves one generation at a time (a manager's restart); a
	// jump far ahead (e.g. 2^64-1) would lock every later generation out
	// for good.
	if n-cur > MaxFenceStep {
		return wire.Errorf(CodeInvalid, "fence %d is more than %d ahead of the instance's fence %d", n, MaxFenceStep, cur)
	}
	return nil
}

// RaiseFence is CheckFence, then records n durably as instance's fence
// when it is higher (a caller-supplied generation, e.g. supervisord's).
// Errors: CodeFenceStale, CodeInvalid, CodeFull, CodeIO.
func (s *Store) RaiseFence(instance string, n uint64) error {
	return s.mutate(func(_ time.Time) error { return s.raiseFence(instance, n) }, nil)
}

// raiseFence is RaiseFence's change; s.mu is held.
func (s *Store) raiseFence(instance string, n uint64) error {
	if err := s.checkFence(instance, n); err != nil {
		return err
	}
	if _, ok := s.d.Fences[instance]; !ok && len(s.d.Fences) >= s.opt.MaxContainers {
		return wire.Errorf(CodeFull, "too many fenced instances")
	}
	s.d.Fences[instance] = n
	return nil
}
