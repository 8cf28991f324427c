package inject

import (
	"net/url"
	"strings"

	"golang.org/x/net/http/httpguts"

	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

// MaxQueryParams caps the parameters a query may hold for query injection.
const MaxQueryParams = 256

// Header sets header t.Name to template rendered with value. An existing
// header is replaced only when overwrite is set. Errors:
// egress.injection_conflict (present, no overwrite), egress.header_invalid
// (the rendered value holds CR, LF, NUL or a CTL), egress.injection_failed
// (bad template).
func Header(rec *request.Record, name, template string, overwrite bool, value []byte) error {
	v, err := Render(template, value)
	if err != nil {
		return err
	}
	if !httpguts.ValidHeaderFieldValue(v) {
		return wire.Errorf(egressdapi.CodeHeaderInvalid, "injected value for %s is not a valid header value", name)
	}
	if _, present := rec.Header[name]; present && !overwrite {
		return wire.Errorf(egressdapi.CodeInjectionConflict, "header %s is already set and the credential does not overwrite", name)
	}
	rec.Header[name] = []string{v}
	return nil
}

// Query adds parameter param = value to the query, which must parse
// strictly (url.ParseQuery) with at most MaxQueryParams parameters and must
// not already hold param; RawQuery is rebuilt (url.Values.Encode, sorted).
// Errors: egress.injection_failed, egress.injection_conflict.
func Query(rec *request.Record, param string, value []byte) error {
	q, err := url.ParseQuery(rec.Query)
	if err != nil {
		return wire.Wrap(egressdapi.CodeInjectionFailed, "query does not parse", err)
	}
	n := 0
	for _, vs := range q {
		n += len(vs)
	}
	if n >= MaxQueryParams {
		return wire.Errorf(egressdapi.CodeInjectionFailed, "query has too many parameters")
	}
	if _, present := q[param]; present {
		return wire.Errorf(egressdapi.CodeInjectionConflict, "query parameter %s is already set", param)
	}
	q.Set(param, string(value))
	rec.Query = q.Encode()
	return nil
}

// Path replaces every path segment that is exactly "{name}" (or its
// percent-encoded form "%7Bname%7D") with the path-escaped value. It
// reports whether a segment was replaced; no segment is not an error.
func Path(rec *request.Record, name string, value []byte) bool {
	segs := strings.Split(rec.Path, "/")
	done := false
	for i, s := range segs {
		if s == "{"+name+"}" || strings.EqualFold(s, "%7B"+name+"%7D") {
			segs[i] = url.PathEscape(string(value))
			done = true
		}
	}
	if done {
		rec.Path = strings.Join(segs, "/")
	}
	return done
}

// HasPathSegment reports whether the path holds a "{name}" segment.
func HasPathSegment(path, name string) bool {
	for s := range strings.SplitSeq(path, "/") {
		if s == "{"+name+"}" || strings.EqualFold(s, "%7B"+name+"%7D") {
			return true
		}
	}
	return false
}
