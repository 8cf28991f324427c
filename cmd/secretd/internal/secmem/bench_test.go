package secmem

import "testing"

func BenchmarkCopyFree(b *testing.B) {
	a := New(nil)
	v := make([]byte, 48)
	for b.Loop() {
		buf, err := a.Copy(v)
		if err != nil {
			b.Fatal(err)
		}
		buf.Free()
	}
}
