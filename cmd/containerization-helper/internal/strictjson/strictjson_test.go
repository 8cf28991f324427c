package strictjson

import (
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestOptions(t *testing.T) {
	t.Parallel()
	lower := func(k string) bool { return k == strings.ToLower(k) }
	tests := []struct {
		name string
		in   string
		o    Options
		ok   bool
	}{
		{"exact keys: case differs", `{"size":1,"Size":2}`, Options{}, true},
		{"folded: case differs", `{"size":1,"Size":2}`, Options{FoldKeys: true}, false},
		{"folded: Kelvin sign", `{"k":1,"\u212a":2}`, Options{FoldKeys: true}, false},
		{"folded: nested", `{"a":{"x":1,"X":2}}`, Options{FoldKeys: true}, false},
		{"folded: other objects may repeat", `[{"x":1},{"X":2}]`, Options{FoldKeys: true}, true},
		{"duplicate", `{"a":1,"a":1}`, Options{}, false},
		{"key refused", `{"A":1}`, Options{Key: lower}, false},
		{"key refused deep", `[{"a":{"B":1}}]`, Options{Key: lower}, false},
		{"key accepted", `{"a":{"b":1}}`, Options{Key: lower}, true},
		{"depth cap", `[[[1]]]`, Options{MaxDepth: 2}, false},
		{"depth within", `[[1]]`, Options{MaxDepth: 2}, true},
		{"size cap", `[1,2,3]`, Options{MaxBytes: 6}, false},
		{"two values", `1 2`, Options{}, false},
		{"lone surrogate", `"\ud800"`, Options{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			_, err := Parse([]byte(tt.in), tt.o)
			is.Equal(err == nil, tt.ok)
			if err != nil {
				_, isErr := err.(*Error)
				is.True(isErr)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var v struct {
		Size int `json:"size"`
	}
	is.NoErr(Decode([]byte(`{"size":3}`), &v, false, Options{FoldKeys: true}))
	is.Equal(v.Size, 3)
	is.True(Decode([]byte(`{"size":3,"other":1}`), &v, false, Options{}) != nil) // unknown field
	is.NoErr(Decode([]byte(`{"size":4,"other":1}`), &v, true, Options{}))        // tolerated
	is.Equal(v.Size, 4)
	is.True(Decode([]byte(`{"size":3,"SIZE":5}`), &v, true, Options{FoldKeys: true}) != nil)
}
