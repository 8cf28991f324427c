package harness

import (
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestParseVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, runtime, out, version, codec string
	}{
		{name: "runc", runtime: "runc", out: "runc version 1.1.5\ncommit: v1.1.5\nspec: 1.0.2-dev\ngo: go1.19\nlibseccomp: 2.5.4\n", version: "1.1.5", codec: "runc-1.1"},
		{name: "crun", runtime: "crun", out: "crun version 1.8.1\ncommit: f8a096b\nrundir: /run/crun\n", version: "1.8.1", codec: "crun-1.8"},
		{name: "suffix", runtime: "runc", out: "runc version 1.1.12+dfsg\n", version: "1.1.12", codec: "runc-1.1"},
		{name: "other runtime", runtime: "runc", out: "crun version 1.8.1\n"},
		{name: "garbage", runtime: "runc", out: "hello\n"},
		{name: "empty", runtime: "crun", out: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			v, c, err := ParseVersion(tt.runtime, []byte(tt.out))
			if tt.version == "" {
				is.True(err != nil)
				return
			}
			is.NoErr(err)
			is.Equal(v, tt.version)
			is.Equal(c, tt.codec)
		})
	}
}

// The wrapper adds exactly the provider's global flags, and for a wrapped
// provider the provider's private-mount-namespace argv for every verb but
// state and list.
func TestWrapper(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	p := &Provider{Name: "runc", Path: "/usr/sbin/runc", Sh: "/bin/sh"}
	w, err := p.Wrapper("/tmp/hkc1/runc/00/root", "/tmp/hkc1/runc/00/runtime.log")
	is.NoErr(err)
	is.Equal(w, "#!/bin/sh\n# hostkit conformance RUNTIME wrapper (generated; see conformance/README.md)\n"+
		"exec '/usr/sbin/runc' --root '/tmp/hkc1/runc/00/root' --log '/tmp/hkc1/runc/00/runtime.log' --log-format json \"$@\"\n")

	c := &Provider{Name: "crun", Path: "/usr/bin/crun", Sh: "/bin/sh", Wrapped: true, Unshare: "/usr/bin/unshare",
		Umount: "/usr/bin/umount", V2: "/sys/fs/cgroup/unified"}
	w, err = c.Wrapper("/tmp/r", "/tmp/l")
	is.NoErr(err)
	rt := "'/usr/bin/crun' --root '/tmp/r' --log '/tmp/l' --log-format json"
	is.True(strings.Contains(w, "state|list) exec "+rt+" \"$@\" ;;\n"))
	is.True(strings.Contains(w, "exec '/usr/bin/unshare' --mount --propagation private -- '/bin/sh' -c '\"$1\" \"$2\" || exit 125; shift 2; exec \"$@\"' hk-nocgroupv2 '/usr/bin/umount' '/sys/fs/cgroup/unified' "+rt+" \"$@\"\n"))

	_, err = p.Wrapper("/tmp/it's", "/tmp/l")
	is.True(err != nil) // never quoted into the script
}
