package holder

import (
	"testing"
	"time"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
)

func TestBackoffDoublesCapsAndStops(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	b := newBackoff(9)
	var got []time.Duration
	for {
		d, ok := b.next(time.Millisecond)
		if !ok {
			break
		}
		got = append(got, d)
	}
	s := time.Second
	is.Equal(got, []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 60 * s, 60 * s, 60 * s})
	d, ok := b.next(restartStable) // a stable run resets the count
	is.True(ok)
	is.Equal(d, s)
	is.Equal(newBackoff(0).max, api.DefaultMaxRestarts)
}

func TestFailed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		e    *api.ExitStatus
		want bool
	}{
		{"success", &api.ExitStatus{}, false},
		{"code", &api.ExitStatus{Code: 3}, true},
		{"signal", &api.ExitStatus{Signal: "SIGKILL"}, true},
		{"unknown", &api.ExitStatus{Unknown: true}, true},
		{"nil", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) { is.New(t).Equal(failed(tc.e), tc.want) })
	}
}
