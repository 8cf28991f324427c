package codec

import (
	"bytes"
	"strconv"
	"testing"
)

// list100 builds a runc list document of 100 entries from the fixture's
// first entry.
func list100(b *testing.B) []byte {
	l := fixture(b, "runc-1.1", "list.json")
	i := bytes.IndexByte(l, '{')
	j := bytes.Index(l, []byte(`"owner":"root"}`)) + len(`"owner":"root"}`)
	entry := l[i:j]
	var out bytes.Buffer
	out.WriteByte('[')
	for k := 0; k < 100; k++ {
		if k > 0 {
			out.WriteByte(',')
		}
		out.Write(bytes.Replace(entry, []byte(`"id":"created"`), []byte(`"id":"c`+strconv.Itoa(k)+`"`), 1))
	}
	out.WriteString("]\n")
	return out.Bytes()
}

func BenchmarkRunc11List100(b *testing.B) {
	doc := list100(b)
	if l, err := (runc11{}).List(doc); err != nil || len(l) != 100 {
		b.Fatal(len(l), err)
	}
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		_, _ = runc11{}.List(doc)
	}
}

func BenchmarkCrun18StoredAnnotations(b *testing.B) {
	doc := fixture(b, "crun-1.8", "stored-config.json")
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		_, _ = crun18{}.StoredAnnotations(doc)
	}
}

// BenchmarkRunc11StoredState decodes one runc state.json (~6 KB), what
// runtime.observe reads per container.
func BenchmarkRunc11StoredState(b *testing.B) {
	doc := fixture(b, "runc-1.1", "stored-state.json")
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := (runc11{}).StoredState(doc); err != nil {
			b.Fatal(err)
		}
	}
}
