package state

import (
	"fmt"
	"testing"
)

// BenchmarkApplyFinish is the write a mutation makes before it answers
// (settled record and idempotency record, one Apply) on a store that
// already holds 300 answers, in the test's temporary directory (so on
// whatever disk that is).
func BenchmarkApplyFinish(b *testing.B) {
	s, err := Open(b.TempDir()+"/helper", Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	result := make([]byte, 300)
	for i := range 300 {
		if err := s.PutIdem(fmt.Sprintf("0:warm-%d", i), "container.create", "h", result); err != nil {
			b.Fatal(err)
		}
	}
	rec := Container{ID: "hk-0123456789abcdef", Instance: inst1, Phase: PhaseRunning}
	i := 0
	for b.Loop() {
		i++
		if _, err := s.Apply(Batch{Put: &rec, Idem: &Idem{Key: fmt.Sprintf("0:k%d", i), Op: "container.start", RequestHash: "h", Result: result}}); err != nil {
			b.Fatal(err)
		}
	}
}
