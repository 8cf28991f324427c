// Package rpc is the request/response layer every hostkit daemon serves on
// its private Unix socket (docs/protocol.md; docs/design.md, "Sockets" and
// "Peers and roles"): an op table with per-op roles checked against the
// peer's kernel-reported UID, a replay cache that keeps each request id until
// its own deadline, request deadlines as contexts, idempotency records keyed
// by (peer UID, op, key), per-connection read deadlines, a cap on concurrent
// connections, an idle-shutdown hook, stream mode, and correlation ids
// carried into audit events and onto outgoing calls. The Client side dials,
// applies deadlines, and returns *wire.Error values usable with errors.Is and
// errors.As.
package rpc
