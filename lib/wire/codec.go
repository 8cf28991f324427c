package wire

import (
	"bytes"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// Marshal encodes v (an op body: a struct with `msgpack` tags, a map with
// string keys, or nil) in canonical form. Struct fields are omitted when
// zero, map keys are sorted, integers take their shortest form. The result
// is checked with Validate, so a struct whose fields are not declared in
// bytewise key order, or that holds a float, fails here (frame.malformed)
// rather than on the peer; api packages test every type with CheckSchema.
// nil encodes as nil (the absent body).
func Marshal(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	if b, handled, err := marshalFast(v); handled {
		return b, err
	}
	buf := bufPool.Get().(*bytes.Buffer)
	defer bufPool.Put(buf)
	buf.Reset()
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(buf)
	enc.UseCompactInts(true)
	enc.SetSortMapKeys(true)
	enc.SetOmitEmpty(true)
	if err := enc.Encode(v); err != nil {
		return nil, Wrap(CodeInternal, "body could not be encoded", err)
	}
	if err := Validate(buf.Bytes(), Limits{}); err != nil {
		// The msgpack library sorts only maps of interface values and of
		// strings; any other map type (map[string]int64, ...) comes out in
		// Go's random order. Re-encoding the generic form sorts every map.
		return recanonicalize(buf.Bytes())
	}
	return bytes.Clone(buf.Bytes()), nil
}

// recanonicalize decodes b into generic values (maps of interface values,
// which the encoder sorts) and encodes them again; the result must then be
// canonical, or the value holds something the wire cannot carry (a float, an
// ext type, a nil): internal.
func recanonicalize(b []byte) ([]byte, error) {
	var v any
	if err := msgpack.Unmarshal(b, &v); err != nil {
		return nil, Wrap(CodeInternal, "body encoding is not canonical", err)
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(v); err != nil {
		return nil, Wrap(CodeInternal, "body could not be encoded", err)
	}
	if err := Validate(buf.Bytes(), Limits{}); err != nil {
		return nil, Wrap(CodeInternal, "body encoding is not canonical", err)
	}
	return buf.Bytes(), nil
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// Unmarshal decodes a body produced by DecodeRequest or DecodeResponse
// (already validated) into v, a pointer to a struct or map. With strict
// (servers decoding requests) the body must conform to v's schema: a field v
// does not declare is request.unknown_field, a value of the wrong kind (str
// for bin, a negative number for an unsigned field, ...) is frame.malformed.
// Without strict (clients decoding responses) unknown fields are ignored and
// kinds are still checked. An empty body leaves v at its zero value.
func Unmarshal(body []byte, v any, strict bool) error {
	if len(body) == 0 {
		return nil
	}
	if handled, err := unmarshalFast(body, v, strict); handled {
		return err
	}
	if err := Conform(body, v, strict); err != nil {
		return err
	}
	dec := msgpack.GetDecoder()
	defer msgpack.PutDecoder(dec)
	dec.Reset(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return Wrap(CodeFrameMalformed, "body does not match the op's schema", err)
	}
	return nil
}

// DecodeBody validates a raw canonical body (as from another source than
// an envelope, e.g. a fuzz input or a stored record) and then Unmarshals it.
func DecodeBody(body []byte, v any, strict bool) error {
	if len(body) == 0 {
		return nil
	}
	if err := Validate(body, Limits{}); err != nil {
		return err
	}
	return Unmarshal(body, v, strict)
}
