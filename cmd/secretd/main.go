// Command secretd is hostkit's secretd daemon (docs/design.md, "The
// binaries"); its logic is in run.go and internal/.
package main

import "hostkit.dev/lib/daemon"

func main() { daemon.Main("secretd", run) }
