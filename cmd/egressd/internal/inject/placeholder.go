package inject

import (
	"encoding/json"
	"net/url"
	"strings"
)

// BodyString returns the JSON string at RFC 6901 pointer ptr in body, and
// whether there is one (the body must parse as for Body: one JSON value
// without duplicate keys).
func BodyString(body []byte, ptr string) (string, bool) {
	toks, err := parsePointer(ptr)
	if err != nil {
		return "", false
	}
	n, err := parseJSON(body)
	if err != nil {
		return "", false
	}
	for _, t := range toks {
		if n = child(n, t); n == nil {
			return "", false
		}
	}
	var s string
	if n.kind != 0 || json.Unmarshal(n.raw, &s) != nil {
		return "", false
	}
	return s, true
}

// QueryValues returns the decoded values of parameter param in the raw
// query q, in order, and whether q parses strictly (url.ParseQuery).
func QueryValues(q, param string) ([]string, bool) {
	v, err := url.ParseQuery(q)
	if err != nil {
		return nil, false
	}
	return v[param], true
}

// ReplaceQueryValue replaces the value of the single "param=old" pair in
// the raw query q with the query-escaped value, keeping every other byte
// and the order. It reports false when there is not exactly one
// parameter param or its value is not old.
func ReplaceQueryValue(q, param, old string, value []byte) (string, bool) {
	pairs := strings.Split(q, "&")
	hit := -1
	for i, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		if dk, err := url.QueryUnescape(k); err != nil || dk != param {
			continue
		}
		if dv, err := url.QueryUnescape(v); hit >= 0 || err != nil || dv != old {
			return "", false
		}
		hit = i
	}
	if hit < 0 {
		return "", false
	}
	k, _, _ := strings.Cut(pairs[hit], "=")
	pairs[hit] = k + "=" + url.QueryEscape(string(value))
	return strings.Join(pairs, "&"), true
}

// ReplacePathSegment replaces every path segment exactly equal to old
// with the path-escaped value and reports how many it replaced.
func ReplacePathSegment(path, old string, value []byte) (string, int) {
	segs := strings.Split(path, "/")
	n := 0
	for i, s := range segs {
		if s == old {
			segs[i] = url.PathEscape(string(value))
			n++
		}
	}
	return strings.Join(segs, "/"), n
}
