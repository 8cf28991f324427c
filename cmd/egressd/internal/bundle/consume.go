package bundle

import (
	"bytes"
	"context"
	"regexp"
	"unicode/utf8"

	"hostkit.dev/cmd/egressd/internal/inject"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

var placeholderRE = regexp.MustCompile(`^hkp_[a-z2-7]{32}$`)

// consume calls lease.consume and turns the answer into credentials. Any
// answer that does not describe exactly the handles given, in order, with
// canonical destinations, parseable targets, valid templates and values,
// is refused whole: every value received is zeroed.
func (r *Registry) consume(ctx context.Context, invocation string, handles [][]byte) ([]*Credential, error) {
	if len(handles) == 0 {
		return nil, nil
	}
	if r.consumer == nil {
		return nil, wire.Errorf(egressdapi.CodeBundleConsumeFailed, "no secretd is configured")
	}
	resp, err := r.consumer.LeaseConsume(ctx, invocation, handles)
	if err != nil {
		we := wire.AsError(err)
		return nil, &wire.Error{Code: egressdapi.CodeBundleConsumeFailed, Msg: "secretd: " + we.Error(), Retry: wire.RetryNever, Err: err}
	}
	creds := make([]*Credential, 0, len(resp.Leases))
	fail := func(msg string) ([]*Credential, error) {
		zeroCreds(creds)
		for i := range resp.Leases {
			clear(resp.Leases[i].Value)
		}
		return nil, wire.Errorf(egressdapi.CodeBundleConsumeFailed, "secretd's answer is unusable: %s", msg)
	}
	if len(resp.Leases) != len(handles) {
		return fail("wrong number of leases")
	}
	for i := range resp.Leases {
		l := &resp.Leases[i]
		c, msg := credential(l, handles[i])
		if c == nil {
			return fail(msg)
		}
		creds = append(creds, c)
		clear(l.Value)
	}
	return creds, nil
}

// credential checks one lease and copies its value into a Secret; it
// returns a reason when the lease is unusable.
func credential(l *secretdapi.Lease, handle []byte) (*Credential, string) {
	if !bytes.Equal(l.Handle, handle) {
		return nil, "leases are not in the order of the handles"
	}
	dest, err := netguard.ParseOrigin(l.Destination)
	if err != nil || dest.String() != l.Destination {
		return nil, "a destination is not a canonical origin"
	}
	tgt, err := inject.ParseTarget(l.Target)
	if err != nil {
		return nil, "a target does not parse"
	}
	if tgt.Kind == inject.KindHeader {
		if _, err := inject.Render(l.Template, []byte("x")); err != nil {
			return nil, "a header template is invalid"
		}
	} else if l.Template != "" || l.Overwrite {
		return nil, "a template or overwrite on a non-header target"
	}
	if len(l.Value) == 0 || len(l.Value) > secretdapi.MaxValueLen {
		return nil, "a value is empty or too long"
	}
	if msg := checkBasic(l, tgt); msg != "" {
		return nil, msg
	}
	if !placeholderRE.MatchString(l.Placeholder) {
		return nil, "a placeholder is malformed"
	}
	c := &Credential{
		Name: l.Credential, Destination: dest, Target: tgt, Template: l.Template,
		Overwrite: l.Overwrite, BasicUser: l.BasicUser, Placeholder: l.Placeholder, value: redact.NewSecret(l.Value),
	}
	if tgt.Kind == inject.KindHeader {
		c.placed, _ = inject.Render(l.Template, []byte(l.Placeholder)) // the template was checked above
	}
	return c, ""
}

// checkBasic checks a lease's Basic fields as secretd does (its answer is
// not trusted to): basic_user only with basic:password, at most
// secretdapi.MaxBasicUserLen bytes; the user-id and the value each a
// valid half (UTF-8, no control character, no ':' in a user-id), so the
// pair egressd encodes splits where the agent meant. It returns a reason
// when they are unusable.
func checkBasic(l *secretdapi.Lease, tgt inject.Target) string {
	if tgt.Kind != inject.KindBasic {
		if l.BasicUser != "" {
			return "a basic_user on a target other than basic:password"
		}
		return ""
	}
	if l.BasicUser != "" && tgt.Name != inject.BasicPassword || len(l.BasicUser) > secretdapi.MaxBasicUserLen ||
		!validHalf([]byte(l.BasicUser), true) {
		return "a basic_user is invalid"
	}
	if !validHalf(l.Value, tgt.Name == inject.BasicUser) {
		return "a value cannot be that half of a Basic credential"
	}
	return ""
}

// validHalf reports whether b may be a half of a Basic credential (RFC
// 7617 §2): UTF-8 without a control character, and without ':' in a
// user-id.
func validHalf(b []byte, user bool) bool {
	for _, c := range b {
		if c < ' ' || c == 0x7f || user && c == ':' {
			return false
		}
	}
	return utf8.Valid(b)
}
