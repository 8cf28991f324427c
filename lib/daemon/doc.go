// Package daemon is the lifecycle every hostkit binary shares: flags from the
// command line, the environment (the binary's prefix) and a config file
// (ff/v3, in that order of precedence); the directory layout of
// docs/design.md ("Paths", and -root); slog JSON to stderr through the
// redacting handler; signals that cancel a context (SIGPIPE ignored);
// sd_notify READY=1, STOPPING=1 and WATCHDOG=1 (go-systemd daemon); core
// dumps off for daemons that hold secrets; the per-start epoch; the health
// op; and an oklog/run actor group that ties them together.
package daemon
