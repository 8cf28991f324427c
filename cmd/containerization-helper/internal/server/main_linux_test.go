package server

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMain makes the test binary a child subreaper, as the helper is
// (Open): container inits are reparented here when the runtime exits, the
// provider's Delete reaps them, and any left are reaped at the end.
func TestMain(m *testing.M) {
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	code := m.Run()
	for {
		pid, err := unix.Wait4(-1, nil, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			break
		}
	}
	os.Exit(code)
}
