package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/vmihailenco/msgpack/v5"
)

// canonRow is one Validate case: ok rows must be accepted, the others
// rejected with frame.malformed.
type canonRow struct {
	name string
	in   []byte
	lim  Limits
	ok   bool
}

func runCanon(t *testing.T, rows []canonRow) {
	t.Helper()
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			err := Validate(tc.in, tc.lim)
			if tc.ok {
				is.NoErr(err)
				return
			}
			is.True(err != nil)
			is.Equal(CodeOf(err), CodeFrameMalformed)
		})
	}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// be appends u as a width-byte big-endian number (width 1, 2, 4 or 8).
func be(b []byte, width int, u uint64) []byte {
	switch width {
	case 1:
		return append(b, byte(u))
	case 2:
		return binary.BigEndian.AppendUint16(b, uint16(u))
	case 4:
		return binary.BigEndian.AppendUint32(b, uint32(u))
	}
	return binary.BigEndian.AppendUint64(b, u)
}

// form is one MessagePack header form: its marker, the width of the number
// that follows it, and the largest value (or length) it can carry. A fix
// form has width 0 and ORs the value into the marker.
type form struct {
	name   string
	marker byte
	width  int
	max    uint64
}

func (f form) encode(n uint64) []byte {
	if f.width == 0 {
		return []byte{f.marker | byte(n)}
	}
	return be([]byte{f.marker}, f.width, n)
}

var (
	uintForms = []form{
		{"positive fixint", 0x00, 0, 0x7f},
		{"uint8", 0xcc, 1, math.MaxUint8},
		{"uint16", 0xcd, 2, math.MaxUint16},
		{"uint32", 0xce, 4, math.MaxUint32},
		{"uint64", 0xcf, 8, math.MaxUint64},
	}
	strForms   = []form{{"fixstr", 0xa0, 0, 31}, {"str8", 0xd9, 1, 0xff}, {"str16", 0xda, 2, 0xffff}, {"str32", 0xdb, 4, math.MaxUint32}}
	binForms   = []form{{"bin8", 0xc4, 1, 0xff}, {"bin16", 0xc5, 2, 0xffff}, {"bin32", 0xc6, 4, math.MaxUint32}}
	arrayForms = []form{{"fixarray", 0x90, 0, 15}, {"array16", 0xdc, 2, 0xffff}, {"array32", 0xdd, 4, math.MaxUint32}}
	mapForms   = []form{{"fixmap", 0x80, 0, 15}, {"map16", 0xde, 2, 0xffff}, {"map32", 0xdf, 4, math.MaxUint32}}
)

// signedForm encodes i in int8..int64 (marker d0..d3) when it fits.
func signedForms(i int64) map[string][]byte {
	out := map[string][]byte{}
	if i >= -32 && i <= -1 {
		out["negative fixint"] = []byte{byte(int8(i))}
	}
	for k, w := range []int{1, 2, 4, 8} {
		bits := uint(8 * w)
		if w == 8 || (i >= -(1<<(bits-1)) && i < 1<<(bits-1)) {
			out[fmt.Sprintf("int%d", bits)] = be([]byte{0xd0 + byte(k)}, w, uint64(i))
		}
	}
	return out
}

// intRows encodes every value in every form that can hold it; only the
// encoding the Append functions produce may be accepted.
func intRows(t *testing.T) []canonRow {
	var rows []canonRow
	add := func(label string, canonical []byte, forms map[string][]byte) {
		found := false
		for _, name := range slices.Sorted(mapsKeys(forms)) {
			enc := forms[name]
			ok := bytes.Equal(enc, canonical)
			found = found || ok
			rows = append(rows, canonRow{name: label + " as " + name, in: enc, ok: ok})
		}
		if !found {
			t.Fatalf("%s: Append produced %x, which is no candidate form", label, canonical)
		}
	}
	for _, u := range []uint64{0, 1, 127, 128, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, math.MaxInt64, math.MaxUint64} {
		forms := map[string][]byte{}
		for _, f := range uintForms {
			if u <= f.max {
				forms[f.name] = f.encode(u)
			}
		}
		if u <= math.MaxInt64 {
			for name, enc := range signedForms(int64(u)) {
				forms[name] = enc // non-negative values never use the signed forms
			}
		}
		add(fmt.Sprintf("uint %d", u), AppendUint(nil, u), forms)
		if u <= math.MaxInt64 {
			is.New(t).Equal(AppendInt(nil, int64(u)), AppendUint(nil, u))
		}
	}
	for _, i := range []int64{-1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64} {
		add(fmt.Sprintf("int %d", i), AppendInt(nil, i), signedForms(i))
	}
	return rows
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestValidateIntegerBoundaries(t *testing.T) {
	t.Parallel()
	runCanon(t, intRows(t))
}

// lengthRows builds, for each length n, the value in every header form that
// can carry n; only the Append encoding is accepted.
func lengthRows(t *testing.T, kind string, forms []form, lengths []int, body func(n int) []byte, canonical func(n int) []byte) []canonRow {
	var rows []canonRow
	for _, n := range lengths {
		want := canonical(n)
		found := false
		for _, f := range forms {
			if uint64(n) > f.max {
				continue
			}
			enc := append(f.encode(uint64(n)), body(n)...)
			ok := bytes.Equal(enc, want)
			found = found || ok
			rows = append(rows, canonRow{name: fmt.Sprintf("%s %d as %s", kind, n, f.name), in: enc, ok: ok})
		}
		if !found {
			t.Fatalf("%s %d: the Append encoding is no candidate form", kind, n)
		}
	}
	return rows
}

// sortedKeys returns n distinct keys that sort bytewise in index order.
func sortedKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%05x", i)
	}
	return keys
}

func TestValidateLengthBoundaries(t *testing.T) {
	t.Parallel()
	str := func(n int) []byte { return bytes.Repeat([]byte{'x'}, n) }
	zeros := func(n int) []byte { return make([]byte, n) }
	entries := func(n int) []byte {
		var b []byte
		for _, k := range sortedKeys(n) {
			b = append(AppendStr(b, k), 0)
		}
		return b
	}
	var rows []canonRow
	rows = append(rows, lengthRows(t, "str", strForms, []int{0, 31, 32, 255, 256, 65535, 65536}, str,
		func(n int) []byte { return AppendStr(nil, string(str(n))) })...)
	rows = append(rows, lengthRows(t, "bin", binForms, []int{0, 255, 256, 65535, 65536}, zeros,
		func(n int) []byte { return AppendBin(nil, zeros(n)) })...)
	rows = append(rows, lengthRows(t, "array", arrayForms, []int{0, 15, 16, 65535, 65536}, zeros,
		func(n int) []byte { return append(AppendArrayHeader(nil, n), zeros(n)...) })...)
	rows = append(rows, lengthRows(t, "map", mapForms, []int{0, 15, 16, 65535, 65536}, entries,
		func(n int) []byte { return append(AppendMapHeader(nil, n), entries(n)...) })...)
	// A key is a str too: its header must be the shortest.
	rows = append(rows,
		canonRow{name: "key as fixstr", in: mustHex("81 a1 61 01"), ok: true},
		canonRow{name: "key as str8", in: mustHex("81 d9 01 61 01")},
		canonRow{name: "key as str16", in: mustHex("81 da 0001 61 01")},
		canonRow{name: "key of 32 bytes as str8", in: append(append([]byte{0x81, 0xd9, 32}, str(32)...), 1), ok: true},
		canonRow{name: "key of 32 bytes as str16", in: append(append([]byte{0x81, 0xda, 0, 32}, str(32)...), 1)},
	)
	runCanon(t, rows)
}

func TestValidateRejectedTypes(t *testing.T) {
	t.Parallel()
	runCanon(t, []canonRow{
		{name: "nil", in: mustHex("c0")},
		{name: "nil as a map value", in: mustHex("81 a1 61 c0")},
		{name: "float32", in: mustHex("ca 3f800000")},
		{name: "float64", in: mustHex("cb 3ff0000000000000")},
		{name: "float64 in an array", in: mustHex("91 cb 0000000000000000")},
		{name: "fixext1", in: mustHex("d4 01 00")},
		{name: "fixext2", in: mustHex("d5 01 0000")},
		{name: "fixext4", in: mustHex("d6 ff 00000000")}, // timestamp32
		{name: "fixext8", in: mustHex("d7 ff 0000000000000000")},
		{name: "fixext16", in: mustHex("d8 01 00000000000000000000000000000000")},
		{name: "ext8", in: mustHex("c7 01 01 00")},
		{name: "ext16", in: mustHex("c8 0001 01 00")},
		{name: "ext32", in: mustHex("c9 00000001 01 00")},
		{name: "ext8 timestamp96", in: mustHex("c7 0c ff 000000000000000000000000")},
		{name: "never-used byte c1", in: mustHex("c1")},
		{name: "true", in: mustHex("c3"), ok: true},
		{name: "false", in: mustHex("c2"), ok: true},
	})
}

func TestValidateUTF8(t *testing.T) {
	t.Parallel()
	bad := map[string]string{
		"0xff":                 "ff",
		"overlong NUL":         "c080",
		"overlong slash":       "e080af",
		"UTF-16 surrogate":     "eda080",
		"truncated sequence":   "e282",
		"above U+10FFFF":       "f4908080",
		"continuation alone":   "80",
		"valid then 0xfe":      "61fe",
		"truncated at the end": "61e2",
	}
	good := map[string]string{"empty": "", "ascii": "61", "e-acute": "c3a9", "euro": "e282ac", "G clef": "f09d849e", "NUL": "00"}
	var rows []canonRow
	for name, h := range bad {
		s := string(mustHex(h))
		rows = append(rows,
			canonRow{name: "str " + name, in: AppendStr(nil, s)},
			canonRow{name: "key " + name, in: AppendUint(AppendStr(AppendMapHeader(nil, 1), s), 1)},
			canonRow{name: "str8 " + name, in: append([]byte{0xd9, byte(32 + len(s))}, strings.Repeat("a", 32)+s...)},
		)
	}
	for name, h := range good {
		s := string(mustHex(h))
		rows = append(rows,
			canonRow{name: "str " + name, in: AppendStr(nil, s), ok: true},
			canonRow{name: "key " + name, in: AppendUint(AppendStr(AppendMapHeader(nil, 1), s), 1), ok: true},
		)
	}
	runCanon(t, rows)
}

// m builds a canonical map from alternating keys and encoded values, in the
// order given (so tests can build unsorted maps too).
func m(kv ...any) []byte {
	b := AppendMapHeader(nil, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		b = AppendStr(b, kv[i].(string))
		switch v := kv[i+1].(type) {
		case int:
			b = AppendInt(b, int64(v))
		case int64:
			b = AppendInt(b, v)
		case string:
			b = AppendStr(b, v)
		case []byte:
			b = append(b, v...)
		default:
			panic(fmt.Sprintf("m: unsupported %T", v))
		}
	}
	return b
}

// arr builds an array of already-encoded values.
func arr(vs ...[]byte) []byte {
	b := AppendArrayHeader(nil, len(vs))
	for _, v := range vs {
		b = append(b, v...)
	}
	return b
}

func TestValidateKeys(t *testing.T) {
	t.Parallel()
	depth3 := func(inner []byte) []byte { return m("a", m("b", inner)) }
	runCanon(t, []canonRow{
		{name: "int key", in: mustHex("81 01 01")},
		{name: "negative int key", in: mustHex("81 ff 01")},
		{name: "bin key", in: mustHex("81 c4 01 61 01")},
		{name: "bool key", in: mustHex("81 c3 01")},
		{name: "array key", in: mustHex("81 90 01")},
		{name: "map key", in: mustHex("81 80 01")},
		{name: "non-string key after a good one", in: mustHex("82 a1 61 01 02 01")},
		{name: "sorted at depth 3", in: depth3(m("c", 1, "d", 2)), ok: true},
		{name: "duplicate at depth 3", in: depth3(m("c", 1, "c", 2))},
		{name: "duplicate at depth 3, same value", in: depth3(m("c", 1, "c", 1))},
		{name: "unsorted at depth 3", in: depth3(m("d", 1, "c", 2))},
		{name: "unsorted at depth 3, in arrays", in: arr(arr(m("d", 1, "c", 2)))},
		{name: "duplicate at depth 3, in arrays", in: arr(arr(m("c", 1, "c", 2)))},
		{name: "duplicate at the top", in: m("a", 1, "a", 2)},
		{name: "duplicate after others", in: m("a", 1, "b", 1, "c", 1, "c", 1)},
		{name: "bytewise, not length-first", in: m("aa", 1, "b", 2), ok: true},
		{name: "length-first order is unsorted", in: m("b", 1, "aa", 2)},
		{name: "prefix sorts first", in: m("a", 1, "ab", 2), ok: true},
		{name: "prefix after its extension", in: m("ab", 1, "a", 2)},
		{name: "upper case before lower", in: m("B", 1, "a", 2), ok: true},
		{name: "lower case before upper", in: m("a", 1, "B", 2)},
		{name: "empty key first", in: m("", 1, "a", 2), ok: true},
		{name: "empty key after another", in: m("a", 1, "", 2)},
		{name: "ascii before multi-byte", in: m("z", 1, "é", 2), ok: true},
		{name: "multi-byte before ascii", in: m("é", 1, "z", 2)},
		{name: "sibling maps are ordered separately", in: m("a", m("z", 1), "b", m("a", 1)), ok: true},
		{name: "value map keys do not affect the parent", in: m("b", m("a", 1), "c", 1), ok: true},
	})
}

// nest wraps inner in n arrays (or maps keyed "a").
func nest(n int, asMap bool, inner []byte) []byte {
	b := inner
	for range n {
		if asMap {
			b = m("a", b)
		} else {
			b = arr(b)
		}
	}
	return b
}

func TestValidateCaps(t *testing.T) {
	t.Parallel()
	three := Limits{MaxDepth: 3}
	five := Limits{MaxElements: 5}
	def := DefaultLimits.MaxDepth
	runCanon(t, []canonRow{
		// Depth counts values: the top level is 1, a value inside n
		// containers is at depth n+1 (so a scalar adds a level).
		{name: "3 nested empty arrays, MaxDepth 3", in: nest(2, false, []byte{0x90}), lim: three, ok: true},
		{name: "2 arrays around a scalar, MaxDepth 3", in: nest(2, false, []byte{1}), lim: three, ok: true},
		{name: "3 arrays around a scalar, MaxDepth 3", in: nest(3, false, []byte{1}), lim: three},
		{name: "4 nested empty arrays, MaxDepth 3", in: nest(3, false, []byte{0x90}), lim: three},
		{name: "2 maps around a scalar, MaxDepth 3", in: nest(2, true, []byte{1}), lim: three, ok: true},
		{name: "3 maps around a scalar, MaxDepth 3", in: nest(3, true, []byte{1}), lim: three},
		{name: "default depth reached", in: nest(def-1, false, []byte{0x90}), ok: true},
		{name: "default depth exceeded", in: nest(def, false, []byte{0x90})},
		{name: "default depth exceeded with maps", in: nest(def, true, []byte{0x80})},
		{name: "deep bomb of 10000 arrays", in: bytes.Repeat([]byte{0x91}, 10000)},
		{name: "5 values, MaxElements 5", in: arr([]byte{1}, []byte{2}, []byte{3}, []byte{4}), lim: five, ok: true},
		{name: "6 values, MaxElements 5", in: arr([]byte{1}, []byte{2}, []byte{3}, []byte{4}, []byte{5}), lim: five},
		{name: "map: header, 2 keys, 2 values, MaxElements 5", in: m("a", 1, "b", 2), lim: five, ok: true},
		{name: "map: keys count, MaxElements 5", in: m("a", 1, "b", 2, "c", 3), lim: five},
		{name: "map: nested values count, MaxElements 5", in: m("a", arr([]byte{1}), "b", 2), lim: five},
	})
}

// bombs are short payloads whose headers claim far more than they hold.
var bombs = map[string][]byte{
	"array32 bomb":                mustHex("dd ffffffff"),
	"map32 bomb":                  mustHex("df ffffffff"),
	"str32 bomb":                  mustHex("db ffffffff"),
	"bin32 bomb":                  mustHex("c6 ffffffff"),
	"array16 bomb":                mustHex("dc ffff"),
	"map16 bomb":                  mustHex("de ffff"),
	"str16 bomb":                  mustHex("da ffff"),
	"bin16 bomb":                  mustHex("c5 ffff"),
	"array32 bomb in a body":      m("body", mustHex("dd ffffffff")),
	"map32 bomb with a few bytes": mustHex("df 00010000 a161 01"),
	"array of 16 claims in 16 B":  mustHex("dc 0010 01010101010101010101010101010101"),
}

func TestValidateMalformedShape(t *testing.T) {
	t.Parallel()
	rows := []canonRow{
		{name: "empty input", in: nil},
		{name: "trailing byte", in: mustHex("01 01")},
		{name: "trailing byte after a map", in: append(m("a", 1), 0)},
		{name: "uint16 cut short", in: mustHex("cd 01")},
		{name: "str cut short", in: mustHex("a3 6162")},
		{name: "array cut short", in: mustHex("92 01")},
		{name: "map missing its value", in: mustHex("81 a161")},
		{name: "array of 16 in 16 bytes", in: append(mustHex("dc 0010"), make([]byte, 16)...), ok: true},
	}
	for name, b := range bombs {
		rows = append(rows, canonRow{name: name, in: b, ok: name == "array of 16 claims in 16 B"})
	}
	runCanon(t, rows)
}

// TestValidateAllocations: Validate allocates nothing when it accepts, and
// rejects a bomb without allocating more than its error value. Not parallel:
// it reads process-wide allocation counters.
func TestValidateAllocations(t *testing.T) {
	is := is.New(t)
	req := AppendRequest(nil, &Request{ID: make([]byte, 16), Op: "lease.stage", Deadline: 1764400000000, Idem: "k", Corr: "c", Body: m("a", 1, "b", arr([]byte{1}, AppendStr(nil, "x")))})
	for _, p := range [][]byte{req, mustHex("c3"), m("a", m("b", m("c", 1)))} {
		is.Equal(testing.AllocsPerRun(100, func() { _ = Validate(p, Limits{}) }), 0.0) // accepting allocates nothing
	}
	for _, name := range slices.Sorted(mapsKeys(bombs)) {
		b := bombs[name]
		if name == "array of 16 claims in 16 B" {
			continue
		}
		allocs := testing.AllocsPerRun(100, func() { _ = Validate(b, Limits{}) })
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 100 {
			_ = Validate(b, Limits{})
		}
		runtime.ReadMemStats(&after)
		perRun := (after.TotalAlloc - before.TotalAlloc) / 100
		t.Logf("%s: %.0f allocs, %d bytes per rejection (the error value)", name, allocs, perRun)
		is.True(allocs <= 4)    // the *Error and its message, nothing sized by the header
		is.True(perRun < 1<<10) // far below any claimed length
	}
}

// randValue appends a random canonical value built only with the Append
// functions, reaching every header-size boundary.
func randValue(r *rand.Rand, b []byte, depth int) []byte {
	lengths := []int{0, 1, 15, 16, 31, 32, 255, 256, 300}
	kind := r.IntN(9)
	if depth >= 4 && kind >= 7 {
		kind = r.IntN(7)
	}
	switch kind {
	case 0:
		return AppendUint(b, r.Uint64()>>r.IntN(64))
	case 1:
		return AppendInt(b, -int64(r.Uint64()>>r.IntN(64)>>1)-1)
	case 2:
		return AppendInt(b, r.Int64()>>r.IntN(64))
	case 3:
		return AppendBool(b, r.IntN(2) == 0)
	case 4:
		return AppendStr(b, randText(r, lengths[r.IntN(len(lengths))]))
	case 5:
		p := make([]byte, lengths[r.IntN(len(lengths))])
		for i := range p {
			p[i] = byte(r.IntN(256))
		}
		return AppendBin(b, p)
	case 6:
		return AppendBin(b, nil)
	case 7:
		n := []int{0, 1, 3, 15, 16, 17}[r.IntN(6)]
		b = AppendArrayHeader(b, n)
		for range n {
			b = randValue(r, b, depth+1)
		}
		return b
	default:
		n := []int{0, 1, 3, 15, 16, 17}[r.IntN(6)]
		set := map[string]bool{}
		for len(set) < n {
			set[randText(r, r.IntN(6))] = true
		}
		keys := slices.Sorted(mapsKeys(set)) // Go string order is bytewise
		b = AppendMapHeader(b, n)
		for _, k := range keys {
			b = randValue(r, AppendStr(b, k), depth+1)
		}
		return b
	}
}

func randText(r *rand.Rand, n int) string {
	runes := []rune{'a', 'Z', '0', '.', 0, 0x7f, 'é', '€', '𝄞', 0xfffd, 0x10ffff}
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteRune(runes[r.IntN(len(runes))])
	}
	return sb.String()
}

func TestValidateRandomCanonicalValues(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		b := randValue(r, nil, 1)
		if err := Validate(b, Limits{}); err != nil {
			t.Fatalf("value %d (%x): %v", i, b, err)
		}
		// The cursor's skip agrees with the validator on where the value ends.
		c := cursor{b: b}
		is.Equal(len(c.skip()), len(b))
		// And the msgpack library re-encodes it to the same bytes.
		var v any
		is.NoErr(decodeAny(b, &v))
		again, err := Marshal(v)
		is.NoErr(err)
		is.Equal(hex.EncodeToString(again), hex.EncodeToString(b))
	}
}

func decodeAny(b []byte, v *any) error {
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	return dec.Decode(v)
}
