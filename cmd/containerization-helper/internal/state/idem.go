package state

import (
	"slices"
	"time"

	"hostkit.dev/lib/wire"
)

// Idem returns the result stored under key when key was used for the same
// op and request (requestHash, e.g. hex SHA-256 of the canonical body):
// (result, true, nil). A key never used, or whose record expired, gives
// (nil, false, nil). A key used with another op or request is
// CodeIdemConflict. Errors also: CodeInvalid, CodeClosed.
func (s *Store) Idem(key, op, requestHash string) ([]byte, bool, error) {
	var out []byte
	var found bool
	err := s.read(func() error {
		if err := checkIdem(key, op, requestHash, nil); err != nil {
			return err
		}
		i, ok := s.d.findIdem(key)
		if !ok || s.d.Idempotency[i].ExpiresMS <= s.opt.Now().UnixMilli() {
			return nil
		}
		r := s.d.Idempotency[i]
		if r.Op != op || r.RequestHash != requestHash {
			return conflict()
		}
		out, found = slices.Clone(r.Result), true
		return nil
	})
	return out, found, err
}

// PutIdem stores result under key for op and requestHash, durably, for
// Options.IdemTTL. Storing the same answer again is a no-op that keeps
// the first record; a live record for another op or request is
// CodeIdemConflict. Errors also: CodeInvalid, CodeFull, CodeIO.
func (s *Store) PutIdem(key, op, requestHash string, result []byte) error {
	return s.mutate(func(now time.Time) error { return s.putIdem(key, op, requestHash, result, now) }, nil)
}

// putIdem is PutIdem's change; s.mu is held.
func (s *Store) putIdem(key, op, requestHash string, result []byte, now time.Time) error {
	if err := checkIdem(key, op, requestHash, result); err != nil {
		return err
	}
	i, ok := s.d.findIdem(key)
	if ok && s.d.Idempotency[i].ExpiresMS > now.UnixMilli() {
		if r := s.d.Idempotency[i]; r.Op != op || r.RequestHash != requestHash {
			return conflict()
		}
		return nil
	}
	rec := idemJSON{Key: []byte(key), Op: op, RequestHash: requestHash, Result: slices.Clone(result),
		CreatedMS: now.UnixMilli(), ExpiresMS: now.Add(s.opt.IdemTTL).UnixMilli()}
	if ok {
		s.d.Idempotency[i] = rec // the expired record under the same key
		return nil
	}
	if len(s.d.Idempotency) >= s.opt.MaxIdem {
		s.sweep(now)
		if len(s.d.Idempotency) >= s.opt.MaxIdem {
			return &wire.Error{Code: CodeFull, Msg: "too many idempotency records", Retry: wire.RetrySafe}
		}
		i, _ = s.d.findIdem(key)
	}
	s.d.Idempotency = slices.Insert(s.d.Idempotency, i, rec)
	return nil
}

func conflict() error {
	return wire.Errorf(CodeIdemConflict, "idempotency key was used before with another op or request")
}

// checkIdem validates an idempotency record's parts.
func checkIdem(key, op, hash string, result []byte) error {
	switch {
	case key == "" || len(key) > maxKeyBytes:
		return wire.Errorf(CodeInvalid, "idempotency key must be 1 to %d bytes", maxKeyBytes)
	case op == "" || len(op) > maxOpBytes || !plainKey(op):
		return wire.Errorf(CodeInvalid, "op must be 1 to %d bytes of [a-z0-9_.:-]", maxOpBytes)
	case hash == "" || !validHash(hash):
		return wire.Errorf(CodeInvalid, "request hash must be 1 to %d bytes of [a-z0-9_.:-]", maxHashBytes)
	case len(result) > maxResultBytes:
		return wire.Errorf(CodeInvalid, "idempotency result is larger than %d bytes", maxResultBytes)
	}
	return nil
}
