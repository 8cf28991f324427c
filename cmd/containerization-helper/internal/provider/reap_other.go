//go:build !linux

package provider

// initProc identifies a container's init (Linux only).
type initProc struct{}

// remember does nothing off Linux, where no container runs.
func (p *cli) remember(State) {}

// rememberPid does nothing off Linux.
func (p *cli) rememberPid(string, int) {}

// reapInit does nothing off Linux.
func (p *cli) reapInit(string) {}
