// Package netguard is hostkit's single source of truth for host spelling and
// for the literal-loopback rule. secretd uses it to validate a credential's
// destinations; egressd uses it for policy matching, for the decision whether
// a credential may be attached, and in its dialer to re-check the address it
// is about to connect to.
//
// It provides:
//
//   - [CanonicalHost]: one spelling per host (lowercase ASCII, IDNA A-labels
//     per UTS #46, no trailing dot, IPv6 in brackets, no zone), rejecting
//     numeric look-alikes such as "127.1" or "0x7f.1" that different
//     resolvers read differently.
//   - [Origin], [ParseOrigin], [CanonicalOrigin]: the canonical origin of
//     docs/design.md, "Identifiers and schemas" (RFC 6454 tuple of scheme,
//     host and port), "https://host[:port]", or "http://" only for a literal
//     loopback host.
//   - [Pattern], [ParsePattern]: a canonical origin, a wildcard
//     "https://*.example.com[:port]" or a raw TCP origin "tcp://host:port"
//     for egress policy ([Pattern.MatchHost] for a name's resolver). A
//     tcp:// pattern allows a transparent connection that is neither TLS
//     nor HTTP to exactly that host and port, and only for an invocation
//     holding no credential; ParseOrigin refuses the scheme, so it is never
//     a credential destination.
//   - [IsLiteralLoopback] and [IsLiteralLoopbackAddr]: THE predicate of the
//     invariant "a credential attaches only over HTTPS or to a literal
//     loopback host" (docs/design.md, "Nothing escapes policy"). It never
//     consults DNS.
//   - [Classify] and [Class]: address classes (RFC 6890 special-purpose
//     registries plus cloud metadata endpoints and the IPv4 addresses embedded
//     in NAT64, 6to4, Teredo and IPv4-mapped addresses) for the dialer.
//   - [SplitHostPort]: a strict authority ("host[:port]") splitter.
//
// Every error is a *wire.Error whose Code is one of [Codes]. Nothing here
// resolves names, reads files or keeps package-level mutable state.
package netguard
