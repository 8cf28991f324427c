package sock

import (
	"context"
	"strings"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

func TestPath(t *testing.T) {
	t.Parallel()
	long := "/tmp/" + strings.Repeat("a", MaxPathLen)
	fits := "/" + strings.Repeat("r", MaxPathLen-len("/s/api.sock")-1) // exactly MaxPathLen
	tests := []struct {
		name, run, daemon, want, code string
	}{
		{name: "ok", run: "/run/hostkit", daemon: "secretd", want: "/run/hostkit/secretd/api.sock"},
		{name: "exactly the limit", run: fits, daemon: "s", want: fits + "/s/api.sock"},
		{name: "one over the limit", run: fits + "x", daemon: "s", code: CodePathTooLong},
		{name: "too long", run: long, daemon: "egressd", code: CodePathTooLong},
		{name: "relative run dir", run: "run/hostkit", daemon: "secretd", code: CodeConfigInvalid},
		{name: "empty name", run: "/run", daemon: "", code: CodeConfigInvalid},
		{name: "name with slash", run: "/run", daemon: "a/b", code: CodeConfigInvalid},
		{name: "dot dot", run: "/run", daemon: "..", code: CodeConfigInvalid},
		{name: "nul", run: "/run", daemon: "a\x00", code: CodeConfigInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			got, err := Path(tc.run, tc.daemon)
			is.Equal(wire.CodeOf(err), tc.code)
			is.Equal(got, tc.want)
			if tc.want != "" {
				is.Equal(len(got) <= MaxPathLen, true)
			}
		})
	}
}

func TestCheckPath(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, path, code string }{
		{name: "holder socket", path: "/run/hostkit/supervisord/h/0123456789abcdef.sock"},
		{name: "relative", path: "api.sock", code: CodeConfigInvalid},
		{name: "abstract", path: "@api", code: CodeConfigInvalid},
		{name: "unclean", path: "/run//x/api.sock", code: CodeConfigInvalid},
		{name: "root", path: "/", code: CodeConfigInvalid},
		{name: "too long", path: "/" + strings.Repeat("x", MaxPathLen), code: CodePathTooLong},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			is.Equal(wire.CodeOf(CheckPath(tc.path)), tc.code)
		})
	}
}

func TestListenInvalidConfig(t *testing.T) {
	t.Parallel()
	root := tmpRoot(t)
	tests := []struct {
		name string
		cfg  Config
		code string
	}{
		{name: "path too long", cfg: Config{Path: root + "/" + strings.Repeat("p", MaxPathLen), Group: -1}, code: CodePathTooLong},
		{name: "relative path", cfg: Config{Path: "d/api.sock", Group: -1}, code: CodeConfigInvalid},
		{name: "dir 0755", cfg: Config{Path: root + "/a/api.sock", DirMode: 0o755, Group: -1}, code: CodeConfigInvalid},
		{name: "socket 0666", cfg: Config{Path: root + "/b/api.sock", SocketMode: 0o666, Group: -1}, code: CodeConfigInvalid},
		{name: "dir 0750 without group", cfg: Config{Path: root + "/c/api.sock", DirMode: 0o750, Group: -1}, code: CodeConfigInvalid},
		{name: "socket 0660 without group", cfg: Config{Path: root + "/d/api.sock", SocketMode: 0o660, Group: -1}, code: CodeConfigInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			l, err := Listen(context.Background(), tc.cfg)
			is.Equal(wire.CodeOf(err), tc.code)
			is.True(l == nil)
		})
	}
}
