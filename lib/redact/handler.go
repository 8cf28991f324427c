package redact

import (
	"context"
	"encoding"
	"encoding/json"
	"fmt"
	"log/slog"
)

// maxGroupDepth bounds recursion into nested groups (a LogValuer may build
// an endless chain); deeper values are replaced by Redacted.
const maxGroupDepth = 32

// NewHandler returns an slog.Handler that redacts every record before
// passing it to inner. s may be nil (policy only). For the message and
// every attribute, including those given to WithAttrs and nested in groups:
//
//   - LogValuers are resolved first;
//   - a value under a key that IsSensitiveKey (groups included) becomes
//     Redacted;
//   - strings, []byte and error messages go through String, then s.Scrub;
//   - any other Any value is formatted with %+v (and, as the JSON and text
//     handlers would, with json.Marshal and MarshalText); if the %+v form
//     changes under String or contains a registered value, the value
//     becomes the redacted %+v string; if only another form does, it
//     becomes Redacted;
//   - keys and group names are scrubbed by s.
//
// Attributes given to WithAttrs are redacted once, when WithAttrs is
// called: values registered with s later are not removed from them.
// The handler is safe for concurrent use if inner is.
func NewHandler(inner slog.Handler, s *Scrubber) slog.Handler {
	return &handler{inner: inner, sc: s, keys: NewKeyCache(s)}
}

// handler is the redacting slog.Handler; it is immutable (keys is a
// cache of the checks on keys, shared by the handlers derived from it).
type handler struct {
	inner slog.Handler
	sc    *Scrubber
	keys  *KeyCache
}

// Enabled reports whether inner handles records at level l.
func (h *handler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

// Handle redacts r into a new record and passes it to inner; a record
// that redaction would leave as it is passes as it is.
func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	if h.unchanged(r) {
		return h.inner.Handle(ctx, r)
	}
	nr := slog.NewRecord(r.Time, r.Level, h.text(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		nr.AddAttrs(h.attr(a, 0))
		return true
	})
	return h.inner.Handle(ctx, nr)
}

// WithAttrs redacts as and returns a handler whose inner has them.
func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = h.attr(a, 0)
	}
	return &handler{inner: h.inner.WithAttrs(out), sc: h.sc, keys: h.keys}
}

// WithGroup returns a handler whose inner opens group name.
func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &handler{inner: h.inner.WithGroup(h.sc.Scrub(name)), sc: h.sc, keys: h.keys}
}

// unchanged reports whether redacting r would change nothing: its
// message and string values are unchanged by text, its keys by the
// Scrubber, no key is sensitive, and every value is a string, number,
// boolean, duration or time (anything else takes the full path). It does
// not allocate, so the common log line costs no copy.
func (h *handler) unchanged(r slog.Record) bool {
	if !h.keys.Clean(r.Message) { // h.text(r.Message) == r.Message; messages, like keys, are mostly constants
		return false
	}
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		ok = h.attrUnchanged(a)
		return ok
	})
	return ok
}

// attrUnchanged is unchanged for one attribute; attr would return a
// equal to a. The checks on the key (IsSensitiveKey, the Scrubber) are
// remembered per key (KeyCache): log lines repeat the same keys.
func (h *handler) attrUnchanged(a slog.Attr) bool {
	if !h.keys.Plain(a.Key) {
		return false
	}
	switch a.Value.Kind() {
	case slog.KindString:
		s := a.Value.String()
		return h.text(s) == s
	case slog.KindInt64, slog.KindUint64, slog.KindFloat64, slog.KindBool, slog.KindDuration, slog.KindTime:
		return true
	}
	return false
}

// text redacts free text: the policy, then registered values.
func (h *handler) text(s string) string { return h.sc.Scrub(String(s)) }

// attr returns a redacted copy of a.
func (h *handler) attr(a slog.Attr, depth int) slog.Attr {
	key := h.sc.Scrub(a.Key)
	if IsSensitiveKey(a.Key) || depth > maxGroupDepth {
		return slog.String(key, Redacted)
	}
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(key, h.text(v.String()))
	case slog.KindGroup:
		in := v.Group()
		out := make([]slog.Attr, len(in))
		for i, g := range in {
			out[i] = h.attr(g, depth+1)
		}
		return slog.Attr{Key: key, Value: slog.GroupValue(out...)}
	case slog.KindAny:
		return slog.Attr{Key: key, Value: h.anyValue(v.Any())}
	default:
		return slog.Attr{Key: key, Value: v}
	}
}

// anyValue redacts a KindAny value.
func (h *handler) anyValue(v any) slog.Value {
	switch x := v.(type) {
	case error:
		return slog.StringValue(h.text(x.Error()))
	case []byte:
		return slog.StringValue(h.text(string(x)))
	}
	s := fmt.Sprintf("%+v", v)
	forms := []string{s}
	if j, err := json.Marshal(v); err == nil {
		forms = append(forms, string(j))
	}
	if tm, ok := v.(encoding.TextMarshaler); ok {
		if t, err := tm.MarshalText(); err == nil {
			forms = append(forms, string(t))
		}
	}
	for i, f := range forms {
		if String(f) == f && !h.sc.containsString(f) {
			continue
		}
		if i == 0 {
			return slog.StringValue(h.text(s))
		}
		return slog.StringValue(Redacted) // the %+v form may hold another encoding
	}
	return slog.AnyValue(v)
}
