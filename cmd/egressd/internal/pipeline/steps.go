package pipeline

import (
	"context"
	"strings"

	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/inject"
	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/cmd/egressd/internal/transport"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

// Validate is step 1: parse and canonicalize once (request.Parse).
func (p *Pipeline) Validate(in Input) (*request.Record, error) {
	return p.auth.Parse(in.Method, in.URL, in.Header, in.Body, p.cfg.Limits)
}

// ScanHost runs around step 1, before anything reads the host: with rec
// nil (before Validate) the URL's authority and every Host field as the
// caller wrote them, with rec its canonical host (IDNA may map a
// spelling), must hold no held value in any form (scan.Scanner.Host), so
// that a value in a name (a wildcard policy allows any label) is never
// resolved, sent in Host or a TLS server name, quoted in an error, or
// written to the audit trail or the log. Errors: egress.secret_in_request.
func (p *Pipeline) ScanHost(in Input, rec *request.Record) error {
	if rec != nil {
		return p.scan.Host(rec.Host)
	}
	raw := request.RawAuthority(in.URL)
	if err := p.scan.Host(raw); err != nil {
		return err
	}
	for _, f := range in.Header {
		if strings.EqualFold(f.Name, "Host") && f.Value != raw {
			if err := p.scan.Host(f.Value); err != nil {
				return err
			}
		}
	}
	return nil
}

// ScanHostName is ScanHost for one name or authority the proxy face
// reads before the pipeline (a CONNECT target, a Host field, a TLS
// server name). Errors: egress.secret_in_request.
func (p *Pipeline) ScanHostName(host string) error { return p.scan.Host(host) }

// redactedOrigin is rec's origin with the host replaced by
// redact.Redacted, for the records of a request refused for its host.
func redactedOrigin(rec *request.Record) string {
	o := rec.Origin()
	o.Host = redact.Redacted
	return o.String()
}

// SplitHostPort is netguard.SplitHostPort through the pipeline's cache of
// canonical authorities (request.Authorities), for the proxy face's
// checks of Host fields inside tunnels.
func (p *Pipeline) SplitHostPort(a string) (string, uint16, error) {
	return p.auth.SplitHostPort(a)
}

// Resolve is step 3 (credential resolution): it refuses raw material from
// the caller (egress.manual_credential_rejected) and returns the bundle's
// credentials whose destination is the request's origin and whose target
// position the request has (header, query and basic: always; path: a
// "{name}" segment; body: a non-empty body).
func (p *Pipeline) Resolve(b *bundle.Bundle, rec *request.Record) ([]*bundle.Credential, error) {
	if err := p.scan.Manual(rec); err != nil {
		return nil, err
	}
	var out []*bundle.Credential
	err := b.Use(func(creds []*bundle.Credential) error {
		o := rec.Origin()
		for _, c := range creds {
			if c.Destination != o {
				continue
			}
			switch c.Target.Kind {
			case inject.KindPath:
				if !inject.HasPathSegment(rec.Path, c.Target.Name) {
					continue
				}
			case inject.KindBody:
				if len(rec.Body) == 0 {
					continue
				}
			}
			out = append(out, c)
		}
		return nil
	})
	return out, err
}

// Policy is step 4: plaintext toward a host that one of the invocation's
// credentials names is refused (egress.plaintext_credential) unless the
// host is literal loopback; otherwise the origin and method must be a
// credential destination or match the policy (egress.policy_denied).
func (p *Pipeline) Policy(b *bundle.Bundle, rec *request.Record) error {
	if rec.Scheme != netguard.SchemeHTTPS && !netguard.IsLiteralLoopback(rec.Host) && b.CredentialHost(rec.Host) {
		return wire.Errorf(egressdapi.CodePlaintextCredential, "a credential host is reached only over https")
	}
	if !b.Allows(rec.Origin(), rec.Method) {
		return wire.Errorf(egressdapi.CodePolicyDenied, "%s %s is not allowed for this invocation", rec.Method, rec.Origin())
	}
	return nil
}

// Scan is step 6, run on the caller's request before anything is injected:
// no held value may appear anywhere in it (egress.secret_in_request).
func (p *Pipeline) Scan(rec *request.Record) error { return p.scan.Request(rec) }

// Route is step 2's address half: pick the one address to dial
// (transport.Route). When credentials will be attached it enforces the
// perimeter on the same record and address: the request goes over https,
// or over http to a literal loopback host that routes to a literal
// loopback address (egress.plaintext_credential); and a loopback listener
// must not belong to an agent UID (egress.loopback_owner_agent,
// egress.loopback_owner_unverified).
func (p *Pipeline) Route(ctx context.Context, rec *request.Record, attach []*bundle.Credential) (transport.Route, []uint32, error) {
	r, err := p.cfg.Transport.Route(ctx, rec.Host, rec.Port)
	if err != nil {
		return transport.Route{}, nil, err
	}
	if len(attach) == 0 {
		return r, nil, nil
	}
	if err := Perimeter(rec, r); err != nil {
		return transport.Route{}, nil, err
	}
	if r.Class != netguard.ClassLoopback {
		return r, nil, nil
	}
	owners, err := p.cfg.Owner.Check(r.Addr)
	if err != nil {
		return transport.Route{}, nil, err
	}
	return r, owners, nil
}

// Perimeter is the credential rule of docs/design.md, "Nothing escapes
// policy", applied to a record and its checked address: https, or http to a
// literal loopback host (netguard.IsLiteralLoopback, no DNS) dialled at a
// literal loopback address. Errors: egress.plaintext_credential.
func Perimeter(rec *request.Record, r transport.Route) error {
	if rec.Scheme == netguard.SchemeHTTPS {
		return nil
	}
	if netguard.IsLiteralLoopback(rec.Host) && netguard.IsLiteralLoopbackAddr(r.Addr.Addr()) {
		return nil
	}
	return wire.Errorf(egressdapi.CodePlaintextCredential, "a credential travels only over https or to a literal loopback host")
}

// Inject is step 5: a copy of rec with each credential placed at its
// staged target. It re-checks that each credential's destination is the
// record's origin and the perimeter's scheme rule. The values are read
// under the bundle's lock, so a concurrent drop waits.
func (p *Pipeline) Inject(b *bundle.Bundle, rec *request.Record, attach []*bundle.Credential) (*request.Record, error) {
	if len(attach) == 0 {
		return rec, nil
	}
	out := rec.Clone()
	err := b.Use(func([]*bundle.Credential) error {
		for _, c := range attach {
			if c.Destination != out.Origin() || (out.Scheme != netguard.SchemeHTTPS && !netguard.IsLiteralLoopback(out.Host)) {
				return wire.Errorf(egressdapi.CodePlaintextCredential, "a credential travels only to its destination over https or literal loopback")
			}
			if err := injectOne(out, c); err != nil {
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

func injectOne(rec *request.Record, c *bundle.Credential) error {
	switch c.Target.Kind {
	case inject.KindHeader:
		return inject.Header(rec, c.Target.Name, c.Template, c.Overwrite, c.Value())
	case inject.KindQuery:
		return inject.Query(rec, c.Target.Name, c.Value())
	case inject.KindPath:
		inject.Path(rec, c.Target.Name, c.Value())
		return nil
	case inject.KindBody:
		body, err := inject.Body(rec.Body, c.Target.Name, c.Value())
		if err != nil {
			return err
		}
		rec.Body = body
		return nil
	case inject.KindBasic:
		return inject.Authorization(rec, c.Target.Name, c.BasicUser, c.Value())
	}
	return wire.Errorf(egressdapi.CodeInjectionFailed, "unknown target kind")
}
