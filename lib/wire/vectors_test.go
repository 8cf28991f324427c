package wire

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/matryer/is"
)

type vector struct {
	Name  string          `json:"name"`
	Hex   string          `json:"hex"`
	Code  string          `json:"code"`
	Value json.RawMessage `json:"value"`
}

type vectorFile struct {
	Valid      []vector `json:"valid"`
	AcceptOnly []vector `json:"accept_only"`
	Invalid    []vector `json:"invalid"`
}

func loadVectors(t testing.TB) vectorFile {
	raw, err := os.ReadFile("testdata/wire-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vf vectorFile
	if err := json.Unmarshal(raw, &vf); err != nil {
		t.Fatal(err)
	}
	if len(vf.Valid) == 0 || len(vf.Invalid) == 0 {
		t.Fatal("no vectors")
	}
	return vf
}

// goValue turns a vector's JSON value into Go values: {bin_hex} → []byte,
// integers → int64, objects → map[string]any.
func goValue(t testing.TB, raw json.RawMessage) any {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return convert(t, v)
}

func convert(t testing.TB, v any) any {
	switch x := v.(type) {
	case map[string]any:
		if h, ok := x["bin_hex"]; ok && len(x) == 1 {
			b, err := hex.DecodeString(h.(string))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		out := map[string]any{}
		for k, e := range x {
			out[k] = convert(t, e)
		}
		return out
	case []any:
		for i := range x {
			x[i] = convert(t, x[i])
		}
		return x
	case json.Number:
		i, err := x.Int64()
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	return v
}

// encodeVector builds the envelope a vector describes with this package's
// encoders.
func encodeVector(t *testing.T, value map[string]any) []byte {
	is := is.New(t)
	var body []byte
	if b, ok := value["body"]; ok {
		var err error
		body, err = Marshal(b)
		is.NoErr(err)
	}
	if _, isResp := value["ok"]; isResp {
		r := &Response{ID: value["id"].([]byte), OK: value["ok"].(bool), Body: body}
		if e, ok := value["err"].(map[string]any); ok {
			r.Err = &ErrorBody{Code: e["code"].(string), Msg: e["msg"].(string), Retry: Retry(e["retry"].(string))}
		}
		return AppendResponse(nil, r)
	}
	r := &Request{ID: value["id"].([]byte), Op: value["op"].(string), Deadline: value["deadline"].(int64), Body: body}
	if s, ok := value["idem"].(string); ok {
		r.Idem = s
	}
	if s, ok := value["corr"].(string); ok {
		r.Corr = s
	}
	return AppendRequest(nil, r)
}

func TestVectorsValidEncode(t *testing.T) {
	t.Parallel()
	for _, v := range loadVectors(t).Valid {
		t.Run(v.Name, func(t *testing.T) {
			is := is.New(t)
			value := goValue(t, v.Value).(map[string]any)
			got := hex.EncodeToString(encodeVector(t, value))
			is.Equal(got, v.Hex) // encoder reproduces the vector byte for byte
		})
	}
}

func TestVectorsDecode(t *testing.T) {
	t.Parallel()
	vf := loadVectors(t)
	for _, v := range append(vf.Valid, vf.AcceptOnly...) {
		t.Run(v.Name, func(t *testing.T) {
			is := is.New(t)
			payload, err := hex.DecodeString(v.Hex)
			is.NoErr(err)
			value := goValue(t, v.Value).(map[string]any)
			if _, isResp := value["ok"]; isResp {
				r, err := DecodeResponse(payload, Limits{})
				is.NoErr(err)
				is.Equal(r.ID, value["id"].([]byte))
				is.Equal(r.OK, value["ok"].(bool))
				return
			}
			r, err := DecodeRequest(payload, Limits{})
			is.NoErr(err)
			is.Equal(r.Op, value["op"].(string))
			is.Equal(r.Deadline, value["deadline"].(int64))
			is.Equal(r.ID, value["id"].([]byte))
			// decode → encode reproduces the canonical form (accept_only
			// vectors canonicalise to the valid spelling).
			want := value
			if b, ok := want["body"].(map[string]any); ok && len(b) == 0 {
				delete(want, "body")
			}
			is.Equal(hex.EncodeToString(AppendRequest(nil, r)), hex.EncodeToString(encodeVector(t, want)))
			if r.Body != nil {
				var m map[string]any
				is.NoErr(Unmarshal(r.Body, &m, true))
				again, err := Marshal(m)
				is.NoErr(err)
				is.Equal(again, r.Body) // body round trip is stable
			}
		})
	}
}

func TestVectorsInvalid(t *testing.T) {
	t.Parallel()
	for _, v := range loadVectors(t).Invalid {
		t.Run(v.Name, func(t *testing.T) {
			is := is.New(t)
			payload, err := hex.DecodeString(v.Hex)
			is.NoErr(err)
			_, err = DecodeRequest(payload, Limits{})
			is.True(err != nil)
			is.Equal(CodeOf(err), v.Code)
		})
	}
}
