package pipeline

import (
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"

	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/inject"
	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/cmd/egressd/internal/scan"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/wire"
)

// errMisuse is the refusal of a placeholder anywhere but where it may be
// substituted.
func errMisuse() error {
	return wire.Errorf(egressdapi.CodePlaceholderMisuse,
		"a placeholder may appear only at its credential's staged target, toward its destination, over https")
}

// Placements is credential resolution for proxied requests (docs/egressd.md,
// "Placeholder substitution"), in place of Resolve: it refuses raw material
// from the caller (egress.manual_credential_rejected) and returns the
// credentials of b whose placeholder sits exactly at their staged target —
// the header value equal to the template rendered with the placeholder, the
// one value of the query parameter, a path segment, the JSON string at the
// body pointer, or a half of the one `Authorization: Basic` credential (see
// basic.go) — of a request to their destination over https (or to a literal
// loopback host). Any other occurrence of a placeholder egressd holds, for
// this invocation or another, is egress.placeholder_misuse. A bundle without
// credentials (anonymous use) never gets a placement. A basic:user placement
// beside a basic:password one that fixes the user-id is
// egress.injection_conflict.
func (p *Pipeline) Placements(b *bundle.Bundle, rec *request.Record) ([]*bundle.Credential, error) {
	if err := p.scan.Manual(rec); err != nil {
		return nil, err
	}
	// The search runs on rec without its placements. A header placement
	// removes the whole field (its one value is the placement), which the
	// search then skips by name (placed), without a copy of rec; the other
	// kinds change a value in place, on a scratch copy made only when one
	// could be placed. A request with no candidate (most traffic of a
	// bundle without credentials, or to another origin) is searched as it
	// is.
	scratch := rec
	var placedBuf [2]string
	placed := placedBuf[:0] // header names removed from the search
	var attach []*bundle.Credential
	err := b.Use(func(creds []*bundle.Credential) error {
		o, secure := rec.Origin(), secureScheme(rec)
		for _, c := range creds {
			if c.Destination != o || !secure {
				continue
			}
			if c.Target.Kind == inject.KindHeader {
				// Headers are not changed by the other kinds' removals, so
				// scratch's are rec's less the names in placed.
				if !slices.Contains(placed, c.Target.Name) && headerPlacement(rec, c) {
					placed = append(placed, c.Target.Name)
					attach = append(attach, c)
				}
				continue
			}
			if scratch == rec {
				scratch = rec.Clone()
			}
			if removePlacement(scratch, c) {
				attach = append(attach, c)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if p.knownPlaceholder(scratch, placed) {
		return nil, errMisuse()
	}
	if err := checkBasicPair(attach); err != nil {
		return nil, err
	}
	return attach, nil
}

// headerPlacement reports whether rec's header c.Target.Name holds
// exactly one value, c's template rendered with its placeholder: the
// placement removePlacement would remove.
func headerPlacement(rec *request.Record, c *bundle.Credential) bool {
	want, err := c.PlacedHeader()
	vs := rec.Header[c.Target.Name]
	return err == nil && len(vs) == 1 && vs[0] == want
}

func secureScheme(rec *request.Record) bool {
	return rec.Scheme == netguard.SchemeHTTPS || netguard.IsLiteralLoopback(rec.Host)
}

// removePlacement removes c's placeholder from its staged target in rec
// and reports whether it was there, exactly once.
func removePlacement(rec *request.Record, c *bundle.Credential) bool {
	ph := c.Placeholder
	switch c.Target.Kind {
	case inject.KindHeader:
		if !headerPlacement(rec, c) {
			return false
		}
		delete(rec.Header, c.Target.Name)
		return true
	case inject.KindQuery:
		q, ok := inject.ReplaceQueryValue(rec.Query, c.Target.Name, ph, nil)
		if vs, strict := inject.QueryValues(rec.Query, c.Target.Name); !ok || !strict || len(vs) != 1 {
			return false
		}
		rec.Query = q
		return true
	case inject.KindPath:
		path, n := inject.ReplacePathSegment(rec.Path, ph, nil)
		if n != 1 {
			return false
		}
		rec.Path = path
		return true
	case inject.KindBody:
		if s, ok := inject.BodyString(rec.Body, c.Target.Name); !ok || s != ph {
			return false
		}
		body, err := inject.Body(rec.Body, c.Target.Name, nil)
		if err != nil {
			return false
		}
		rec.Body = body
		return true
	case inject.KindBasic:
		return removeBasic(rec, c)
	}
	return false
}

// knownPlaceholder reports whether rec's target (and its percent-decoded
// forms), header names and values (and what a Basic credential's value
// decodes to), or body hold a placeholder of any registered invocation. The headers named in skip (placements, which
// Placements removed) are left out.
func (p *Pipeline) knownPlaceholder(rec *request.Record, skip []string) bool {
	known := p.holdsPlaceholder
	var forms [4]string
	for _, f := range scan.AppendDecodedForms(forms[:0], rec.Target()) {
		if known(f) {
			return true
		}
	}
	for name, vs := range rec.Header {
		if slices.Contains(skip, name) {
			continue
		}
		if known(name) {
			return true
		}
		for _, v := range vs {
			if known(v) || p.basicPlaceholder(v) {
				return true
			}
		}
	}
	for _, f := range scan.AppendDecodedForms(forms[:0], string(rec.Body)) {
		if known(f) {
			return true
		}
	}
	return false
}

// holdsPlaceholder reports whether s holds a placeholder of any
// registered invocation. Placeholders are lowercase; a case-changed copy
// (a canonicalized header name, an upper-cased value, "K" written as
// U+212A KELVIN SIGN, which lowers to "k") is still that placeholder.
// Every "hkp_" starts a candidate, also one that overlaps the end of an
// unknown one (a run of non-overlapping matches would skip it). Without
// "hkp_" in any case, or a Kelvin sign, there is none (and no copy is
// made).
func (p *Pipeline) holdsPlaceholder(s string) bool {
	if !containsFold(s, phPrefix) && !strings.Contains(s, "\u212a") {
		return false
	}
	low := strings.ToLower(s)
	for i := 0; ; i++ {
		j := strings.Index(low[i:], phPrefix)
		if j < 0 {
			return false
		}
		i += j
		if i+placeholderLen <= len(low) && placeholderShaped(low[i+len(phPrefix):i+placeholderLen]) && p.isPlaceholder(low[i:i+placeholderLen]) {
			return true
		}
	}
}

// placeholderShaped reports whether s is made of the characters that
// follow "hkp_" in a placeholder.
func placeholderShaped(s string) bool {
	for i := 0; i < len(s); i++ {
		if !phClass(s[i]) {
			return false
		}
	}
	return true
}

// ScanMessage checks a message a client sends over an upgraded
// connection (a WebSocket message, whole), where nothing is substituted:
// a held value in any form the scanner knows is egress.secret_in_request,
// a placeholder of any invocation (the sender's own included: it has no
// staged target there) in the message or its percent-decoded forms is
// egress.placeholder_misuse.
func (p *Pipeline) ScanMessage(b []byte) error {
	if p.scan.Scrubber.Contains(b) || p.scan.Scrubber.ContainsDecoded(b) {
		return wire.Errorf(egressdapi.CodeSecretInRequest, "the message carries credential material")
	}
	var forms [4]string
	for _, f := range scan.AppendDecodedForms(forms[:0], string(b)) {
		if p.holdsPlaceholder(f) {
			return wire.Errorf(egressdapi.CodePlaceholderMisuse, "a placeholder is substituted only at its staged target, never in a WebSocket message")
		}
	}
	return nil
}

// Substitute is step 5 for proxied requests, in place of Inject: a copy
// of rec with each placement's placeholder replaced by the raw value at
// the same position (header: the template rendered with the value; query:
// the one parameter's value, query-escaped, other bytes kept; path: the
// segment, path-escaped; body: the JSON string; basic: the half, the pair
// encoded again, with the credential's fixed user-id if it has one).
// Content-Length follows
// from the new body. It re-checks destination and scheme under the
// bundle's lock. Errors: egress.plaintext_credential,
// egress.header_invalid, egress.injection_failed.
func (p *Pipeline) Substitute(b *bundle.Bundle, rec *request.Record, attach []*bundle.Credential) (*request.Record, error) {
	if len(attach) == 0 {
		return rec, nil
	}
	out := rec.Clone()
	err := b.Use(func([]*bundle.Credential) error {
		for _, c := range attach {
			if c.Destination != out.Origin() || !secureScheme(out) {
				return wire.Errorf(egressdapi.CodePlaintextCredential, "a credential travels only to its destination over https or literal loopback")
			}
			if err := substituteOne(out, c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.Header.Set("Accept-Encoding", "identity") // so an echo can be scrubbed
	return out, nil
}

func substituteOne(rec *request.Record, c *bundle.Credential) error {
	failed := func() error { // made only when it happens (Errorf formats)
		return wire.Errorf(egressdapi.CodeInjectionFailed, "the placeholder moved before substitution")
	}
	switch c.Target.Kind {
	case inject.KindHeader:
		v, err := inject.Render(c.Template, c.Value())
		if err != nil {
			return err
		}
		if !httpguts.ValidHeaderFieldValue(v) {
			return wire.Errorf(egressdapi.CodeHeaderInvalid, "substituted value for %s is not a valid header value", c.Target.Name)
		}
		rec.Header[c.Target.Name] = []string{v}
	case inject.KindQuery:
		q, ok := inject.ReplaceQueryValue(rec.Query, c.Target.Name, c.Placeholder, c.Value())
		if !ok {
			return failed()
		}
		rec.Query = q
	case inject.KindPath:
		path, n := inject.ReplacePathSegment(rec.Path, c.Placeholder, c.Value())
		if n != 1 {
			return failed()
		}
		rec.Path = path
	case inject.KindBody:
		body, err := inject.Body(rec.Body, c.Target.Name, c.Value())
		if err != nil {
			return err
		}
		rec.Body = body
	case inject.KindBasic:
		return substituteBasic(rec, c)
	default:
		return failed()
	}
	return nil
}

// containsFold reports whether s contains sub (lowercase ASCII) in any
// ASCII case.
func containsFold(s, sub string) bool {
outer:
	for i := 0; i+len(sub) <= len(s); i++ {
		for j := 0; j < len(sub); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != sub[j] {
				continue outer
			}
		}
		return true
	}
	return false
}
