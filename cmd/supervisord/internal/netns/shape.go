package netns

import (
	"strconv"
	"strings"

	"hostkit.dev/lib/netguard"
)

// Shape is how a refused name is written to logs and the audit trail:
// its labels from the right, each spelled out only while the suffix it
// ends is a suffix of a host the instance's policy names (an allowed
// origin or a credential's destination), and every other label replaced
// by its length in braces. A query's labels may carry data the agent
// meant to send out (a key as a subdomain); the policy's own names carry
// none, so a shape holds nothing the operator did not write.
//
// For a policy naming api.example.com: "k3y.evil.com" is "{3}.{4}.com",
// "x.api.example.com" is "{1}.api.example.com", "a.b" is "{1}.{1}".
// The empty name (the root) is ".".
func Shape(name string, known map[string]bool) string {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if name == "" {
		return "."
	}
	labels := strings.Split(name, ".")
	out := make([]string, len(labels))
	open := true // every label to the right was spelled out
	for i := len(labels) - 1; i >= 0; i-- {
		suffix := strings.Join(labels[i:], ".")
		if open && known[suffix] {
			out[i] = labels[i]
			continue
		}
		open = false
		out[i] = "{" + strconv.Itoa(len(labels[i])) + "}"
	}
	return strings.Join(out, ".")
}

// KnownSuffixes returns every label suffix of the hosts pats name (for
// "https://*.svc.example.org": svc.example.org, example.org, org), for
// Shape.
func KnownSuffixes(pats []netguard.Pattern) map[string]bool {
	known := map[string]bool{}
	for _, p := range pats {
		s := p.String()
		if i := strings.Index(s, "://"); i >= 0 {
			s = s[i+3:]
		}
		s = strings.TrimPrefix(s, "*.")
		host, _, err := netguard.SplitHostPort(s)
		if err != nil {
			host = s
		}
		host = strings.Trim(host, "[]")
		for {
			known[host] = true
			i := strings.IndexByte(host, '.')
			if i < 0 {
				break
			}
			host = host[i+1:]
		}
	}
	return known
}

// Resolvable returns the patterns an isolated instance's resolver answers
// for: the allowed origins (bad ones are skipped) and the exact origins
// of its credentials' destinations, which egressd lets the instance reach
// whether or not network.allow lists them (docs/egressd.md). A
// destination that is not an origin (ParseOrigin) is skipped.
func Resolvable(allow, destinations []string) []netguard.Pattern {
	var pats []netguard.Pattern
	for _, o := range allow {
		if p, err := netguard.ParsePattern(o); err == nil {
			pats = append(pats, p)
		}
	}
	for _, d := range destinations {
		o, err := netguard.ParseOrigin(d)
		if err != nil {
			continue
		}
		if p, err := netguard.ParsePattern(o.String()); err == nil {
			pats = append(pats, p)
		}
	}
	return pats
}
