package codec

import (
	"bytes"
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestRunc11StoredState(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	b := fixture(t, "runc-1.1", "stored-state.json")
	s, err := runc11{}.StoredState(b)
	is.NoErr(err)
	is.Equal(s.ID, "created")
	is.True(s.InitPid > 0)
	is.True(s.InitStart > 0)
	is.Equal(s.Bundle, "/tmp/hkx/B2")
	is.Equal(s.Annotations, map[string]string{"dev.hostkit.project": "p-created", "dev.hostkit.fence": "7"})
	is.True(strings.HasPrefix(s.CgroupPaths["freezer"], "/sys/fs/cgroup/"))
	is.True(!s.Created.IsZero())

	_, err = crun18{}.StoredState(b)
	wantCode(t, err, CodeIncompatible)

	replace := func(old, new string) []byte {
		if !bytes.Contains(b, []byte(old)) {
			t.Fatalf("fixture lacks %q", old)
		}
		return bytes.Replace(b, []byte(old), []byte(new), 1)
	}
	for _, tt := range []struct {
		name string
		doc  []byte
	}{
		{"unknown top-level key", replace(`"id":`, `"extra":1,"id":`)},
		{"duplicate key", replace(`"id":`, `"id":"x","id":`)},
		{"duplicate key in the tolerated config", replace(`"labels":`, `"labels":[],"labels":`)},
		{"wrong type", replace(`"rootless":false`, `"rootless":"no"`)},
		{"labels not strings", replace(`"labels":[`, `"labels":[1,`)},
		{"no config", replace(`"config":`, `"konfig":`)},
		{"negative pid", replace(`"init_process_pid":`, `"init_process_pid":-`)},
		{"truncated", b[:len(b)/2]},
		{"trailing data", append(append([]byte{}, b...), []byte(`{}`)...)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runc11{}.StoredState(tt.doc)
			wantCode(t, err, CodeDecode)
		})
	}

	// A label without "=" is skipped; "bundle" is the bundle, as runc's
	// utils.Annotations splits them; null labels are none.
	s, err = runc11{}.StoredState(replace(`"labels":[`, `"labels":["plain","k=v=w",`))
	is.NoErr(err)
	is.Equal(s.Annotations["k"], "v=w")
	_, has := s.Annotations["plain"]
	is.True(!has)
	i := bytes.Index(b, []byte(`"labels":[`))
	j := bytes.IndexByte(b[i:], ']')
	s, err = runc11{}.StoredState(append(append(append([]byte{}, b[:i]...), []byte(`"labels":null`)...), b[i+j+1:]...))
	is.NoErr(err)
	is.Equal(s.Bundle, "")
	is.True(s.Annotations == nil)
}

func FuzzRunc11StoredState(f *testing.F) {
	seedFixtures(f, "runc-1.1")
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := runc11{}.StoredState(b)
		checkErr(t, err, CodeDecode)
		if err != nil {
			return
		}
		checkAccepted(t, b)
		if s.ID == "" || s.InitPid < 0 || s.InitPid > maxPid {
			t.Fatalf("invalid stored state %+v", s)
		}
	})
}
