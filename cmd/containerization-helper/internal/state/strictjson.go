package state

import "hostkit.dev/cmd/containerization-helper/internal/strictjson"

// checkJSON reports an error unless b is exactly one strict JSON document
// (package strictjson: nested at most 32 deep, no key twice in an object,
// also after folding the way encoding/json matches field names) whose
// object keys all match [a-z0-9_.:-]+ (every key this package writes
// does: snake_case names, lowercase ids and hashes, so no other spelling
// can be matched to a field).
func checkJSON(b []byte) error {
	_, err := strictjson.Parse(b, strictjson.Options{FoldKeys: true, Key: plainKey})
	return err
}

// plainKey reports whether k matches [a-z0-9_.:-]+.
func plainKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}
