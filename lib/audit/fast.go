package audit

import (
	"log/slog"
	"maps"
	"strconv"
	"time"

	"hostkit.dev/lib/redact"
)

// keyBeforeSeq is the field End adds to an after record.
const keyBeforeSeq = "before_seq"

// text redacts one string of a record: the policy (redact.String), then
// the registered values.
func (l *Log) text(s string) string { return l.opts.Scrubber.Scrub(redact.String(s)) }

// cleanKey reports whether l.text(k) == k, remembered per key (Log.keys)
// while the Scrubber's registrations stay the same.
func (l *Log) cleanKey(k string) bool {
	if l.keys == nil {
		return l.text(k) == k
	}
	return l.keys.Clean(k)
}

// constText is text for strings that are mostly constants, such as ops
// and error codes: their checks are remembered as a key's are (cleanKey).
// Per-request strings (Corr, values) must not go through it, as they
// would fill the key cache.
func (l *Log) constText(s string) string {
	if l.cleanKey(s) {
		return s
	}
	return l.text(s)
}

// appendTail appends the part of r's line that follows the time and
// precedes prev — `,"daemon":…,"fields":{…}` — to b. Op, Code and Corr
// must be scrubbed already; every field key and string value is scrubbed
// here, as it is encoded straight from the caller's map and attributes
// (no copy of the map, no second pass). Keys are checked through the key
// cache (cleanKey): the same answer, without rechecking constant keys on
// every record. beforeSeq > 0 adds the field before_seq, replacing one of
// that name, as Pair.End does.
//
// The bytes are exactly those scrubRecord followed by marshalLine would
// give (TestTailMatchesGeneralPath). ok is false, and b must be dropped,
// when the record needs that general path: a value that is not a string,
// boolean, integer, []string or nil (an Attr: not a string, integer,
// boolean or []string), which is normalized through JSON first, or a key
// that scrubbing changes (two keys could then collide).
func (l *Log) appendTail(b []byte, r *Record, beforeSeq uint64) (_ []byte, ok bool) {
	// The fields, sorted by key as encoding/json writes a map: an
	// insertion sort, as records hold a dozen fields or so.
	// Fields, then Attrs, then before_seq; the sort is stable, so of
	// equal keys the last one is the one that counts.
	var arr [24]field
	fs := arr[:0]
	for k, v := range r.Fields {
		if !flatValue(v) || !l.cleanKey(k) {
			return b, false
		}
		fs = append(fs, field{k: k, v: v})
	}
	for _, a := range r.Attrs {
		if !flatAttr(a.Value) || !l.cleanKey(a.Key) {
			return b, false
		}
		fs = append(fs, field{k: a.Key, a: a.Value, attr: true})
	}
	if beforeSeq > 0 {
		fs = append(fs, field{k: keyBeforeSeq, beforeSeq: true})
	}
	for i := 1; i < len(fs); i++ {
		for j := i; j > 0 && fs[j].k < fs[j-1].k; j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
	n := 0
	for i := range fs {
		if i+1 < len(fs) && fs[i+1].k == fs[i].k {
			continue // replaced by a later one
		}
		fs[n] = fs[i]
		n++
	}
	fs = fs[:n]

	b = append(b, `,"daemon":`...)
	b = appendJSONString(b, l.opts.Daemon)
	b = appendRecordCore(b, r)
	if len(fs) == 0 {
		return b, true
	}
	b = append(b, `,"fields":{`...)
	for i, f := range fs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, f.k)
		b = append(b, ':')
		if f.beforeSeq {
			b = strconv.AppendUint(b, beforeSeq, 10)
			continue
		}
		if f.attr {
			b = l.appendAttr(b, f.a)
			continue
		}
		switch x := f.v.(type) {
		case string:
			b = appendJSONString(b, l.text(x))
		case []string:
			// scrubRecord copies a slice into a new one, so a nil slice
			// is written as [] there too.
			b = append(b, '[')
			for j, s := range x {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendJSONString(b, l.text(s))
			}
			b = append(b, ']')
		default:
			b = appendJSONValue(b, x)
		}
	}
	return append(b, '}'), true
}

// field is one field of a record being encoded.
type field struct {
	k         string
	v         any        // from Fields
	a         slog.Value // from Attrs, when attr
	attr      bool
	beforeSeq bool // appendTail's beforeSeq (not boxed into v)
}

// flatAttr reports whether appendAttr encodes v.
func flatAttr(v slog.Value) bool {
	switch v.Kind() {
	case slog.KindString, slog.KindInt64, slog.KindUint64, slog.KindBool:
		return true
	case slog.KindAny:
		_, ok := v.Any().([]string)
		return ok
	}
	return false
}

// appendAttr encodes a value flatAttr accepts as the general path encodes
// its Any(): strings (and the strings of a list) scrubbed.
func (l *Log) appendAttr(b []byte, v slog.Value) []byte {
	switch v.Kind() {
	case slog.KindString:
		return appendJSONString(b, l.text(v.String()))
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10)
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10)
	case slog.KindBool:
		return strconv.AppendBool(b, v.Bool())
	}
	b = append(b, '[') // []string, written [] when nil as in Fields
	for j, s := range v.Any().([]string) {
		if j > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, l.text(s))
	}
	return append(b, ']')
}

// flatValue reports whether appendTail encodes v.
func flatValue(v any) bool {
	switch v.(type) {
	case string, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, []string, nil:
		return true
	}
	return false
}

// appendHead appends the start of a line, `{"seq":N,"time":"T"`, and
// reports false for a time encoding/json cannot write (a year outside
// 0–9999), which takes the general path.
func appendHead(b []byte, seq uint64, t time.Time) ([]byte, bool) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, false
	}
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"time":"`...)
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), true
}

// appendPrev ends a line with prev.
func appendPrev(b []byte, prev string) []byte {
	b = append(b, `,"prev":`...)
	b = appendJSONString(b, prev)
	return append(b, '}')
}

// maxPooledLine caps the buffers kept for reuse between records, so that
// one huge record does not pin its buffer.
const maxPooledLine = 16 << 10

// mergedFields returns r for the general path: Attrs merged into a copy
// of Fields (an Attr replaces a field of its key, Value.Any() its value),
// and the field before_seq set when beforeSeq > 0. The caller's map is not
// modified.
func mergedFields(r Record, beforeSeq uint64) Record {
	if beforeSeq == 0 && len(r.Attrs) == 0 {
		return r
	}
	f := maps.Clone(r.Fields)
	if f == nil {
		f = map[string]any{}
	}
	for _, a := range r.Attrs {
		f[a.Key] = a.Value.Resolve().Any()
	}
	if beforeSeq > 0 {
		f[keyBeforeSeq] = beforeSeq
	}
	r.Fields, r.Attrs = f, nil
	return r
}
