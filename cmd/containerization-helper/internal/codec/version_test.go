package codec

import (
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestParseVersion(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, runtime, out, want string
	}{
		{"runc debian", "runc", "runc version 1.1.5+ds1\ncommit: 1.1.5+ds1-1+deb12u1\nspec: 1.0.2-dev\n", "1.1.5+ds1"},
		{"runc upstream", "runc", "runc version 1.1.12\ncommit: v1.1.12-0-g51d5e946\n", "1.1.12"},
		{"crun", "crun", "crun version 1.8.1\ncommit: f8a0\nrundir: /run/crun\n+SYSTEMD\n", "1.8.1"},
		{"no newline", "crun", "crun version 1.8.1", "1.8.1"},
		{"wrong runtime", "runc", "crun version 1.8.1\n", ""},
		{"prefix junk", "runc", " runc version 1.1.5\n", ""},
		{"trailing space", "runc", "runc version 1.1.5 \n", ""},
		{"pre-release", "runc", "runc version 1.2.0-rc.1\n", ""},
		{"debian pre-release", "runc", "runc version 1.1.0~rc1\n", ""},
		{"two parts", "runc", "runc version 1.1\n", ""},
		{"four parts", "runc", "runc version 1.1.5.1\n", ""},
		{"leading zero", "runc", "runc version 1.01.5\n", ""},
		{"empty build", "runc", "runc version 1.1.5+\n", ""},
		{"bad build", "runc", "runc version 1.1.5+a b\n", ""},
		{"empty", "runc", "", ""},
		{"unknown runtime name", "podman", "podman version 4.3.1\n", "4.3.1"}, // parses; ForVersion refuses
		{"oversize", "runc", "runc version 1.1.5\n" + strings.Repeat("x", MaxVersion), ""},
		{"invalid UTF-8", "runc", "runc version 1.1.5\n\xff", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			got, err := ParseVersion(tc.runtime, []byte(tc.out))
			if tc.want == "" {
				wantCode(t, err, CodeDecode)
				return
			}
			is.NoErr(err)
			is.Equal(got, tc.want)
		})
	}
}

func TestForVersion(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, version, line string }{
		{"runc", "1.1.5+ds1", "runc-1.1"},
		{"runc", "1.1.0", "runc-1.1"},
		{"runc", "1.1.14", "runc-1.1"},
		{"crun", "1.8.1", "crun-1.8"},
		{"crun", "1.8.7", "crun-1.8"},
		{"runc", "1.0.3", ""},
		{"runc", "1.2.0", ""},
		{"runc", "2.1.0", ""},
		{"crun", "1.9", ""},
		{"crun", "1.9.0", ""},
		{"crun", "1.7.2", ""},
		{"runc", "1.1.0-rc.1", ""},
		{"runc", "", ""},
		{"crun", "1.8.1\n", ""},
		{"podman", "1.1.5", ""},
		{"", "1.8.1", ""},
		{"Runc", "1.1.5", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name+" "+tc.version, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			c, err := ForVersion(tc.name, tc.version)
			if tc.line == "" {
				wantCode(t, err, CodeIncompatible)
				is.True(c == nil)
				return
			}
			is.NoErr(err)
			is.Equal(c.Line(), tc.line)
			is.Equal(c.Runtime(), tc.name)
		})
	}
}

func TestRuntimeError(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 300)
	cases := []struct{ name, log, want string }{
		{"runc", `{"level":"error","msg":"container does not exist","time":"2026-11-29T12:23:27Z"}` + "\n", "container does not exist"},
		{"crun", `{"msg":"container ` + "`c1`" + ` already exists","level":"error","time":"2026-11-29T12:23:47.655698Z"}` + "\n", "container `c1` already exists"},
		{"last error wins", `{"level":"error","msg":"first"}` + "\n" + `{"level":"warning","msg":"warn"}` + "\n" + `{"level":"error","msg":"second"}`, "second"},
		{"info only", `{"level":"info","msg":"hello"}`, ""},
		{"garbage lines skipped", "not json\n{\n" + `{"level":"error","msg":"ok"}` + "\n\x00\xff", "ok"},
		{"control characters", `{"level":"error","msg":"a\nb\u0007c"}`, "a b c"},
		{"empty", "", ""},
		{"long message cut", `{"level":"error","msg":"` + long + `"}`, long[:256] + "..."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is.New(t).Equal(RuntimeError([]byte(tc.log)), tc.want)
		})
	}
	// Only the tail is read: an error before the last MaxLog bytes is gone.
	big := `{"level":"error","msg":"old"}` + "\n" + strings.Repeat(`{"level":"info","msg":"x"}`+"\n", MaxLog/20)
	is.New(t).Equal(RuntimeError([]byte(big)), "")
}
