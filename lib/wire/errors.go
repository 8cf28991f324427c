package wire

import (
	"errors"
	"fmt"
)

// Retry tells a caller whether repeating a failed request can help. It travels
// as the `retry` field of a response's `err` map.
type Retry string

// Retry values; the set is part of wire protocol v1.
const (
	// RetryNever: the same request will fail the same way.
	RetryNever Retry = "never"
	// RetrySafe: the request had no effect and may be sent again (with a new id).
	RetrySafe Retry = "safe"
	// RetryAfterObserve: the request may have had an effect; observe state first.
	RetryAfterObserve Retry = "after_observe"
)

// Wire-level error codes (stable `area.reason` strings, append-only; each is
// listed in docs/protocol.md). Daemon APIs add their own in lib/api/<daemon>api.
const (
	CodeInternal            = "internal"
	CodeFrameEmpty          = "frame.empty"
	CodeFrameMalformed      = "frame.malformed"
	CodeFrameTooLarge       = "frame.too_large"
	CodeFrameTruncated      = "frame.truncated"
	CodeOpUnknown           = "op.unknown"
	CodePeerDenied          = "peer.denied"
	CodeProtocolVersion     = "protocol.version_unsupported"
	CodeRequestDeadline     = "request.deadline_exceeded"
	CodeRequestIdemConflict = "request.idempotency_conflict"
	CodeRequestIdemRequired = "request.idempotency_required"
	CodeRequestInvalid      = "request.invalid"
	CodeRequestReplayed     = "request.replayed"
	CodeRequestUnknownField = "request.unknown_field"
	CodeServerBusy          = "server.busy"
	CodeServerShuttingDown  = "server.shutting_down"
	CodeStreamClosed        = "stream.closed"
	CodeUnavailable         = "daemon.unavailable"
	CodeConnectionClosed    = "connection.closed"
	CodeResponseMalformed   = "response.malformed"
	CodeResponseMismatch    = "response.id_mismatch"
)

// Codes lists every wire-level code above in sorted order; a test keeps it
// sorted and unique, and docs/protocol.md lists each one.
var Codes = []string{
	CodeConnectionClosed,
	CodeUnavailable,
	CodeFrameEmpty,
	CodeFrameMalformed,
	CodeFrameTooLarge,
	CodeFrameTruncated,
	CodeInternal,
	CodeOpUnknown,
	CodePeerDenied,
	CodeProtocolVersion,
	CodeRequestDeadline,
	CodeRequestIdemConflict,
	CodeRequestIdemRequired,
	CodeRequestInvalid,
	CodeRequestReplayed,
	CodeRequestUnknownField,
	CodeResponseMismatch,
	CodeResponseMalformed,
	CodeServerBusy,
	CodeServerShuttingDown,
	CodeStreamClosed,
}

// Error is hostkit's one error type: a stable Code (`area.reason`), a Msg that
// is safe to show any caller (already redacted), a Retry hint, and the wrapped
// internal error, which is logged but never sent on the wire.
//
// errors.Is(err, &Error{Code: c}) reports whether err carries code c.
type Error struct {
	Code  string // stable `area.reason` (docs/protocol.md, "Error codes")
	Msg   string // safe for any caller: already redacted
	Retry Retry  // the hint sent with Code; "" is sent as never (AsError)
	Err   error  // the wrapped cause: logged, never sent
}

// Error formats as "code: msg" and never includes the wrapped error, so an
// Error printed anywhere shows only what the caller may see.
func (e *Error) Error() string {
	if e.Msg == "" {
		return e.Code
	}
	return e.Code + ": " + e.Msg
}

// Unwrap returns the internal cause.
func (e *Error) Unwrap() error { return e.Err }

// Is matches another *Error by Code, so callers can test with
// errors.Is(err, &wire.Error{Code: wire.CodeRequestReplayed}).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf builds an *Error with code and a formatted safe message. Retry
// defaults to RetryNever.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...), Retry: RetryNever}
}

// Wrap builds an *Error with code and safe msg that wraps the internal cause.
func Wrap(code, msg string, cause error) *Error {
	return &Error{Code: code, Msg: msg, Retry: RetryNever, Err: cause}
}

// CodeOf returns the code carried by err, CodeInternal for an error without
// one, and "" for nil.
func CodeOf(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// AsError converts any error to an *Error. An error without a code becomes
// `internal` with a generic message and retry after_observe (it may have
// had an effect), so internal detail never reaches a peer.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		out := *e
		if out.Retry == "" {
			out.Retry = RetryNever
		}
		return &out
	}
	return &Error{Code: CodeInternal, Msg: "internal error", Retry: RetryAfterObserve, Err: err}
}

// HasCode reports whether err carries the given code.
func HasCode(err error, code string) bool { return CodeOf(err) == code }
