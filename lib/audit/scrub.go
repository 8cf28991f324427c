package audit

import (
	"bytes"
	"encoding/json"

	"hostkit.dev/lib/wire"
)

// scrubRecord returns r with Op, Code, Corr and every string in Fields
// redacted. Fields are first normalized through JSON (so structs, Secrets
// and custom marshalers are seen as they will be written); the caller's map
// is not modified.
func (l *Log) scrubRecord(r Record) (Record, error) {
	r.Op, r.Code, r.Corr = l.text(r.Op), l.text(r.Code), l.text(r.Corr)
	return l.scrubFields(r)
}

// scrubFields is scrubRecord for Fields alone.
func (l *Log) scrubFields(r Record) (Record, error) {
	text := l.text
	if len(r.Fields) == 0 {
		r.Fields = nil
		return r, nil
	}
	if out, ok := scrubSimple(r.Fields, text); ok {
		r.Fields = out
		return r, nil
	}
	raw, err := json.Marshal(r.Fields)
	if err != nil {
		return Record{}, wire.Wrap(CodeInvalid, "fields do not encode as JSON", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var norm map[string]any
	if err := dec.Decode(&norm); err != nil {
		return Record{}, wire.Wrap(CodeInvalid, "fields do not decode as JSON", err)
	}
	r.Fields = scrubValue(norm, text).(map[string]any)
	return r, nil
}

// scrubValue applies text to every string (and map key) in a decoded JSON
// value.
func scrubValue(v any, text func(string) string) any {
	switch x := v.(type) {
	case string:
		return text(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[text(k)] = scrubValue(e, text)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = scrubValue(e, text)
		}
		return out
	default: // json.Number, bool, nil
		return v
	}
}

// scrubSimple scrubs fields whose values are all strings, booleans,
// integers, json.Number or string slices — what records carry almost
// always — without the JSON round trip. ok is false when some value needs
// normalizing first (structs, marshalers, nested maps), and the caller
// takes the general path.
func scrubSimple(fields map[string]any, text func(string) string) (map[string]any, bool) {
	for _, v := range fields {
		switch v.(type) {
		case string, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, json.Number, []string, nil:
		default:
			return nil, false
		}
	}
	out := make(map[string]any, len(fields))
	for k, v := range fields {
		switch x := v.(type) {
		case string:
			v = text(x)
		case []string:
			c := make([]string, len(x))
			for i, s := range x {
				c[i] = text(s)
			}
			v = c
		}
		out[text(k)] = v
	}
	return out, true
}
