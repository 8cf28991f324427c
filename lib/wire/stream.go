package wire

// Stream frame types (DESIGN.md, "Streams"): after an accepting response,
// both sides exchange stream frames until one sends detach, exit or error,
// or closes.
const (
	StreamData   = "data"
	StreamResize = "resize"
	StreamEOF    = "eof"
	StreamDetach = "detach"
	StreamExit   = "exit"
	StreamError  = "error"
)

// StreamFrame is one frame of a stream. Fields are declared in bytewise
// order of their keys; zero fields are omitted (an exit status of 0 is sent
// as an absent status).
type StreamFrame struct {
	B      []byte `msgpack:"b,omitempty"`      // data: the bytes
	Code   string `msgpack:"code,omitempty"`   // error: stable code
	Cols   uint16 `msgpack:"cols,omitempty"`   // resize: columns
	Msg    string `msgpack:"msg,omitempty"`    // error: safe message
	Rows   uint16 `msgpack:"rows,omitempty"`   // resize: rows
	Status int64  `msgpack:"status,omitempty"` // exit: wait status or exit code
	T      string `msgpack:"t"`                // frame type
}

// Ends reports whether f ends the stream (detach, exit or error).
func (f *StreamFrame) Ends() bool {
	return f.T == StreamDetach || f.T == StreamExit || f.T == StreamError
}

// DecodeStreamFrame validates and decodes one stream frame payload. Unknown
// fields are request.unknown_field; an unknown t is frame.malformed.
func DecodeStreamFrame(payload []byte) (*StreamFrame, error) {
	f := &StreamFrame{}
	if err := DecodeBody(payload, f, true); err != nil {
		return nil, err
	}
	switch f.T {
	case StreamData, StreamResize, StreamEOF, StreamDetach, StreamExit, StreamError:
		return f, nil
	}
	return nil, Errorf(CodeFrameMalformed, "unknown stream frame type")
}
