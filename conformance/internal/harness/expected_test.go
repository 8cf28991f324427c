package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
)

var suite = []string{"create", "delete", "hooks", "start", "state"}

func TestParseExpected(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want Expected
		err  string
	}{
		{name: "ok", in: "# header\n\ndelete  # runc deletes created containers\nhooks # test prints no check\n",
			want: Expected{"delete": "runc deletes created containers", "hooks": "test prints no check"}},
		{name: "empty", in: "", want: Expected{}},
		{name: "no reason", in: "delete\n", err: "line 1: delete has no reason"},
		{name: "empty reason", in: "delete #   \n", err: "no reason"},
		{name: "unknown test", in: "teleport # x\n", err: "line 1: teleport is not a test of the suite"},
		{name: "not a name", in: "Delete Me # x\n", err: "is not a test name"},
		{name: "twice", in: "delete # a\ndelete # b\n", err: "line 2: delete is listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			got, err := ParseExpected([]byte(tt.in), suite)
			if tt.err != "" {
				is.True(err != nil && strings.Contains(err.Error(), tt.err))
				return
			}
			is.NoErr(err)
			is.Equal(got, tt.want)
		})
	}
}

func TestCompare(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	tests := []TestResult{{Name: "create", Passed: true}, {Name: "delete"}, {Name: "hooks"}, {Name: "start", Passed: true}}
	c := Compare(tests, Expected{"delete": "x", "start": "y", "state": "z"})
	is.Equal(c.Unexpected, []string{"hooks"})
	is.Equal(c.Stale, []string{"start"})
	is.Equal(c.Expected, []string{"delete"})
	is.True(!c.OK())
	is.True(Compare(tests[:2], Expected{"delete": "x"}).OK())
}

// The checked-in lists parse against the suite's test names (the
// programs' directories in the pinned module).
func TestCheckedInListsParse(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	files, err := filepath.Glob("../../expected/*.txt")
	is.NoErr(err)
	is.True(len(files) > 0)
	for _, f := range files {
		b, err := os.ReadFile(f)
		is.NoErr(err)
		exp, err := ParseExpected(b, suiteNames)
		if err != nil {
			t.Errorf("%s: %v", f, err)
		}
		is.True(len(exp) > 0)
	}
}

// suiteNames are runtime-tools v0.9.0's validation tests.
var suiteNames = strings.Fields(`config_updates_without_affect create default delete
delete_only_create_resources delete_resources hooks hooks_stdin hostname kill kill_no_effect
killsig linux_cgroups_blkio linux_cgroups_cpus linux_cgroups_devices linux_cgroups_hugetlb
linux_cgroups_memory linux_cgroups_network linux_cgroups_pids linux_cgroups_relative_blkio
linux_cgroups_relative_cpus linux_cgroups_relative_devices linux_cgroups_relative_hugetlb
linux_cgroups_relative_memory linux_cgroups_relative_network linux_cgroups_relative_pids
linux_devices linux_masked_paths linux_mount_label linux_ns_itype linux_ns_nopath linux_ns_path
linux_ns_path_type linux_process_apparmor_profile linux_readonly_paths linux_rootfs_propagation
linux_seccomp linux_sysctl linux_uid_mappings misc_props mounts pidfile poststart poststart_fail
poststop poststop_fail prestart prestart_fail process process_capabilities
process_capabilities_fail process_oom_score_adj process_rlimits process_rlimits_fail
process_user root_readonly_true start state`)
