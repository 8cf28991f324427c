package helperapi

import "hostkit.dev/lib/wire"

// Validate refuses a MaxBytes out of 0..MaxLogBytes (request.invalid).
func (r *LogsRequest) Validate() error {
	if r.MaxBytes < 0 || r.MaxBytes > MaxLogBytes {
		return wire.Errorf(wire.CodeRequestInvalid, "max_bytes must be 0..%d", MaxLogBytes)
	}
	return nil
}

// Validate refuses a cancel that names neither a request id nor a
// correlation id, a RequestID that is not wire.IDLen (16) bytes, and a
// Corr longer than wire.MaxCorrLen bytes, each with request.invalid.
func (r *CancelRequest) Validate() error {
	if len(r.RequestID) == 0 && r.Corr == "" {
		return wire.Errorf(wire.CodeRequestInvalid, "op.cancel needs request_id or corr")
	}
	if len(r.RequestID) > 0 && len(r.RequestID) != wire.IDLen {
		return wire.Errorf(wire.CodeRequestInvalid, "request_id must be %d bytes", wire.IDLen)
	}
	if len(r.Corr) > wire.MaxCorrLen {
		return wire.Errorf(wire.CodeRequestInvalid, "corr is too long")
	}
	return nil
}
