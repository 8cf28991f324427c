package manager

import (
	"testing"

	"github.com/matryer/is"
	"golang.org/x/sys/unix"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

func TestParseSignal(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   string
		want int64 // 0: refused with signal.invalid
	}{
		{"bare name", "TERM", int64(unix.SIGTERM)},
		{"with SIG", "SIGTERM", int64(unix.SIGTERM)},
		{"lower case", "sigterm", int64(unix.SIGTERM)},
		{"mixed case", "Hup", int64(unix.SIGHUP)},
		{"kill", "KILL", int64(unix.SIGKILL)},
		{"user 1", "SIGUSR1", int64(unix.SIGUSR1)},
		{"window change", "winch", int64(unix.SIGWINCH)},
		{"a name beyond the common ones", "SEGV", int64(unix.SIGSEGV)},
		{"number", "9", 9},
		{"lowest number", "1", 1},
		{"highest number", "64", 64},
		{"number with plus", "+15", 15},

		{"empty", "", 0},
		{"prefix alone", "SIG", 0},
		{"prefix twice", "SIGSIGTERM", 0},
		{"unknown name", "FOO", 0},
		{"number after SIG", "SIG9", 0},
		{"zero", "0", 0},
		{"negative", "-9", 0},
		{"above 64", "65", 0},
		{"space", " TERM", 0},
		{"trailing space", "TERM ", 0},
		{"hex", "0x9", 0},
		{"real-time by name", "SIGRTMIN", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			got, err := ParseSignal(tc.in)
			if tc.want == 0 {
				is.Equal(wire.CodeOf(err), api.CodeSignalInvalid)
				return
			}
			is.NoErr(err)
			is.Equal(got, tc.want)
		})
	}
}
