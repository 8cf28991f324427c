package procexec

import (
	"context"
	"testing"
)

// BenchmarkRunTrue is the runner's own cost around a program that does
// nothing (/bin/true): checks, output files, fork+exec, wait, group
// cleanup, reading the output back.
func BenchmarkRunTrue(b *testing.B) {
	p, err := NewPolicy([]Rule{{Executable: "/bin/true", Class: ClassReadOnly}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	r, err := NewRunner(Config{Policy: p})
	if err != nil {
		b.Fatal(err)
	}
	spec := &CommandSpec{Executable: "/bin/true", Class: ClassReadOnly, Purpose: "benchmark"}
	for b.Loop() {
		if _, err := r.Run(context.Background(), spec); err != nil {
			b.Fatal(err)
		}
	}
}
