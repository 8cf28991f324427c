package redact

import (
	"fmt"
	"io"
	"log/slog"
	"unsafe"
)

// Secret holds raw secret material as bytes (never as a string) and refuses
// to reveal it anywhere but Bytes: String, GoString, every fmt verb,
// LogValue, MarshalJSON, MarshalText and MarshalBinary all yield Redacted.
// Even a Secret inside a struct field that fmt cannot call methods on
// (unexported) prints only an address: the buffer sits behind an
// unsafe.Pointer, which fmt never dereferences (a typed pointer to a struct
// would be printed in full by a bad verb such as %s).
//
// Copies of a Secret share one buffer, so Zero on any of them clears all.
// The zero Secret is empty. Wire encoding of secret material is explicit:
// encode Bytes() where a protocol calls for the raw value.
type Secret struct {
	p unsafe.Pointer // *secretBuf
}

// secretBuf is the shared buffer behind a Secret.
type secretBuf struct{ b []byte }

// NewSecret returns a Secret holding a copy of b; the caller may zero b.
func NewSecret(b []byte) Secret {
	return Secret{p: unsafe.Pointer(&secretBuf{b: append([]byte(nil), b...)})}
}

// Bytes returns the secret's own buffer (not a copy): do not modify or
// retain it. It is nil after Zero and for the zero Secret.
func (s Secret) Bytes() []byte {
	if s.p == nil {
		return nil
	}
	return s.buf().b
}

// buf returns the shared buffer; s.p is not nil.
func (s Secret) buf() *secretBuf { return (*secretBuf)(s.p) }

// Len returns the length of the secret in bytes; 0 after Zero.
func (s Secret) Len() int { return len(s.Bytes()) }

// Zero overwrites the buffer with zeros and drops it, for every copy of s.
// It must not run concurrently with another use of s or its copies.
func (s Secret) Zero() {
	if s.p == nil {
		return
	}
	clear(s.buf().b)
	s.buf().b = nil
}

// String returns Redacted.
func (s Secret) String() string { return Redacted }

// GoString returns Redacted (for %#v).
func (s Secret) GoString() string { return Redacted }

// Format implements fmt.Formatter: every verb and flag prints Redacted.
func (s Secret) Format(f fmt.State, verb rune) { _, _ = io.WriteString(f, Redacted) }

// LogValue implements slog.LogValuer: the value is the string Redacted.
func (s Secret) LogValue() slog.Value { return slog.StringValue(Redacted) }

// MarshalJSON returns the JSON string "[REDACTED]".
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + Redacted + `"`), nil }

// MarshalText returns Redacted.
func (s Secret) MarshalText() ([]byte, error) { return []byte(Redacted), nil }

// MarshalBinary returns Redacted, so binary encoders that use
// encoding.BinaryMarshaler (gob, msgpack) never see the material.
func (s Secret) MarshalBinary() ([]byte, error) { return []byte(Redacted), nil }
