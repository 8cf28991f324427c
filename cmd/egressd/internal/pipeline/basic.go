package pipeline

import (
	"bytes"
	"strings"
	"unsafe"

	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/inject"
	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/cmd/egressd/internal/scan"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

// HTTP Basic authentication (RFC 7617) on the proxy face: a credential
// whose target is `basic:password` or `basic:user` is placed when the
// request to its destination carries one `Authorization: Basic` field,
// canonically encoded, whose half equals its placeholder exactly. The
// other half passes as the agent sent it, unless the credential fixes the
// user-id (basic_user). egressd decodes, substitutes and encodes again.
// Every other occurrence of a placeholder in a Basic value (another
// origin, the other half, a part of a half, a malformed encoding,
// Proxy-Authorization) is found by the search for misplaced placeholders,
// which reads Basic values as the most lenient server would decode them
// (inject.AppendBasicForms): egress.placeholder_misuse.

// removeBasic removes c's placeholder from its half of rec's
// Authorization field (the half becomes empty, the other half stays for
// the search) and reports whether it was there: one field, a canonical
// Basic credential, the half equal to the placeholder.
func removeBasic(rec *request.Record, c *bundle.Credential) bool {
	b, ok := basicField(rec)
	if !ok || b.Half(c.Target.Name) != c.Placeholder {
		return false
	}
	if c.Target.Name == inject.BasicUser {
		b.User = ""
	} else {
		b.Password = ""
	}
	rec.Header[inject.BasicHeader] = []string{inject.EncodeBasic([]byte(b.User), []byte(b.Password))}
	return true
}

// basicField returns rec's Authorization field decoded, when it has
// exactly one and that is a canonical Basic credential.
func basicField(rec *request.Record) (inject.Basic, bool) {
	vs := rec.Header[inject.BasicHeader]
	if len(vs) != 1 {
		return inject.Basic{}, false
	}
	return inject.ParseBasic(vs[0])
}

// checkBasicPair refuses a request that places both a basic:user
// credential and a basic:password one that fixes the user-id: the fixed
// user-id would replace the placed one, so one of them could not be
// honoured (egress.injection_conflict).
func checkBasicPair(attach []*bundle.Credential) error {
	user, fixed := false, false
	for _, c := range attach {
		if c.Target.Kind != inject.KindBasic {
			continue
		}
		user = user || c.Target.Name == inject.BasicUser
		fixed = fixed || c.Target.Name == inject.BasicPassword && c.BasicUser != ""
	}
	if user && fixed {
		return wire.Errorf(egressdapi.CodeInjectionConflict, "a basic:user placeholder was sent with a basic:password credential that fixes the user-id")
	}
	return nil
}

// substituteBasic replaces c's placeholder in its half of rec's
// Authorization field with the raw value, the user-id with c's fixed one
// when it has one, and encodes the pair again. Errors:
// egress.injection_failed (the placeholder is no longer there).
func substituteBasic(rec *request.Record, c *bundle.Credential) error {
	b, ok := basicField(rec)
	if !ok || b.Half(c.Target.Name) != c.Placeholder {
		return wire.Errorf(egressdapi.CodeInjectionFailed, "the placeholder moved before substitution")
	}
	if c.Target.Name == inject.BasicUser {
		rec.Header[inject.BasicHeader] = []string{inject.EncodeBasic(c.Value(), []byte(b.Password))}
		return nil
	}
	user := b.User
	if c.BasicUser != "" {
		user = c.BasicUser
	}
	rec.Header[inject.BasicHeader] = []string{inject.EncodeBasic([]byte(user), c.Value())}
	return nil
}

// basicPlaceholder reports whether header value v, read as a Basic
// credential by any decoder (inject.AppendBasicForms), holds a
// placeholder of any registered invocation, also once percent-decoded.
// A form without "hkp" (any case) or '%' cannot hold one and is not
// copied (egressd's own Proxy-Authorization is such a value on every
// absolute-form request). A Basic value costs one allocation (the decode
// buffer), any other value none.
func (p *Pipeline) basicPlaceholder(v string) bool {
	if !inject.IsBasic(v) { // nearly every header value: no buffer is made
		return false
	}
	var formsBuf [4][]byte
	var scratch [384]byte
	basic, _ := inject.AppendBasicForms(formsBuf[:0], scratch[:0], v)
	var forms [4]string
	for _, d := range basic {
		if !containsFold(basicView(d), "hkp") && bytes.IndexByte(d, '%') < 0 {
			continue
		}
		for _, f := range scan.AppendDecodedForms(forms[:0], string(d)) {
			if p.holdsPlaceholder(f) {
				return true
			}
		}
	}
	return false
}

// basicView is b as a string, without a copy, for a read that does not keep
// it.
func basicView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// ScanProxyAuth refuses a proxied request whose Proxy-Authorization
// fields (as the client sent them: step 1 strips them before the search
// for misplaced placeholders) hold a placeholder of any invocation, as
// written or inside a Basic credential: no placeholder has a staged
// target there, and egressd's own proxy authentication carries the proxy
// token, never a placeholder. Errors: egress.placeholder_misuse.
func (p *Pipeline) ScanProxyAuth(fields []request.Field) error {
	for _, f := range fields {
		if !strings.EqualFold(f.Name, "Proxy-Authorization") {
			continue
		}
		if p.holdsPlaceholder(f.Value) || p.basicPlaceholder(f.Value) {
			return wire.Errorf(egressdapi.CodePlaceholderMisuse, "a placeholder has no staged target in Proxy-Authorization")
		}
	}
	return nil
}
