package codec

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

// fixture reads testdata/<line>/<name>: real output of the installed
// runtime, captured by the provider's TestCaptureFixtures.
func fixture(t testing.TB, line, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", line, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// codecs are the two version lines under test.
var codecs = map[string]Codec{"runc-1.1": runc11{}, "crun-1.8": crun18{}}

// wantCode fails unless err carries code.
func wantCode(t testing.TB, err error, code string) {
	t.Helper()
	if !wire.HasCode(err, code) {
		t.Fatalf("got %v, want %s", err, code)
	}
}

func TestFixtures(t *testing.T) {
	t.Parallel()
	for line, c := range codecs {
		t.Run(line, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			ann := func(id string) map[string]string {
				return map[string]string{"dev.hostkit.project": "p-" + id, "dev.hostkit.fence": "7"}
			}

			v, err := ParseVersion(c.Runtime(), fixture(t, line, "version.txt"))
			is.NoErr(err)
			got, err := ForVersion(c.Runtime(), v)
			is.NoErr(err)
			is.Equal(got.Line(), line)

			st, err := c.State(fixture(t, line, "state-created.json"))
			is.NoErr(err)
			is.Equal(st.ID, "created")
			is.Equal(st.Status, "created")
			is.True(st.Pid > 0)
			is.True(filepath.IsAbs(st.Bundle))
			is.True(st.Created.After(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)))
			is.Equal(st.Annotations, ann("created"))

			st, err = c.State(fixture(t, line, "state-running-noannotations.json"))
			is.NoErr(err)
			is.Equal(st.Status, "running")
			is.True(st.Pid > 0)
			is.Equal(st.Annotations, nil)

			st, err = c.State(fixture(t, line, "state-stopped.json"))
			is.NoErr(err)
			is.Equal(st.Status, "stopped")
			is.Equal(st.Pid, 0)
			is.Equal(st.Annotations, ann("stopped"))

			list, err := c.List(fixture(t, line, "list-empty.json"))
			is.NoErr(err)
			is.True(list != nil)
			is.Equal(len(list), 0)

			list, err = c.List(fixture(t, line, "list.json"))
			is.NoErr(err)
			is.Equal(len(list), 3)
			byID := map[string]State{}
			for _, s := range list {
				byID[s.ID] = s
			}
			is.Equal(byID["created"].Status, "created")
			is.Equal(byID["running"].Status, "running")
			is.Equal(byID["stopped"].Status, "stopped")
			if c.Features().ListAnnotations {
				is.Equal(byID["created"].Annotations, ann("created"))
			} else {
				is.Equal(byID["created"].Annotations, nil) // crun's list never carries them
			}

			pids, err := c.Ps(fixture(t, line, "ps.json"))
			is.NoErr(err)
			is.Equal(len(pids), 1)
			is.True(pids[0] > 0)

			if f := c.Features().StoredConfig; f != "" {
				a, err := c.StoredAnnotations(fixture(t, line, "stored-config.json"))
				is.NoErr(err)
				is.Equal(a, ann("created")) // the same as `state` prints
			} else {
				_, err := c.StoredAnnotations([]byte(`{}`))
				wantCode(t, err, CodeIncompatible)
			}

			if c.Features().Events {
				s, err := c.Events(fixture(t, line, "events-stats.json"))
				is.NoErr(err)
				is.Equal(s.ID, "running")
				is.True(s.CPUTotalNS > 0)
				is.True(s.MemoryBytes > 0)
				is.True(s.Pids >= 1)
				pids, err := c.Ps(fixture(t, line, "ps-stopped.json"))
				is.NoErr(err)
				is.True(pids != nil)
				is.Equal(len(pids), 0)
			} else {
				_, err := c.Events([]byte(`{}`))
				wantCode(t, err, CodeIncompatible)
			}
		})
	}
}

// Each codec accepts only its own runtime's empty shapes: runc prints null
// for an empty list (and for ps of a stopped container), crun [].
func TestEmptyShapes(t *testing.T) {
	t.Parallel()
	runcEmpty := fixture(t, "runc-1.1", "list-empty.json")
	crunEmpty := fixture(t, "crun-1.8", "list-empty.json")
	cases := []struct {
		name string
		c    Codec
		list bool // List, else Ps
		in   []byte
		ok   bool
	}{
		{"runc list null", runc11{}, true, runcEmpty, true},
		{"runc list []", runc11{}, true, crunEmpty, false},
		{"runc list [] compact", runc11{}, true, []byte("[]"), false},
		{"crun list []", crun18{}, true, crunEmpty, true},
		{"crun list [] compact", crun18{}, true, []byte("[]"), true},
		{"crun list null", crun18{}, true, runcEmpty, false},
		{"runc ps null", runc11{}, false, []byte("null\n"), true},
		{"runc ps []", runc11{}, false, []byte("[]\n"), false},
		{"crun ps []", crun18{}, false, []byte("[\n]\n"), true},
		{"crun ps null", crun18{}, false, []byte("null\n"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			var err error
			var n int
			if tc.list {
				var l []State
				l, err = tc.c.List(tc.in)
				n = len(l)
				if err == nil {
					is.True(l != nil)
				}
			} else {
				var p []int
				p, err = tc.c.Ps(tc.in)
				n = len(p)
				if err == nil {
					is.True(p != nil)
				}
			}
			if tc.ok {
				is.NoErr(err)
				is.Equal(n, 0)
			} else {
				wantCode(t, err, CodeDecode)
			}
		})
	}
}
