// Package inject places a credential's raw value at its staged target in a
// request.Record (docs/design.md, "Identifiers and schemas"; docs/egressd.md,
// "The pipeline", step 6): a header (from a fixed template; replaced only
// with overwrite), a query parameter (strict parse, RawQuery rebuilt), a
// "{name}" path segment (value path-escaped) or the JSON string at an RFC
// 6901 pointer in the body (duplicate keys refused first). A caller never
// supplies a format.
package inject

import (
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

// Kind is a target's shape.
type Kind int

// Kinds of target.
const (
	KindHeader Kind = iota + 1
	KindQuery
	KindPath
	KindBody
	KindBasic // one half of an Authorization: Basic credential (RFC 7617)
)

// String returns "header", "query", "path", "body" or "basic".
func (k Kind) String() string {
	switch k {
	case KindHeader:
		return "header"
	case KindQuery:
		return "query"
	case KindPath:
		return "path"
	case KindBody:
		return "body"
	case KindBasic:
		return "basic"
	}
	return ""
}

// Target is a parsed staged target.
type Target struct {
	Kind Kind // header, query, path, body or basic
	// Name is the canonical header name, the query parameter, the path
	// segment name, the RFC 6901 pointer, or the Basic half (BasicUser,
	// BasicPassword).
	Name string
}

// String returns the target in its wire form ("header:Authorization").
func (t Target) String() string { return t.Kind.String() + ":" + t.Name }

// ParseTarget parses `header:<Name>` | `query:<param>` | `path:<name>` |
// `body:<RFC 6901 pointer>` | `basic:user` | `basic:password`. Errors:
// egress.injection_failed.
func ParseTarget(s string) (Target, error) {
	kind, name, ok := strings.Cut(s, ":")
	bad := wire.Errorf(egressdapi.CodeInjectionFailed, "target is not header:, query:, path:, body:, basic:user or basic:password")
	if !ok || name == "" {
		return Target{}, bad
	}
	switch kind {
	case "header":
		if !httpguts.ValidHeaderFieldName(name) {
			return Target{}, bad
		}
		return Target{Kind: KindHeader, Name: http.CanonicalHeaderKey(name)}, nil
	case "query":
		return Target{Kind: KindQuery, Name: name}, nil
	case "path":
		if strings.ContainsAny(name, "/{}?#%") {
			return Target{}, bad
		}
		return Target{Kind: KindPath, Name: name}, nil
	case "body":
		if _, err := parsePointer(name); err != nil {
			return Target{}, err
		}
		return Target{Kind: KindBody, Name: name}, nil
	case "basic":
		if name != BasicUser && name != BasicPassword {
			return Target{}, bad
		}
		return Target{Kind: KindBasic, Name: name}, nil
	}
	return Target{}, bad
}

// Render fills a header template: "{}" (exactly once) replaced by value;
// "" means "{}". Errors: egress.injection_failed for a template without
// exactly one "{}".
func Render(template string, value []byte) (string, error) {
	if template == "" {
		template = "{}"
	}
	if strings.Count(template, "{}") != 1 {
		return "", wire.Errorf(egressdapi.CodeInjectionFailed, "header template must hold {} exactly once")
	}
	i := strings.Index(template, "{}")
	return template[:i] + string(value) + template[i+2:], nil
}
