package provider

import (
	"slices"
	"strconv"
	"syscall"

	"hostkit.dev/lib/procexec"
)

// scriptNoCgroupV2 is the one wrapper script: a compile-time constant run
// by /bin/sh with `-c`, every variable part a positional parameter, never
// interpolated into the script text. It unmounts the cgroup2 mount of a
// hybrid host inside the private mount namespace unshare(1) made, then
// execs the rest: $1 is umount(8), $2 the cgroup2 mount point. crun 1.8
// refuses hybrid hosts ("cgroups in hybrid mode not supported, drop all
// controllers from cgroupv2") and runs on the v1 hierarchies once the v2
// mount is gone; the host's mount table is untouched (propagation
// private).
const scriptNoCgroupV2 = `"$1" "$2" || exit 125; shift 2; exec "$@"`

// Mutation kinds (procexec.CommandSpec.Mutation) of the mutating verbs.
const (
	mutCreate = "container.create"
	mutStart  = "container.start"
	mutKill   = "container.kill"
	mutDelete = "container.delete"
)

// mutations lists the kinds the provider's policy supports.
var mutations = []string{mutCreate, mutDelete, mutKill, mutStart}

// signals are the signals Kill sends, by number (runc and crun both parse
// a decimal signal number); anything else is CodeInvalidArgument.
var signals = []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGKILL,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM}

// verb is one runtime subcommand the provider runs.
type verb struct {
	name     string
	class    procexec.Class
	mutation string
	// stdout caps the command's stdout in bytes (the codec's cap).
	stdout int64
}

// The verbs. Kill, delete, create and start print nothing on stdout that
// the provider reads; their cap only bounds a misbehaving runtime.
var (
	verbVersion = verb{name: "--version", class: procexec.ClassReadOnly, stdout: 4 << 10}
	verbState   = verb{name: "state", class: procexec.ClassReadOnly, stdout: 1 << 20}
	verbList    = verb{name: "list", class: procexec.ClassReadOnly, stdout: 8 << 20}
	verbEvents  = verb{name: "events", class: procexec.ClassReadOnly, stdout: 1 << 20}
	verbPs      = verb{name: "ps", class: procexec.ClassReadOnly, stdout: 1 << 20}
	verbCreate  = verb{name: "create", class: procexec.ClassMutating, mutation: mutCreate, stdout: 64 << 10}
	verbStart   = verb{name: "start", class: procexec.ClassMutating, mutation: mutStart, stdout: 64 << 10}
	verbKill    = verb{name: "kill", class: procexec.ClassMutating, mutation: mutKill, stdout: 64 << 10}
	verbDelete  = verb{name: "delete", class: procexec.ClassMutating, mutation: mutDelete, stdout: 64 << 10}
)

// tools are the resolved executables a provider runs.
type tools struct {
	runtime string // runc or crun
	sh      string // /bin/sh, for scriptNoCgroupV2
	// unshare, umount and v2 are set only when the runtime runs inside the
	// private-mount-namespace wrapper (crun on a hybrid host).
	unshare, umount, v2 string
}

// wrapped reports whether the wrapper applies to v: every verb except the
// two that only read the state directory (state, list), which work on a
// hybrid host as they are and stay cheap.
func (t *tools) wrapped(v verb) bool {
	return t.unshare != "" && v.name != verbState.name && v.name != verbList.name
}

// command returns the executable and argv[1:] that run the runtime with
// arguments rt for verb v: the runtime itself, or inside unshare +
// scriptNoCgroupV2 when wrapped. The policy is built from the same
// function, so the two cannot drift.
func (t *tools) command(v verb, rt []string) (string, []string) {
	exe, args := t.runtime, slices.Clone(rt)
	if t.wrapped(v) {
		args = append([]string{"--mount", "--propagation", "private", "--",
			t.sh, "-c", scriptNoCgroupV2, "hk-nocgroupv2", t.umount, t.v2, exe}, args...)
		exe = t.unshare
	}
	return exe, args
}

// globals returns the global flags every verb but --version carries.
func globals(root, log string) []string {
	return []string{"--root", root, "--log", log, "--log-format", "json"}
}

// rules returns the procexec policy for a runtime under root: exactly the
// verbs and argument shapes the provider builds, nothing else (everything
// unmatched is procexec.CodeUnknown). events is only for runtimes that
// have it.
func (t *tools) rules(root string, events bool) []procexec.Rule {
	anyArg := procexec.AnyArg
	g := func(v ...string) []string { return append(globals(root, anyArg), v...) }
	type shape struct {
		v  verb
		rt []string
	}
	shapes := []shape{
		{v: verbVersion, rt: []string{"--version"}},
		{v: verbState, rt: g("state", anyArg)},
		{v: verbList, rt: g("list", "--format", "json")},
		{v: verbPs, rt: g("ps", "--format", "json", anyArg)},
		{v: verbCreate, rt: g("create", "--bundle", anyArg, "--pid-file", anyArg, anyArg)},
		{v: verbStart, rt: g("start", anyArg)},
		{v: verbDelete, rt: g("delete", anyArg)},
		{v: verbDelete, rt: g("delete", "--force", anyArg)},
	}
	if events {
		shapes = append(shapes, shape{v: verbEvents, rt: g("events", "--stats", anyArg)})
	}
	for _, s := range signals {
		n := strconv.Itoa(int(s))
		shapes = append(shapes, shape{v: verbKill, rt: g("kill", anyArg, n)}, shape{v: verbKill, rt: g("kill", "--all", anyArg, n)})
	}
	rules := make([]procexec.Rule, 0, len(shapes))
	for _, s := range shapes {
		exe, args := t.command(s.v, s.rt)
		rules = append(rules, procexec.Rule{Executable: exe, Args: args, Class: s.v.class, Mutation: s.v.mutation})
	}
	return rules
}

// signalArg returns sig as the decimal argument kill takes, or false when
// the provider does not send it.
func signalArg(sig syscall.Signal) (string, bool) {
	if !slices.Contains(signals, sig) {
		return "", false
	}
	return strconv.Itoa(int(sig)), true
}
