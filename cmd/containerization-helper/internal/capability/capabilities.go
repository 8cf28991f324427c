package capability

import (
	"slices"
	"strings"
)

// Suite names the conformance suite the map below is written against. A
// snapshot from another suite is refused: check descriptions and test names
// change between runtime-tools versions, so the map must be reviewed first.
const Suite = "opencontainers/runtime-tools v0.9.0"

// CheckSep joins a test name and a TAP check description in a Passed entry
// ("start/`process.args` MUST NOT be applied until triggered by the start
// operation"). Test names never contain it; descriptions may, so an entry
// is split at its first CheckSep.
const CheckSep = "/"

// Requirement is one piece of evidence a capability needs.
type Requirement struct {
	// Test is a validation test of Suite (a directory under
	// runtime-tools/validation, e.g. "start").
	Test string
	// Checks, when set, are TAP check descriptions of Test that must each
	// have run (at least once, not as SKIP) and passed every time; the rest
	// of the test does not count. Empty means the whole test must pass.
	Checks []string
	// Why explains, for a requirement with Checks, what the rest of the
	// test does and why it cannot count.
	Why string
}

// Capability is a named thing the helper may rely on a runtime to do.
type Capability struct {
	Name     string        // e.g. "lifecycle.start"
	Doc      string        // what the evidence shows, in one line
	Requires []Requirement // all of these must be in a snapshot's evidence
}

func whole(tests ...string) []Requirement {
	out := make([]Requirement, len(tests))
	for i, t := range tests {
		out[i] = Requirement{Test: t}
	}
	return out
}

// The TAP checks of the partial requirements, exactly as runtime-tools
// v0.9.0 prints them.
var (
	startChecks = []string{
		"start` operation MUST generate an error if it is not provided the container ID",
		"attempting to `start` a container that is not `created` MUST generate an error",
		"`process.args` MUST NOT be applied until triggered by the start operation",
		"`start` operation MUST run the user-specified program as specified by `process`",
		"attempting to `start` a container that is not `created` MUST have no effect on the container",
	}
	miscChecks = []string{
		"runtimes that are reading or processing this configuration file MUST NOT generate an error if they encounter an unknown property",
		"runtimes that are reading or processing this configuration file MUST generate an error when invalid or unsupported values are encountered",
	}
	memoryChecks = []string{
		"find memory cgroup",
		"get memory cgroup data",
		"memory limit is set correctly",
		"memory oom is set correctly",
		"memory reservation is set correctly",
		"memory swap is set correctly",
		"memory swappiness is set correctly",
	}
	cpuChecks = []string{
		"find cpu cgroup",
		"get cpu cgroup data",
		"cpu shares is set correctly",
		"cpu quota is set correctly",
		"cpu period is set correctly",
		"cpu cpus is set correctly",
		"cpu mems is set correctly",
	}
	rlimitChecks = []string{
		"has expected hard RLIMIT_NOFILE",
		"has expected soft RLIMIT_AS", "has expected hard RLIMIT_AS",
		"has expected soft RLIMIT_CORE", "has expected hard RLIMIT_CORE",
		"has expected soft RLIMIT_DATA", "has expected hard RLIMIT_DATA",
		"has expected soft RLIMIT_FSIZE", "has expected hard RLIMIT_FSIZE",
		"has expected soft RLIMIT_STACK", "has expected hard RLIMIT_STACK",
		"has expected soft RLIMIT_CPU", "has expected hard RLIMIT_CPU",
	}
)

// catalog is the reviewed map, sorted by name. Read it through All.
var catalog = []Capability{
	{Name: "config.defaults", Doc: "a container from runtime-tools' default config runs and every in-container check of that config passes", Requires: whole("default")},
	{Name: "config.extensibility", Doc: "unknown config properties are ignored and invalid values refused", Requires: []Requirement{{Test: "misc_props", Checks: miscChecks,
		Why: "its first case (unknown annotation key) runs /runtimetest without copying it into the bundle, so create fails for every runtime"}}},
	{Name: "config.frozen_at_create", Doc: "changing config.json after create does not change the container", Requires: whole("config_updates_without_affect")},
	{Name: "hooks", Doc: "prestart, poststart and poststop hooks run in order, at the spec's times, with the state on stdin", Requires: whole("hooks", "hooks_stdin",
		"prestart", "prestart_fail", "poststart", "poststart_fail", "poststop", "poststop_fail")},
	{Name: "hostname", Doc: "process sees the configured hostname", Requires: whole("hostname")},
	{Name: "lifecycle.create", Doc: "create builds a container from a bundle, refuses a duplicate or missing id, and does not run the process", Requires: whole("create")},
	{Name: "lifecycle.delete", Doc: "delete removes a stopped container and every resource create made", Requires: whole("delete_resources", "delete_only_create_resources")},
	{Name: "lifecycle.delete_refuses_unstopped", Doc: "delete of a container that is not stopped fails and leaves it alone (runtime.md \"delete\")", Requires: whole("delete")},
	{Name: "lifecycle.kill", Doc: "kill delivers the signal given (default TERM) and is refused without effect on a stopped container", Requires: whole("kill", "killsig", "kill_no_effect")},
	{Name: "lifecycle.start", Doc: "start runs process only when triggered, exactly once, and refuses a missing or not-created container", Requires: []Requirement{{Test: "start", Checks: startChecks,
		Why: "its last case creates a container without `process`, which runc and crun refuse at create; hostkit always sets process"}}},
	{Name: "linux.apparmor", Doc: "process.apparmorProfile is applied", Requires: whole("linux_process_apparmor_profile")},
	{Name: "linux.cgroups.blkio", Doc: "blkio weights and throttles are set, at absolute and relative cgroup paths", Requires: whole("linux_cgroups_blkio", "linux_cgroups_relative_blkio")},
	{Name: "linux.cgroups.cpu", Doc: "cpu shares, quota, period, cpus and mems are set, at absolute and relative cgroup paths", Requires: []Requirement{
		{Test: "linux_cgroups_cpus", Checks: cpuChecks,
			Why: "its second part (empty cpu resources) prints a TAP document with no check when the cpu controller files are not at the path it assumes"},
		{Test: "linux_cgroups_relative_cpus"}}},
	{Name: "linux.cgroups.devices", Doc: "the device cgroup allow/deny list is applied in order", Requires: whole("linux_cgroups_devices", "linux_cgroups_relative_devices")},
	{Name: "linux.cgroups.hugetlb", Doc: "hugetlb limits are set", Requires: whole("linux_cgroups_hugetlb", "linux_cgroups_relative_hugetlb")},
	{Name: "linux.cgroups.kernel_memory", Doc: "kernel and kernel TCP memory limits are set (deprecated by the kernel; hostkit never sets them)", Requires: whole("linux_cgroups_memory", "linux_cgroups_relative_memory")},
	{Name: "linux.cgroups.memory", Doc: "memory limit, reservation, swap, swappiness and OOM killer settings are set, at absolute and relative cgroup paths", Requires: []Requirement{
		{Test: "linux_cgroups_memory", Checks: memoryChecks, Why: "its kernel and kernelTCP checks are linux.cgroups.kernel_memory"},
		{Test: "linux_cgroups_relative_memory", Checks: memoryChecks, Why: "its kernel and kernelTCP checks are linux.cgroups.kernel_memory"}}},
	{Name: "linux.cgroups.network", Doc: "net_cls class id and net_prio priorities are set", Requires: whole("linux_cgroups_network", "linux_cgroups_relative_network")},
	{Name: "linux.cgroups.pids", Doc: "the pids limit is set, at absolute and relative cgroup paths", Requires: whole("linux_cgroups_pids", "linux_cgroups_relative_pids")},
	{Name: "linux.devices", Doc: "configured device nodes are created with their type, numbers, mode and owner", Requires: whole("linux_devices")},
	{Name: "linux.masked_paths", Doc: "maskedPaths are unreadable", Requires: whole("linux_masked_paths")},
	{Name: "linux.namespaces", Doc: "new namespaces of every type are created, and namespaces given by path are joined", Requires: whole("linux_ns_nopath", "linux_ns_path", "linux_ns_path_type")},
	{Name: "linux.namespaces.inherit", Doc: "a namespace type left out of the config is inherited from the caller", Requires: whole("linux_ns_itype")},
	{Name: "linux.readonly_paths", Doc: "readonlyPaths are read-only", Requires: whole("linux_readonly_paths")},
	{Name: "linux.rootfs_propagation", Doc: "rootfsPropagation (shared, slave, private, unbindable) is applied", Requires: whole("linux_rootfs_propagation")},
	{Name: "linux.seccomp", Doc: "a seccomp filter is installed with its actions", Requires: whole("linux_seccomp")},
	{Name: "linux.selinux_label", Doc: "linux.mountLabel is applied (or ignored where SELinux is off)", Requires: whole("linux_mount_label")},
	{Name: "linux.sysctl", Doc: "namespaced sysctls are set", Requires: whole("linux_sysctl")},
	{Name: "linux.uid_mappings", Doc: "user namespace uid and gid mappings are applied", Requires: whole("linux_uid_mappings")},
	{Name: "mounts", Doc: "configured mounts appear in order with their options", Requires: whole("mounts")},
	{Name: "pidfile", Doc: "create --pid-file writes the container's pid", Requires: whole("pidfile")},
	{Name: "process", Doc: "process args, cwd and environment are applied", Requires: whole("process")},
	{Name: "process.capabilities", Doc: "a privileged capability set is applied and an unknown capability refused", Requires: whole("process_capabilities", "process_capabilities_fail")},
	{Name: "process.oom_score_adj", Doc: "process.oomScoreAdj is applied", Requires: whole("process_oom_score_adj")},
	{Name: "process.rlimits", Doc: "process rlimits are applied", Requires: []Requirement{{Test: "process_rlimits", Checks: rlimitChecks,
		Why: "its soft RLIMIT_NOFILE check reads the limit from inside runtimetest, a Go program, and Go (since 1.19, go.dev/issue/46279) raises its own soft NOFILE limit at start; process_rlimits_fail prints no check at all"}}},
	{Name: "process.user", Doc: "process uid, gid and additional gids are applied", Requires: whole("process_user")},
	{Name: "readonly_root", Doc: "root.readonly makes the root filesystem read-only", Requires: whole("root_readonly_true")},
	{Name: "state", Doc: "state reports the spec's fields and refuses a missing id", Requires: whole("state")},
}

// suiteTests lists every validation test of Suite (runtime-tools v0.9.0
// validation/*, util excluded), sorted.
var suiteTests = []string{
	"config_updates_without_affect", "create", "default", "delete", "delete_only_create_resources",
	"delete_resources", "hooks", "hooks_stdin", "hostname", "kill", "kill_no_effect", "killsig",
	"linux_cgroups_blkio", "linux_cgroups_cpus", "linux_cgroups_devices", "linux_cgroups_hugetlb",
	"linux_cgroups_memory", "linux_cgroups_network", "linux_cgroups_pids",
	"linux_cgroups_relative_blkio", "linux_cgroups_relative_cpus", "linux_cgroups_relative_devices",
	"linux_cgroups_relative_hugetlb", "linux_cgroups_relative_memory",
	"linux_cgroups_relative_network", "linux_cgroups_relative_pids", "linux_devices",
	"linux_masked_paths", "linux_mount_label", "linux_ns_itype", "linux_ns_nopath", "linux_ns_path",
	"linux_ns_path_type", "linux_process_apparmor_profile", "linux_readonly_paths",
	"linux_rootfs_propagation", "linux_seccomp", "linux_sysctl", "linux_uid_mappings", "misc_props",
	"mounts", "pidfile", "poststart", "poststart_fail", "poststop", "poststop_fail", "prestart",
	"prestart_fail", "process", "process_capabilities", "process_capabilities_fail",
	"process_oom_score_adj", "process_rlimits", "process_rlimits_fail", "process_user",
	"root_readonly_true", "start", "state",
}

// All returns the capability map, sorted by name. The result is a deep
// copy: callers may keep or change it.
func All() []Capability {
	out := make([]Capability, len(catalog))
	for i, c := range catalog {
		c.Requires = slices.Clone(c.Requires)
		for j := range c.Requires {
			c.Requires[j].Checks = slices.Clone(c.Requires[j].Checks)
		}
		out[i] = c
	}
	return out
}

// SuiteTests returns the names of Suite's validation tests, sorted.
func SuiteTests() []string { return slices.Clone(suiteTests) }

// Known reports whether name is a capability of the map.
func Known(name string) bool {
	_, ok := slices.BinarySearchFunc(catalog, name, func(c Capability, n string) int { return strings.Compare(c.Name, n) })
	return ok
}

// Evidence returns the Passed entries of a snapshot for one conformance
// run: every test in passedTests, plus test+CheckSep+check for each check
// a partial requirement names that is in passedChecks[test] (the checks of
// that test that ran and passed every time), for tests that did not pass
// as a whole. Sorted and deduplicated.
func Evidence(passedTests []string, passedChecks map[string][]string) []string {
	out := slices.Clone(passedTests)
	for _, c := range catalog {
		for _, r := range c.Requires {
			if len(r.Checks) == 0 || slices.Contains(passedTests, r.Test) {
				continue
			}
			for _, ch := range r.Checks {
				if slices.Contains(passedChecks[r.Test], ch) {
					out = append(out, r.Test+CheckSep+ch)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Derive returns the capabilities that passed (Evidence entries) grants,
// sorted: those every requirement of which is met. A whole-test
// requirement is met by the test's entry; a partial one by the test's
// entry or by an entry for every check it names.
func Derive(passed []string) []string {
	has := make(map[string]bool, len(passed))
	for _, p := range passed {
		has[p] = true
	}
	var out []string
	for _, c := range catalog {
		if met(c.Requires, has) {
			out = append(out, c.Name)
		}
	}
	return out
}

func met(reqs []Requirement, has map[string]bool) bool {
	for _, r := range reqs {
		if has[r.Test] {
			continue
		}
		if len(r.Checks) == 0 {
			return false
		}
		for _, ch := range r.Checks {
			if !has[r.Test+CheckSep+ch] {
				return false
			}
		}
	}
	return true
}
