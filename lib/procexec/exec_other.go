//go:build !linux

package procexec

import (
	"context"

	"hostkit.dev/lib/wire"
)

// execute is not available here: the runner needs memfd output files,
// /proc/self/fd to pin the working directory, waitid(2) with WNOWAIT and /proc to verify that a killed process group is gone.
func (r *Runner) execute(context.Context, *prepared) (*Result, error) {
	return nil, wire.Errorf(CodePlatformUnsupported, "procexec runs programs only on Linux")
}
