package tmux

import (
	"strconv"
	"testing"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
)

func TestParsePane(t *testing.T) {
	t.Parallel()
	sig := func(n int) string { return "SIG" + strconv.Itoa(n) }
	for _, tc := range []struct {
		name, out string
		ok        bool
		dead      bool
		exit      *api.ExitStatus
	}{
		{"running", "41 40 0||\n", true, false, nil},
		{"exit code", "41 40 1|3|\n", true, true, &api.ExitStatus{Code: 3}},
		{"signal", "41 40 1||9\n", true, true, &api.ExitStatus{Signal: "SIG9"}},
		{"dead, status not yet known", "41 40 1||\n", true, true, nil},
		{"garbage", "no server running on /x\n", false, false, nil},
		{"bad pid", "x 40 0||", false, false, nil},
		{"empty", "", false, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			p, err := ParsePane(tc.out, sig)
			is.Equal(err == nil, tc.ok)
			if !tc.ok {
				return
			}
			is.Equal(p.PID, 41)
			is.Equal(p.ServerPID, 40)
			is.Equal(p.Dead, tc.dead)
			is.Equal(p.Exit, tc.exit)
		})
	}
}

func TestStartArgsKeepsAgentArgvOut(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a := StartArgs("/run/h/x.tmux", 24, 80, "/s/it's.fifo", []string{"/usr/bin/supervisord", "agent-exec", "-dir", "/s/d"})
	is.Equal(a[len(a)-1], `exec cat >'/s/it'\''s.fifo'`)
	is.Equal(Quote("a'b"), `'a'\''b'`)
}
