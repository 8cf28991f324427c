// Package credential holds secretd's operator credentials in memory: their
// metadata (secretdapi.CredentialMeta), their values in secmem buffers, the
// validation rules of docs/secretd.md ("The model", "Targets": names, values,
// destinations, targets) and the Registry that merges the on-disk store with
// systemd credentials.
package credential

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/wire"
)

// Limits on a credential's metadata.
const (
	MaxNameLen      = 64
	MaxDestinations = 32
	MaxTargets      = 32
	MaxTargetLen    = 256 // bytes of a target string, prefix included
	MaxTemplateLen  = 256 // bytes of a header template
)

// Sources of a credential (CredentialMeta.Source).
const (
	SourceStore   = "store"
	SourceSystemd = "systemd"
)

// ValidName reports whether s matches [a-z0-9][a-z0-9._-]{0,63}.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// invalid builds a credential.invalid error; msg never holds a value.
func invalid(format string, args ...any) error {
	return wire.Errorf(secretdapi.CodeCredentialInvalid, format, args...)
}

// CheckValue checks a value's length: 1..secretdapi.MaxValueLen bytes.
// Errors: credential.invalid (naming the length, never the content).
func CheckValue(v []byte) error {
	if len(v) == 0 || len(v) > secretdapi.MaxValueLen {
		return invalid("value must be 1..%d bytes, got %d", secretdapi.MaxValueLen, len(v))
	}
	return nil
}

// CanonicalDestinations returns ds as canonical origins (lib/netguard:
// https, or http only for a literal loopback host), sorted and deduplicated.
// Errors: credential.invalid naming the index and netguard's code.
func CanonicalDestinations(ds []string) ([]string, error) {
	if len(ds) == 0 || len(ds) > MaxDestinations {
		return nil, invalid("a credential needs 1..%d destinations, got %d", MaxDestinations, len(ds))
	}
	out := make([]string, 0, len(ds))
	for i, d := range ds {
		c, err := netguard.CanonicalOrigin(d)
		if err != nil {
			return nil, invalid("destinations[%d] is not a canonical origin (%s)", i, wire.CodeOf(err))
		}
		out = append(out, c)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// CheckTargets validates ts and returns them normalized: sorted by target,
// header templates defaulted to "{}"; a template or overwrite on a
// non-header target, or a basic_user on another target than
// basic:password, is refused. Errors: credential.invalid naming the index.
func CheckTargets(ts []secretdapi.TargetSpec) ([]secretdapi.TargetSpec, error) {
	if len(ts) == 0 || len(ts) > MaxTargets {
		return nil, invalid("a credential needs 1..%d targets, got %d", MaxTargets, len(ts))
	}
	out := make([]secretdapi.TargetSpec, 0, len(ts))
	for i, t := range ts {
		n, err := normalizeTarget(t)
		if err != nil {
			return nil, invalid("targets[%d]: %s", i, err)
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b secretdapi.TargetSpec) int { return strings.Compare(a.Target, b.Target) })
	for i := 1; i < len(out); i++ {
		if out[i].Target == out[i-1].Target {
			return nil, invalid("target %q is listed twice", out[i].Target)
		}
	}
	return out, nil
}

func normalizeTarget(t secretdapi.TargetSpec) (secretdapi.TargetSpec, error) {
	kind, name, ok := strings.Cut(t.Target, ":")
	if !ok || name == "" || len(t.Target) > MaxTargetLen {
		return t, fmt.Errorf("target must be header:<Name>, query:<param>, path:<name>, body:<pointer>, basic:password or basic:user")
	}
	if kind != "header" && (t.Template != "" || t.Overwrite) {
		return t, fmt.Errorf("template and overwrite apply to header targets only")
	}
	if t.BasicUser != "" && t.Target != secretdapi.TargetBasicPassword {
		return t, fmt.Errorf("basic_user applies to the basic:password target only")
	}
	switch kind {
	case "header":
		if !isToken(name) {
			return t, fmt.Errorf("header name is not an RFC 9110 token")
		}
		if t.Template == "" {
			t.Template = "{}"
		}
		if strings.Count(t.Template, "{}") != 1 || len(t.Template) > MaxTemplateLen || !printable(t.Template) {
			return t, fmt.Errorf("template must contain {} exactly once, printable ASCII, at most %d bytes", MaxTemplateLen)
		}
	case "query":
		if !printable(name) || strings.ContainsAny(name, "&=#? ") {
			return t, fmt.Errorf("query parameter name is not valid")
		}
	case "path":
		if !printable(name) || strings.ContainsAny(name, "/{}?# ") {
			return t, fmt.Errorf("path segment name is not valid")
		}
	case "body":
		if !validPointer(name) {
			return t, fmt.Errorf("body target is not an RFC 6901 JSON pointer")
		}
	case "basic":
		if name != "password" && name != "user" {
			return t, fmt.Errorf("a basic target is basic:password or basic:user")
		}
		if len(t.BasicUser) > secretdapi.MaxBasicUserLen || !ValidBasicHalf([]byte(t.BasicUser), true) {
			return t, fmt.Errorf("basic_user must be at most %d bytes of UTF-8 without ':' or a control character", secretdapi.MaxBasicUserLen)
		}
	default:
		return t, fmt.Errorf("unknown target kind %q", kind)
	}
	return t, nil
}

// ValidBasicHalf reports whether b may be one half of an HTTP Basic
// credential (RFC 7617 §2): valid UTF-8 without a control character
// (0x00–0x1F, 0x7F), and, for the user-id (user), without ':', which
// would move the split between the halves the server sees. The empty
// string is valid.
func ValidBasicHalf(b []byte, user bool) bool {
	for _, c := range b {
		if c < ' ' || c == 0x7f || user && c == ':' {
			return false
		}
	}
	return utf8.Valid(b)
}

// CheckBasicValue checks value against the basic targets among ts: a
// credential that may be sent as a Basic password or user-id must be a
// valid half (ValidBasicHalf), so that egressd can encode it and the
// server split it where the agent meant. Errors: credential.invalid,
// naming the target, never the value.
func CheckBasicValue(ts []secretdapi.TargetSpec, value []byte) error {
	for _, t := range ts {
		user := t.Target == secretdapi.TargetBasicUser
		if (user || t.Target == secretdapi.TargetBasicPassword) && !ValidBasicHalf(value, user) {
			if user {
				return invalid("a %s value must be UTF-8 without ':' or a control character", t.Target)
			}
			return invalid("a %s value must be UTF-8 without a control character", t.Target)
		}
	}
	return nil
}

// isToken reports whether s is an RFC 9110 token (a header field name).
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// printable reports whether s is printable ASCII (space through '~').
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// validPointer reports whether p is a non-empty RFC 6901 JSON pointer:
// "/"-separated reference tokens where "~" is followed by "0" or "1".
func validPointer(p string) bool {
	if !strings.HasPrefix(p, "/") || !printable(p) {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 >= len(p) || p[i+1] != '0' && p[i+1] != '1') {
			return false
		}
	}
	return true
}

// ValidInvocation reports whether s matches [a-z0-9-]{1,64}.
func ValidInvocation(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
