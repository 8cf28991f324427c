package image

import (
	"testing"

	"github.com/matryer/is"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// patchSpec gives a bundle RLIMIT_FSIZE, no_new_privs and (with a cgroups
// path) a memory limit when its config sets none, and keeps what the
// config sets; sizeTmpfs sizes a /tmp tmpfs that has no size option and
// leaves a sized one, and other mounts, alone.
func TestPatchSpecLimits(t *testing.T) {
	t.Parallel()
	i64 := func(v int64) *int64 { return &v }
	tests := []struct {
		name   string
		spec   specs.Spec
		patch  Patch
		fsize  uint64
		memory *int64 // nil: no memory section expected
	}{
		{"defaults", specs.Spec{Process: &specs.Process{}, Linux: &specs.Linux{}}, Patch{CgroupsPath: "/hostkit/a"},
			DefaultFileSizeLimit, i64(DefaultMemoryLimit)},
		{"patch values", specs.Spec{Process: &specs.Process{}, Linux: &specs.Linux{}},
			Patch{CgroupsPath: "/hostkit/a", FileSizeLimit: 1 << 20, MemoryLimit: 32 << 20}, 1 << 20, i64(32 << 20)},
		{"config's own kept", specs.Spec{
			Process: &specs.Process{Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_FSIZE", Hard: 7, Soft: 5}}},
			Linux:   &specs.Linux{Resources: &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: i64(5 << 20)}}}},
			Patch{CgroupsPath: "/hostkit/a"}, 7, i64(5 << 20)},
		{"no cgroups path: no memory limit", specs.Spec{Process: &specs.Process{}, Linux: &specs.Linux{}}, Patch{},
			DefaultFileSizeLimit, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			spec := tc.spec
			is.NoErr(patchSpec(&spec, tc.patch))
			is.True(spec.Process.NoNewPrivileges)
			var fsize []specs.POSIXRlimit
			for _, r := range spec.Process.Rlimits {
				if r.Type == "RLIMIT_FSIZE" {
					fsize = append(fsize, r)
				}
			}
			is.Equal(len(fsize), 1)
			is.Equal(fsize[0].Hard, tc.fsize)
			if tc.memory == nil {
				is.True(spec.Linux.Resources == nil)
				return
			}
			is.Equal(*spec.Linux.Resources.Memory.Limit, *tc.memory)
		})
	}
	is := is.New(t)
	is.True((&Patch{MemoryLimit: -1}).validate() != nil)
	is.True((&Patch{FileSizeLimit: -1}).validate() != nil)

	ms := []specs.Mount{
		{Destination: "/tmp", Type: "tmpfs", Options: []string{"nosuid"}},
		{Destination: "/tmp/", Type: "tmpfs", Options: []string{"size=1m"}},
		{Destination: "/run", Type: "tmpfs"},
		{Destination: "/tmp", Type: "bind", Options: []string{"rbind"}},
	}
	sizeTmpfs(ms, "/tmp")
	is.Equal(ms[0].Options, []string{"nosuid", tmpSize})
	is.Equal(ms[1].Options, []string{"size=1m"})
	is.Equal(len(ms[2].Options), 0)
	is.Equal(ms[3].Options, []string{"rbind"})
}
