// Command containerization-helper is hostkit's containerization-helper,
// the one process that drives the OCI runtime (docs/design.md, "The
// binaries"); its logic is in run.go and internal/.
package main

import "hostkit.dev/lib/daemon"

func main() { daemon.Main("containerization-helper", run) }
