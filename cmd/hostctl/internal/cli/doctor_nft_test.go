package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestDoctorNamesMissingNftables: a supervisord whose start-up probe
// found no nftables is named with network.nftables_unavailable, in the
// notes and as a warning; an available one gets no warning. The
// unavailable side is a health answer made up here: this kernel has
// nftables, so a real supervisord cannot be made to miss it
// (TestDoctorAgainstRealDaemons checks the real answer).
func TestDoctorNamesMissingNftables(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		row      doctorRow
		note     string
		warnings int
	}{
		{"unavailable", doctorRow{Daemon: "supervisord", Reachable: true, Nftables: "unavailable", NftablesCode: "network.nftables_unavailable",
			NftablesError: "network.nftables_unavailable: netlink: operation not supported"},
			"supervisord nftables for isolated instances: unavailable (network.nftables_unavailable)", 1},
		{"available", doctorRow{Daemon: "supervisord", Reachable: true, Nftables: "available"},
			"supervisord nftables for isolated instances: available\n", 0},
		{"no namespace to probe in", doctorRow{Daemon: "supervisord", Reachable: true, Nftables: "unknown", NftablesCode: "runtime.unavailable"},
			"supervisord nftables for isolated instances: unknown (runtime.unavailable)", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			w := nftWarnings([]doctorRow{tt.row})
			is.Equal(len(w), tt.warnings)
			for _, s := range w {
				is.True(strings.Contains(s, "network.nftables_unavailable: isolated instances cannot start"))
			}
			var out bytes.Buffer
			g := &globals{stdout: &out}
			is.NoErr(g.printDoctor([]doctorRow{tt.row}, w))
			is.True(strings.Contains(out.String(), tt.note))
		})
	}
}
