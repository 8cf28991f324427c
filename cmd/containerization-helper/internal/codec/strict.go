package codec

import (
	"errors"
	"strconv"

	"hostkit.dev/cmd/containerization-helper/internal/strictjson"
	"hostkit.dev/lib/wire"
)

// decodeErr builds a CodeDecode error; what names the document.
func decodeErr(what, format string, args ...any) *wire.Error {
	e := wire.Errorf(CodeDecode, what+": "+format, args...)
	e.Retry = wire.RetryAfterObserve
	return e
}

// parse checks b against the cap and returns its single JSON value (RFC
// 8259) as a tree: map[string]any for objects (keys unique), []any for
// arrays, string, json.Number, bool or nil. Everything the package doc
// calls strict about syntax is package strictjson's one pass; its refusal
// becomes CodeDecode naming the document.
func parse(what string, b []byte, max int) (any, error) {
	v, err := strictjson.Parse(b, strictjson.Options{MaxBytes: max, MaxDepth: maxDepth})
	var se *strictjson.Error
	if errors.As(err, &se) {
		return nil, decodeErr(what, "%s", se.Msg)
	}
	return v, err
}

// member returns the path of key k under path; keys are quoted and cut to
// 64 bytes so a message never carries a long attacker-chosen string.
func member(path, k string) string {
	if len(k) > 64 {
		k = k[:64] + "..."
	}
	return path + "[" + strconv.Quote(k) + "]"
}
