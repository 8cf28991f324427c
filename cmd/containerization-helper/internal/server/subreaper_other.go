//go:build !linux

package server

import "errors"

// BecomeSubreaper fails: the helper runs on Linux only.
func BecomeSubreaper() error { return errors.New("server: no child subreaper on this platform") }
