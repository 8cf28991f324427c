package codec

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"
)

// object is a decoded JSON object read by exact key; known records every
// key the codec knows, so rest can refuse the others.
type object struct {
	what, path string
	m          map[string]any
	known      map[string]bool
}

// asObject returns v as an object, or CodeDecode.
func asObject(what, path string, v any) (*object, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, decodeErr(what, "%s: not an object", path)
	}
	return &object{what: what, path: path, m: m, known: map[string]bool{}}, nil
}

// get returns the member k, marking it known; present is false when absent.
func (o *object) get(k string) (v any, present bool) {
	o.known[k] = true
	v, present = o.m[k]
	return v, present
}

// missing and wrongType are the two field errors.
func (o *object) missing(k string) error {
	return decodeErr(o.what, "%s: required", member(o.path, k))
}

func (o *object) wrongType(k, want string) error {
	return decodeErr(o.what, "%s: not %s", member(o.path, k), want)
}

// str returns the string member k; required says whether it must exist.
func (o *object) str(k string, required bool) (string, error) {
	v, ok := o.get(k)
	if !ok {
		if required {
			return "", o.missing(k)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", o.wrongType(k, "a string")
	}
	return s, nil
}

// uint returns the non-negative integer member k (at most max); absent is
// 0 unless required.
func (o *object) uint(k string, required bool, max uint64) (uint64, error) {
	v, ok := o.get(k)
	if !ok {
		if required {
			return 0, o.missing(k)
		}
		return 0, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, o.wrongType(k, "a number")
	}
	u, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil || u > max {
		return 0, o.wrongType(k, "a non-negative integer in range")
	}
	return u, nil
}

// obj returns the object member k.
func (o *object) obj(k string, required bool) (*object, error) {
	v, ok := o.get(k)
	if !ok {
		if required {
			return nil, o.missing(k)
		}
		return nil, nil
	}
	return asObject(o.what, member(o.path, k), v)
}

// time returns the RFC 3339 timestamp member k (required).
func (o *object) time(k string) (time.Time, error) {
	s, err := o.str(k, true)
	if err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, o.wrongType(k, "an RFC 3339 timestamp")
	}
	return t, nil
}

// stringMap returns the member k as a map of strings (optional; nil when
// absent).
func (o *object) stringMap(k string) (map[string]string, error) {
	sub, err := o.obj(k, false)
	if err != nil || sub == nil {
		return nil, err
	}
	out := make(map[string]string, len(sub.m))
	for key, v := range sub.m {
		s, ok := v.(string)
		if !ok {
			return nil, sub.wrongType(key, "a string")
		}
		out[key] = s
	}
	return out, nil
}

// strList returns the member k, required, as an array of strings (runc
// writes null for an empty list: that is an empty list too).
func (o *object) strList(k string) ([]string, error) {
	v, ok := o.get(k)
	if !ok {
		return nil, o.missing(k)
	}
	if v == nil {
		return nil, nil
	}
	a, ok := v.([]any)
	if !ok {
		return nil, o.wrongType(k, "an array of strings")
	}
	out := make([]string, 0, len(a))
	for _, e := range a {
		s, ok := e.(string)
		if !ok {
			return nil, o.wrongType(k, "an array of strings")
		}
		out = append(out, s)
	}
	return out, nil
}

// allowStrings marks keys as known without returning them (the codec knows
// them and they carry nothing hostkit uses); each, when present, must
// still be a string.
func (o *object) allowStrings(keys ...string) error {
	for _, k := range keys {
		if _, err := o.str(k, false); err != nil {
			return err
		}
	}
	return nil
}

// rest refuses any member the codec did not ask for.
func (o *object) rest() error {
	var unknown []string
	for k := range o.m {
		if !o.known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return decodeErr(o.what, "%s: unknown key", member(o.path, unknown[0]))
}

// itoa formats an index.
func itoa(i int) string { return strconv.Itoa(i) }

// positiveInt returns v as an integer in [1, max].
func positiveInt(v any, max uint64) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	u, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil || u == 0 || u > max {
		return 0, false
	}
	return int(u), true
}
