package image

import "hostkit.dev/cmd/containerization-helper/internal/strictjson"

// jsonOptions is how this package reads every document: one JSON value,
// nested at most 32 deep, no key twice in an object even after folding
// the way encoding/json matches field names (package strictjson).
var jsonOptions = strictjson.Options{FoldKeys: true}

// checkJSON reports an error unless b is one strict JSON document.
func checkJSON(b []byte) error {
	_, err := strictjson.Parse(b, jsonOptions)
	return err
}

// decodeStrict checks b with checkJSON and decodes it into v; unknown
// fields are refused unless tolerate is set.
func decodeStrict(b []byte, v any, tolerate bool) error {
	return strictjson.Decode(b, v, tolerate, jsonOptions)
}
