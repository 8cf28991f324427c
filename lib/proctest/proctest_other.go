//go:build !linux

package proctest

import "errors"

// Subreaper is Linux-only (prctl(2)); elsewhere it fails.
func Subreaper() error { return errors.New("proctest: child subreapers are Linux-only") }

// Leftovers finds nothing outside Linux.
func Leftovers() []Proc { return nil }
