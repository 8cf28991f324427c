package proc

import "testing"

// BenchmarkDescendants measures one parent-pid scan of /proc, which reads
// the stat of every process on the host (FreezeKill and WaitNone repeat
// it).
func BenchmarkDescendants(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Descendants(1)
	}
}
