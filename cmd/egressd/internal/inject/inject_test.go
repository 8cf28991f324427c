package inject

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

func rec(t *testing.T, url string, h ...string) *request.Record {
	t.Helper()
	var f []request.Field
	for i := 0; i < len(h); i += 2 {
		f = append(f, request.Field{Name: h[i], Value: h[i+1]})
	}
	r, err := request.Parse("POST", url, f, nil, request.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestParseTarget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want Target
		ok   bool
	}{
		{"header:authorization", Target{KindHeader, "Authorization"}, true},
		{"query:api_key", Target{KindQuery, "api_key"}, true},
		{"path:token", Target{KindPath, "token"}, true},
		{"body:/auth/key", Target{KindBody, "/auth/key"}, true},
		{"body:", Target{}, false},
		{"body:auth", Target{}, false},
		{"header:Bad Name", Target{}, false},
		{"path:a/b", Target{}, false},
		{"cookie:x", Target{}, false},
		{"header", Target{}, false},
		{"basic:password", Target{KindBasic, "password"}, true},
		{"basic:user", Target{KindBasic, "user"}, true},
		{"basic:Password", Target{}, false},
		{"basic:", Target{}, false},
	} {
		got, err := ParseTarget(tc.in)
		is.New(t).Equal(err == nil, tc.ok)
		if tc.ok {
			is.New(t).Equal(got, tc.want)
		}
	}
}

func TestHeader(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	r := rec(t, "https://api.test/")
	is.NoErr(Header(r, "Authorization", "Bearer {}", false, []byte("tok")))
	is.Equal(r.Header.Get("Authorization"), "Bearer tok")

	r = rec(t, "https://api.test/", "Authorization", "Bearer mine")
	is.Equal(wire.CodeOf(Header(r, "Authorization", "Bearer {}", false, []byte("tok"))), egressdapi.CodeInjectionConflict)
	is.Equal(r.Header.Get("Authorization"), "Bearer mine")
	is.NoErr(Header(r, "Authorization", "Bearer {}", true, []byte("tok")))
	is.Equal(r.Header.Values("Authorization"), []string{"Bearer tok"})

	r = rec(t, "https://api.test/")
	is.Equal(wire.CodeOf(Header(r, "X-Key", "{}", false, []byte("a\r\nX-Evil: 1"))), egressdapi.CodeHeaderInvalid)
	is.Equal(len(r.Header), 0)
	is.Equal(wire.CodeOf(Header(r, "X-Key", "{}{}", false, []byte("a"))), egressdapi.CodeInjectionFailed)
	is.Equal(wire.CodeOf(Header(r, "X-Key", "none", false, []byte("a"))), egressdapi.CodeInjectionFailed)
	is.NoErr(Header(r, "X-Key", "", false, []byte("a")))
	is.Equal(r.Header, http.Header{"X-Key": {"a"}})
}

func TestQuery(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	r := rec(t, "https://api.test/x?b=2&a=1")
	is.NoErr(Query(r, "key", []byte("v a&l=ue")))
	is.Equal(r.Query, "a=1&b=2&key=v+a%26l%3Due")

	r = rec(t, "https://api.test/x?key=mine")
	is.Equal(wire.CodeOf(Query(r, "key", []byte("v"))), egressdapi.CodeInjectionConflict)
	r = rec(t, "https://api.test/x?a;b=1")
	is.Equal(wire.CodeOf(Query(r, "key", []byte("v"))), egressdapi.CodeInjectionFailed)
}

func TestPath(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	r := rec(t, "https://api.test/v1/{token}/items")
	is.True(HasPathSegment(r.Path, "token"))
	is.True(Path(r, "token", []byte("a/b c")))
	is.Equal(r.Path, "/v1/a%2Fb%20c/items")
	r = rec(t, "https://api.test/v1/%7btoken%7D/items")
	is.True(Path(r, "token", []byte("x")))
	is.Equal(r.Path, "/v1/x/items")
	r = rec(t, "https://api.test/v1/x{token}/items")
	is.True(!Path(r, "token", []byte("x")))
}

func TestBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, ptr, want string
		ok                    bool
	}{
		{"add member", `{"a":1,"auth":{}}`, "/auth/key", `{"a":1,"auth":{"key":"V"}}`, true},
		{"replace member keeps order", `{"z":1,"key":"x","a":2}`, "/key", `{"z":1,"key":"V","a":2}`, true},
		{"array", `{"k":[1,2]}`, "/k/1", `{"k":[1,"V"]}`, true},
		{"escapes", `{"a/b":{"m~n":0}}`, "/a~1b/m~0n", `{"a/b":{"m~n":"V"}}`, true},
		{"root", `{"a":1}`, "", `"V"`, true},
		{"numbers kept", `{"n":1.50,"b":true,"z":null}`, "/k", `{"n":1.50,"b":true,"z":null,"k":"V"}`, true},
		{"duplicate keys", `{"a":1,"a":2}`, "/b", "", false},
		{"nested duplicate", `{"x":{"a":1,"a":2}}`, "/b", "", false},
		{"missing parent", `{"a":1}`, "/b/c", "", false},
		{"index out of range", `{"k":[1]}`, "/k/1", "", false},
		{"leading zero index", `{"k":[1,2]}`, "/k/01", "", false},
		{"scalar parent", `{"k":1}`, "/k/x", "", false},
		{"not json", `a=1`, "/a", "", false},
		{"trailing data", `{} {}`, "/a", "", false},
		{"bad escape", `{}`, "/a~2", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			got, err := Body([]byte(tc.body), tc.ptr, []byte("V"))
			if !tc.ok {
				is.Equal(wire.CodeOf(err), egressdapi.CodeInjectionFailed)
				return
			}
			is.NoErr(err)
			is.Equal(string(got), tc.want)
			is.True(json.Valid(got))
		})
	}
}
