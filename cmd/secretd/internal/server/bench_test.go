package server

import (
	"testing"

	"hostkit.dev/lib/api/secretdapi"
)

// BenchmarkStageConsume measures one stage+consume pair over a real
// socket against an in-process server (audit to memory).
func BenchmarkStageConsume(b *testing.B) {
	h := start(b, allRoles())
	h.put(b, "bench", []string{"https://api.example.com"})
	b.ReportAllocs()
	for b.Loop() {
		st, err := h.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "bench", Invocation: "inv"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.api.LeaseConsume(ctx, "inv", [][]byte{st.Handle}); err != nil {
			b.Fatal(err)
		}
	}
}
