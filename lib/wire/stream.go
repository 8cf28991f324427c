package wire

// Stream frame types (docs/protocol.md, "Stream frames"): after an
// accepting response, both sides exchange stream frames until one sends
// detach, exit or error, or closes.
const (
	StreamData   = "data"
	StreamResize = "resize"
	StreamEOF    = "eof"
	StreamDetach = "detach"
	StreamExit   = "exit"
	StreamError  = "error"
	// StreamTrailers carries the fields that follow a body (HTTP
	// trailers, RFC 9110 section 6.5) in H: sent after the last data
	// frame and before eof. It does not end the stream.
	StreamTrailers = "trailers"
)

// HeaderField is one field of a trailers frame: a name and its value, as
// an HTTP field line (RFC 9110 section 5). Repeats are separate entries,
// in the order they were received.
type HeaderField struct {
	// Name is the field name: non-empty (else frame.malformed).
	Name string `msgpack:"name"`
	// Value is the field value; "" (sent as an absent key) is an empty
	// value.
	Value string `msgpack:"value,omitempty"`
}

// StreamFrame is one frame of a stream. Fields are declared in bytewise
// order of their keys; zero fields are omitted (an exit status of 0 is sent
// as an absent status, a trailers frame without fields as {t: "trailers"}).
type StreamFrame struct {
	B      []byte        `msgpack:"b,omitempty"`      // data: the bytes
	Code   string        `msgpack:"code,omitempty"`   // error: stable code
	Cols   uint16        `msgpack:"cols,omitempty"`   // resize: columns
	H      []HeaderField `msgpack:"h,omitempty"`      // trailers: the fields, in order (only on trailers)
	Msg    string        `msgpack:"msg,omitempty"`    // error: safe message
	Rows   uint16        `msgpack:"rows,omitempty"`   // resize: rows
	Status int64         `msgpack:"status,omitempty"` // exit: wait status or exit code
	T      string        `msgpack:"t"`                // frame type
}

// Ends reports whether f ends the stream (detach, exit or error).
func (f *StreamFrame) Ends() bool {
	return f.T == StreamDetach || f.T == StreamExit || f.T == StreamError
}

// DecodeStreamFrame validates and decodes one stream frame payload. Unknown
// fields (also inside a trailers entry) are request.unknown_field; an
// unknown t, a field of the wrong type, h on a frame other than trailers,
// another field on a trailers frame, or a trailers entry without a name is
// frame.malformed.
func DecodeStreamFrame(payload []byte) (*StreamFrame, error) {
	f := &StreamFrame{}
	if err := DecodeBody(payload, f, true); err != nil {
		return nil, err
	}
	switch f.T {
	case StreamData, StreamResize, StreamEOF, StreamDetach, StreamExit, StreamError:
		if len(f.H) > 0 {
			return nil, Errorf(CodeFrameMalformed, "h on a %s frame", f.T)
		}
		return f, nil
	case StreamTrailers:
		if len(f.B) > 0 || f.Code != "" || f.Cols != 0 || f.Msg != "" || f.Rows != 0 || f.Status != 0 {
			return nil, Errorf(CodeFrameMalformed, "a trailers frame carries only h")
		}
		for i := range f.H {
			if f.H[i].Name == "" {
				return nil, Errorf(CodeFrameMalformed, "trailers field %d has no name", i)
			}
		}
		return f, nil
	}
	return nil, Errorf(CodeFrameMalformed, "unknown stream frame type")
}
