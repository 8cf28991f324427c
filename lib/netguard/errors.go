package netguard

// Error codes returned by this package (stable `area.reason` strings carried
// by *wire.Error; append-only, listed in docs/protocol.md).
const (
	// CodeAuthorityInvalid: an authority ("host[:port]") is malformed, e.g.
	// an IPv6 literal without brackets or text after "]".
	CodeAuthorityInvalid = "authority.invalid"
	// CodeAuthorityPortInvalid: an authority's port is not 1-65535 in plain
	// decimal without sign or leading zero.
	CodeAuthorityPortInvalid = "authority.port_invalid"

	// CodeHostAmbiguousNumeric: the host's last label looks like a number
	// ("127.1", "0x7f.1", "2130706433", "0177.0.0.1", "example.123") but the
	// host is not a strict dotted-quad IPv4 literal.
	CodeHostAmbiguousNumeric = "host.ambiguous_numeric"
	// CodeHostEmpty: the host is empty.
	CodeHostEmpty = "host.empty"
	// CodeHostIDNA: UTS #46 processing rejected the host (bad label, bad
	// Punycode, Bidi rule, hyphen rules, empty label, label over 63 bytes).
	CodeHostIDNA = "host.idna"
	// CodeHostInvalid: the host holds a character no host may hold ("_",
	// "%", "\", "*", whitespace, ...), is not valid UTF-8, or is a malformed
	// IP literal.
	CodeHostInvalid = "host.invalid"
	// CodeHostNotNormalized: the host is a non-ASCII spelling that UTS #46
	// would silently map onto another name (fullwidth or circled letters,
	// U+017F, ignored code points, ideographic full stops, unnormalized
	// combining marks). Only ASCII case differences and the UTS #46 Unicode
	// form of an A-label are accepted.
	CodeHostNotNormalized = "host.not_normalized"
	// CodeHostTooLong: the host is longer than 253 bytes in ASCII form.
	CodeHostTooLong = "host.too_long"
	// CodeHostTrailingDot: the host ends in "." (so "localhost." never
	// equals "localhost").
	CodeHostTrailingDot = "host.trailing_dot"
	// CodeHostZone: an IPv6 literal carries a zone ("%lo", "%25lo").
	CodeHostZone = "host.zone"

	// CodeOriginFragment: an origin has a "#fragment".
	CodeOriginFragment = "origin.fragment"
	// CodeOriginInvalid: an origin is not "scheme://authority" (missing
	// "://", whitespace or control characters, too long).
	CodeOriginInvalid = "origin.invalid"
	// CodeOriginPath: an origin has a path, even a lone "/".
	CodeOriginPath = "origin.path"
	// CodeOriginPlaintext: an "http" origin whose host is not a literal
	// loopback host (see IsLiteralLoopback).
	CodeOriginPlaintext = "origin.plaintext_not_loopback"
	// CodeOriginPortInvalid: an origin's port is not 1-65535 in plain
	// decimal without sign or leading zero.
	CodeOriginPortInvalid = "origin.port_invalid"
	// CodeOriginQuery: an origin has a "?query".
	CodeOriginQuery = "origin.query"
	// CodeOriginSchemeUnsupported: the scheme is neither "https" nor "http".
	CodeOriginSchemeUnsupported = "origin.scheme_unsupported"
	// CodeOriginUserinfo: an origin has "user[:password]@".
	CodeOriginUserinfo = "origin.userinfo"

	// CodePatternTooBroad: a wildcard pattern has fewer than two labels after
	// "*." ("https://*.com").
	CodePatternTooBroad = "pattern.too_broad"
	// CodePatternWildcardInvalid: "*" appears anywhere but as the whole
	// leftmost label, or the wildcard's suffix is an IP literal.
	CodePatternWildcardInvalid = "pattern.wildcard_invalid"
	// CodePatternWildcardScheme: a wildcard pattern's scheme is not "https".
	CodePatternWildcardScheme = "pattern.wildcard_scheme"
)

// Codes lists every code above in sorted order; a test keeps it sorted and
// unique.
var Codes = []string{
	CodeAuthorityInvalid,
	CodeAuthorityPortInvalid,
	CodeHostAmbiguousNumeric,
	CodeHostEmpty,
	CodeHostIDNA,
	CodeHostInvalid,
	CodeHostNotNormalized,
	CodeHostTooLong,
	CodeHostTrailingDot,
	CodeHostZone,
	CodeOriginFragment,
	CodeOriginInvalid,
	CodeOriginPath,
	CodeOriginPlaintext,
	CodeOriginPortInvalid,
	CodeOriginQuery,
	CodeOriginSchemeUnsupported,
	CodeOriginUserinfo,
	CodePatternTooBroad,
	CodePatternWildcardInvalid,
	CodePatternWildcardScheme,
}
