package audit

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"hostkit.dev/lib/wire"
)

// marshalLine encodes r as one JSON line (no newline) exactly as
// encoding/json with SetEscapeHTML(false) would: the same field order, map
// keys sorted, strings escaped the same way. Records whose fields hold
// something other than strings, booleans, integers, string slices, nil,
// and maps of string keys and slices of those (what scrubRecord leaves)
// take encoding/json itself.
func marshalLine(r Record) ([]byte, error) {
	if y := r.Time.Year(); y < 0 || y > 9999 || !simpleFields(r.Fields) {
		return marshalLineJSON(r)
	}
	b := make([]byte, 0, 320+48*len(r.Fields))
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = append(b, `,"time":"`...)
	b = r.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","daemon":`...)
	b = appendJSONString(b, r.Daemon)
	b = appendRecordCore(b, &r)
	if len(r.Fields) > 0 {
		b = append(b, `,"fields":`...)
		b = appendJSONValue(b, r.Fields)
	}
	b = append(b, `,"prev":`...)
	b = appendJSONString(b, r.Prev)
	return append(b, '}'), nil
}

// marshalLineJSON is marshalLine through encoding/json.
func marshalLineJSON(r Record) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, wire.Wrap(CodeInvalid, "record does not encode as JSON", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// simpleFields reports whether appendJSONValue encodes every value of m.
func simpleFields(m map[string]any) bool {
	for _, v := range m {
		if !simpleValue(v, 0) {
			return false
		}
	}
	return true
}

func simpleValue(v any, depth int) bool {
	if depth > 16 {
		return false
	}
	switch x := v.(type) {
	case string, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, []string, nil:
		return true
	case map[string]any:
		for _, e := range x {
			if !simpleValue(e, depth+1) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if !simpleValue(e, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}

// appendJSONValue encodes a value simpleValue accepts.
func appendJSONValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case string:
		return appendJSONString(b, x)
	case bool:
		return strconv.AppendBool(b, x)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case int8:
		return strconv.AppendInt(b, int64(x), 10)
	case int16:
		return strconv.AppendInt(b, int64(x), 10)
	case int32:
		return strconv.AppendInt(b, int64(x), 10)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case uint:
		return strconv.AppendUint(b, uint64(x), 10)
	case uint8:
		return strconv.AppendUint(b, uint64(x), 10)
	case uint16:
		return strconv.AppendUint(b, uint64(x), 10)
	case uint32:
		return strconv.AppendUint(b, uint64(x), 10)
	case uint64:
		return strconv.AppendUint(b, x, 10)
	case []string:
		if x == nil {
			return append(b, "null"...)
		}
		b = append(b, '[')
		for i, s := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, s)
		}
		return append(b, ']')
	case []any:
		if x == nil {
			return append(b, "null"...)
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONValue(b, e)
		}
		return append(b, ']')
	case map[string]any:
		if x == nil {
			return append(b, "null"...)
		}
		var arr [16]string
		keys := arr[:0]
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONValue(b, x[k])
		}
		return append(b, '}')
	}
	return append(b, "null"...) // nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s as encoding/json does without HTML escaping:
// `"` and `\` escaped, control characters as \b \f \n \r \t or \u00XX,
// invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendRecordCore appends the fields between "daemon" and "fields" of
// a record line (actor, op, phase, outcome, code, corr), in encoding/json's
// order and escaping; both encoders (marshalLine and the typed-fields
// path) share it so their lines stay byte-identical.
func appendRecordCore(b []byte, r *Record) []byte {
	b = append(b, `,"actor":{"uid":`...)
	b = strconv.AppendInt(b, int64(r.Actor.UID), 10)
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(r.Actor.PID), 10)
	b = append(b, `},"op":`...)
	b = appendJSONString(b, r.Op)
	if r.Phase != "" {
		b = append(b, `,"phase":`...)
		b = appendJSONString(b, string(r.Phase))
	}
	b = append(b, `,"outcome":`...)
	b = appendJSONString(b, string(r.Outcome))
	if r.Code != "" {
		b = append(b, `,"code":`...)
		b = appendJSONString(b, r.Code)
	}
	if r.Corr != "" {
		b = append(b, `,"corr":`...)
		b = appendJSONString(b, r.Corr)
	}
	return b
}
