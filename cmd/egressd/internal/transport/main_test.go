package transport

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: a
// connection's reader or writer, a server handler, a body copy.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
