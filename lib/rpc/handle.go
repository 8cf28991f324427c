package rpc

import (
	"context"
	"errors"
	"reflect"

	"hostkit.dev/lib/wire"
)

// Validator is a request type that checks itself once decoded (ranges,
// shapes, fields that exclude each other). Decode and Handle call Validate
// on a request type that has it; the error should carry the op's code
// (request.invalid or one of its API's codes): an error without a code
// reaches the peer as request.invalid, with a generic message.
type Validator interface {
	Validate() error
}

// Decode decodes call's body strictly into a new Req (call.Decode: an
// unknown field is request.unknown_field, a wrong kind frame.malformed,
// an empty body leaves Req zero) and then runs Req's Validate method when
// *Req has one. The returned *Req is never nil: after an error it holds
// whatever was decoded before the failure, so a caller that must wipe a
// secret it may hold still can.
func Decode[Req any](call *Call) (*Req, error) {
	req := new(Req)
	if err := call.Decode(req); err != nil {
		return req, err
	}
	if v, ok := any(req).(Validator); ok {
		if err := v.Validate(); err != nil {
			return req, validateError(err)
		}
	}
	return req, nil
}

// validateError gives a Validate error without a code request.invalid,
// keeping it wrapped for the daemon's log; its text may quote the
// caller's input, so the peer gets a generic message.
func validateError(err error) error {
	var we *wire.Error
	if errors.As(err, &we) {
		return err
	}
	return wire.Wrap(wire.CodeRequestInvalid, "request body is not valid for this op", err)
}

// Handle returns the Handler of an op whose request body is a Req and
// whose answer is a Resp (a pointer to a struct with msgpack tags, a map,
// or struct{} for an empty answer): it decodes and validates the body
// with Decode, answers its error without calling fn, and otherwise
// returns what fn returns. After an error from fn the answer carries the
// error only, whatever Resp fn returned with it. Use struct{} as Req for
// an op that takes no body: any field is request.unknown_field.
func Handle[Req, Resp any](fn func(ctx context.Context, call *Call, req *Req) (Resp, error)) Handler {
	return func(ctx context.Context, call *Call) (any, error) {
		req, err := Decode[Req](call)
		if err != nil {
			return nil, err
		}
		resp, err := fn(ctx, call, req)
		if err != nil {
			return nil, err
		}
		// A nil pointer, map or slice is no answer (a stream op's way of
		// saying its stream carries the answer), never a non-nil any
		// holding a nil value.
		if v := reflect.ValueOf(any(resp)); !v.IsValid() || (isNillable(v.Kind()) && v.IsNil()) {
			return nil, nil
		}
		return resp, nil
	}
}

// isNillable reports whether a value of kind k can be nil.
func isNillable(k reflect.Kind) bool {
	switch k {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface, reflect.Func, reflect.Chan:
		return true
	}
	return false
}
