// Package policy compiles an invocation's egress policy (origins or origin
// patterns from lib/netguard, with optional method lists) and answers
// whether a canonical origin and method are allowed.
package policy

import (
	"strings"

	"golang.org/x/net/http/httpguts"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/wire"
)

// Policy is a compiled allow list. The zero Policy allows nothing.
type Policy struct {
	rules []rule
}

type rule struct {
	pat     netguard.Pattern
	methods map[string]bool // nil: every method
}

// Compile checks and compiles p: at most egressdapi.MaxAllowRules rules,
// each origin a canonical origin or origin pattern (netguard.ParsePattern),
// each method an upper-case HTTP token. Errors: bundle.invalid.
func Compile(p egressdapi.Policy) (Policy, error) {
	if len(p.Allow) > egressdapi.MaxAllowRules {
		return Policy{}, wire.Errorf(egressdapi.CodeBundleInvalid, "policy has more than %d rules", egressdapi.MaxAllowRules)
	}
	out := Policy{rules: make([]rule, 0, len(p.Allow))}
	for i, a := range p.Allow {
		pat, err := netguard.ParsePattern(a.Origin)
		if err != nil {
			return Policy{}, wire.Wrap(egressdapi.CodeBundleInvalid, "policy rule "+itoa(i)+": "+wire.AsError(err).Msg, err)
		}
		r := rule{pat: pat}
		for _, m := range a.Methods {
			if m == "" || strings.ToUpper(m) != m || !isToken(m) {
				return Policy{}, wire.Errorf(egressdapi.CodeBundleInvalid, "policy rule %d: methods must be upper-case tokens", i)
			}
			if r.methods == nil {
				r.methods = map[string]bool{}
			}
			r.methods[m] = true
		}
		out.rules = append(out.rules, r)
	}
	return out, nil
}

// Allows reports whether some rule matches origin o (canonical, from
// netguard.ParseOrigin or request.Record.Origin) and method.
func (p Policy) Allows(o netguard.Origin, method string) bool {
	for _, r := range p.rules {
		if r.pat.Match(o) && (r.methods == nil || r.methods[method]) {
			return true
		}
	}
	return false
}

// Len returns the number of rules.
func (p Policy) Len() int { return len(p.rules) }

func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if !httpguts.IsTokenRune(rune(s[i])) {
			return false
		}
	}
	return true
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// AllowsOrigin reports whether some rule matches origin o for at least
// one method (the proxy face's check of an intercepted CONNECT, whose
// requests are then checked one by one).
func (p Policy) AllowsOrigin(o netguard.Origin) bool {
	for _, r := range p.rules {
		if r.pat.Match(o) {
			return true
		}
	}
	return false
}
