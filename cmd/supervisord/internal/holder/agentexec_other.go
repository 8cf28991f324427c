//go:build !linux

package holder

import (
	"io"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// AgentExec fails: the tmux backend needs Linux.
func AgentExec(args []string, stderr io.Writer) error {
	return wire.Errorf(api.CodeRuntimeNotImplemented, "the host runtime needs Linux")
}
