package netguard

import (
	"net/netip"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"hostkit.dev/lib/wire"
)

// MaxHostLen is the longest canonical host, in bytes of its ASCII form
// (RFC 1035 §2.3.4: 255 octets on the wire, 253 as dotted text without the
// root label).
const MaxHostLen = 253

// maxHostInput bounds the raw input before UTS #46 processing, so a huge
// string costs nothing.
const maxHostInput = 1024

// hostProfile is the strict UTS #46 profile (immutable after init):
//
//   - MapForLookup: RFC 5891 §5 lookup mapping (case folding, NFC), with
//     UseSTD3ASCIIRules (StrictDomainName: only LDH ASCII) and the
//     RFC 5891 §5.4 label validation (ValidateLabels, CheckJoiners);
//   - BidiRule: RFC 5893;
//   - Transitional(false): "ß" stays "ß" (xn--zca), as in current browsers;
//   - VerifyDNSLength: no empty label, no label over 63 bytes, no name over
//     253 bytes;
//   - CheckHyphens(false): labels such as "r3---sn-x" (real names) are
//     allowed; leading and trailing hyphens are still rejected by
//     checkLDH, and "xn--" labels are still decoded and validated.
var hostProfile = idna.New(
	idna.MapForLookup(),
	idna.BidiRule(),
	idna.Transitional(false),
	idna.VerifyDNSLength(true),
	idna.CheckHyphens(false),
)

// CanonicalHost returns the one canonical spelling of host, or a
// *wire.Error:
//
//   - an IPv6 literal, with or without brackets, becomes its net/netip form
//     in brackets ("[0:0::1]" and "::1" give "[::1]"); a zone ("%lo",
//     "%25lo") is rejected (host.zone), other malformed literals and
//     bracketed IPv4 are host.invalid;
//   - a strict dotted-quad IPv4 literal (four decimal parts 0-255, no
//     leading zeros) is returned as is;
//   - a name is converted to lowercase ASCII with UTS #46 (see hostProfile:
//     "Bücher.example" gives "xn--bcher-kva.example"). Only letters, digits,
//     "-" and "." are allowed in ASCII (so "_" is host.invalid); UTS #46
//     failures are host.idna; a non-ASCII spelling that UTS #46 would map
//     onto a different name ("ⓛocalhost", fullwidth digits, U+017F,
//     zero-width characters, "。") is host.not_normalized;
//   - a host whose last label is a number in the WHATWG URL Standard's sense
//     (all decimal digits, or "0x" followed by hex digits) must be a strict
//     IPv4 literal, else host.ambiguous_numeric: "127.1", "0x7f.1",
//     "2130706433", "0177.0.0.1" and "127.000.000.001" mean 127.0.0.1 to
//     some resolvers and nothing to others (see smokescreen's hostport
//     checks);
//   - "" is host.empty; a trailing dot is host.trailing_dot, so
//     "localhost." never equals "localhost"; over MaxHostLen bytes is
//     host.too_long.
//
// CanonicalHost never consults DNS.
func CanonicalHost(host string) (string, error) {
	switch {
	case host == "":
		return "", wire.Errorf(CodeHostEmpty, "host is empty")
	case len(host) > maxHostInput, len(host) > MaxHostLen && isASCII(host):
		return "", wire.Errorf(CodeHostTooLong, "host is longer than %d bytes", MaxHostLen)
	case !utf8.ValidString(host):
		return "", wire.Errorf(CodeHostInvalid, "host is not valid UTF-8")
	case host[0] == '[':
		if host[len(host)-1] != ']' {
			return "", wire.Errorf(CodeHostInvalid, "IPv6 literal lacks its closing bracket")
		}
		return canonicalIPv6(host[1 : len(host)-1])
	case strings.IndexByte(host, ':') >= 0:
		return canonicalIPv6(host)
	case host[len(host)-1] == '.':
		return "", wire.Errorf(CodeHostTrailingDot, "host ends in a dot")
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; c < utf8.RuneSelf && !isLDH(c) && c != '.' {
			return "", wire.Errorf(CodeHostInvalid, "host contains %q", string(c))
		}
	}
	out, err := hostProfile.ToASCII(host)
	if err != nil {
		return "", wire.Wrap(CodeHostIDNA, "host is not a valid IDNA (UTS #46) name", err)
	}
	switch {
	case out == "":
		return "", wire.Errorf(CodeHostEmpty, "host is empty")
	case len(out) > MaxHostLen:
		return "", wire.Errorf(CodeHostTooLong, "host is longer than %d bytes", MaxHostLen)
	case out[len(out)-1] == '.':
		return "", wire.Errorf(CodeHostTrailingDot, "host ends in a dot")
	}
	if err := checkLDH(out); err != nil {
		return "", err
	}
	if err := checkNormalized(host, out); err != nil {
		return "", err
	}
	if endsInNumber(out) {
		a, err := netip.ParseAddr(out)
		if err != nil || !a.Is4() {
			return "", wire.Errorf(CodeHostAmbiguousNumeric,
				"host looks numeric but is not a dotted-quad IPv4 address")
		}
		return a.String(), nil
	}
	return out, nil
}

// HostAddr parses a host in CanonicalHost form as an IP literal: a
// dotted-quad IPv4 address or a bracketed IPv6 address without zone. It
// reports false for names.
func HostAddr(host string) (netip.Addr, bool) { return hostAddr(host) }

func hostAddr(host string) (netip.Addr, bool) {
	s := host
	if n := len(s); n >= 2 && s[0] == '[' && s[n-1] == ']' {
		s = s[1 : n-1]
	} else if strings.IndexByte(s, ':') >= 0 {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" || (a.Is4() && s != host) {
		return netip.Addr{}, false
	}
	return a, true
}

// canonicalIPv6 canonicalises the text inside brackets.
func canonicalIPv6(s string) (string, error) {
	if strings.IndexByte(s, '%') >= 0 {
		return "", wire.Errorf(CodeHostZone, "IPv6 zones are not allowed")
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() {
		return "", wire.Errorf(CodeHostInvalid, "malformed IPv6 literal")
	}
	return "[" + a.String() + "]", nil
}

// checkLDH checks the ASCII form: labels of [a-z0-9-] that neither start nor
// end with "-".
func checkLDH(out string) error {
	for label := range strings.SplitSeq(out, ".") {
		if label == "" {
			return wire.Errorf(CodeHostIDNA, "host has an empty label")
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return wire.Errorf(CodeHostIDNA, "a label starts or ends with a hyphen")
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !isLDH(c) || ('A' <= c && c <= 'Z') {
				return wire.Errorf(CodeHostInvalid, "host contains %q", string(c))
			}
		}
	}
	return nil
}

// checkNormalized accepts only inputs whose labels are, up to case, either
// the output label itself or the Unicode form of an output A-label.
func checkNormalized(in, out string) error {
	bad := wire.Errorf(CodeHostNotNormalized, "host is not in normalized form")
	inLabels, outLabels := strings.Split(in, "."), strings.Split(out, ".")
	if len(inLabels) != len(outLabels) {
		return bad
	}
	for i, il := range inLabels {
		ol := outLabels[i]
		if isASCII(il) {
			if asciiLower(il) != ol {
				return bad
			}
			continue
		}
		if !strings.HasPrefix(ol, "xn--") {
			return bad
		}
		u, err := hostProfile.ToUnicode(ol)
		if err != nil || strings.ToLower(il) != u {
			return bad
		}
	}
	return nil
}

// endsInNumber implements the WHATWG URL Standard's "ends in a number"
// check on a lowercase ASCII host without trailing dot: the last label is
// all decimal digits, or "0x" followed by zero or more hex digits.
func endsInNumber(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if last == "" {
		return false
	}
	if strings.HasPrefix(last, "0x") {
		last = last[2:]
		return strings.Trim(last, "0123456789abcdef") == ""
	}
	return strings.Trim(last, "0123456789") == ""
}

func isLDH(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-'
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// asciiLower lowercases ASCII letters only; other bytes are kept, so no
// Unicode case folding ("K" U+212A, "ſ" U+017F) can turn into ASCII.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
