// Package procexec is hostkit's secure process runner: the only way hostkit
// runs an external program that observes or changes runtime state (runc,
// crun, umoci). It follows the Firecracker jailer and go-runc: exact argv, a
// cleared environment, descriptor hygiene, and files rather than pipes.
//
// A CommandSpec names an executable, its exact arguments, an explicit
// environment (nothing is inherited), a pinned working directory (WorkDir),
// a timeout (default 30 s, 1 s to 300 s), output limits, a declared
// classification and a purpose. A Runner checks a spec before anything
// runs:
//
//   - the spec is well formed (CodeInvalidSpec);
//   - the executable resolves to an absolute path (Resolve), walking every
//     component with lstat(2) and following symlinks only to re-check their
//     targets (CodeUnresolved); the file and every directory above it are
//     owned by root and not writable by group or others
//     (CodeExecutableUnsafe);
//   - the caller's Policy classifies (executable, argv): an unmatched
//     command is CodeUnknown, a forbidden one CodeForbidden, a declared
//     classification that differs from the policy's is CodeInvalidSpec, and a
//     mutation kind the policy does not support is CodeUnsupportedMutation;
//   - the pinned working directory still exists (CodeWorkDirInvalid).
//
// Then it runs the program (Linux only; elsewhere CodePlatformUnsupported):
// stdin is /dev/null; stdout and stderr are anonymous memory files
// (memfd_create(2), no name in any file system, no disk inode), watched
// while the child runs and read back after exit up to their limits — or, for a
// stream the spec gives its own file (CommandSpec.Stdout/Stderr: an open
// regular file opened O_APPEND, which is how a container's console log
// reaches runc), that file as it is, neither read back nor limited nor
// closed; the child leads its own process group and gets
// no descriptor other than 0, 1 and 2 (the runner marks every other
// descriptor of this process close-on-exec before starting it). The
// timeout, the caller's context and an output watcher each kill the whole
// group with SIGKILL and are reported distinctly (CodeTimeout,
// CodeCancelled, CodeOutputOverflow). When the group leader exits, whatever
// is left of its group is killed too, and Run waits (bounded) until no live
// member remains (CodeCleanupFailed otherwise). A process that leaves the
// group (setsid(2), setpgid(2)) is out of reach; the OCI runtimes do so
// only for container processes, which the helper tracks by itself.
//
// The working directory is pinned by descriptor: OpenWorkDir opens every
// component with O_DIRECTORY|O_NOFOLLOW, and the child changes into
// /proc/self/fd/N of that descriptor (a magic link that names the open
// directory itself, not a path to walk again). A directory renamed or
// replaced by a symlink after OpenWorkDir is therefore never followed.
//
// Nothing secret leaves the package: argument values go through
// redact.String and the Runner's Scrubber, environment values are never
// logged or formatted (only their keys), output appears only as a short
// redacted stderr tail in error messages, and Result's String and
// LogValue give the redacted summary. Result.Stdout and Result.Stderr hold
// the raw bytes for the caller's decoder; never log them.
//
// A process that runs the Runner should be a child subreaper
// (PR_SET_CHILD_SUBREAPER, prctl(2)) so that the runner can reap the
// grandchildren it kills (it reaps only members of its own groups).
//
// Every error is a *wire.Error carrying one of the codes below.
package procexec

// Error codes (stable `area.reason` strings, append-only; each is listed in
// docs/protocol.md). These are local errors of the caller; a daemon maps
// them to its own codes before anything reaches a peer.
const (
	// CodeCancelled: the caller's context ended before or while the program
	// ran; its process group was killed.
	CodeCancelled = "procexec.cancelled"
	// CodeCleanupFailed: a live member of the program's process group was
	// still there after the group was killed and the cleanup budget spent.
	CodeCleanupFailed = "procexec.cleanup_failed"
	// CodeExecFailed: the program could not be started (fork, exec, output
	// files, working directory); nothing ran.
	CodeExecFailed = "procexec.exec_failed"
	// CodeExecutableUnsafe: the executable or a directory above it is not
	// owned by root, or is writable by group or others.
	CodeExecutableUnsafe = "procexec.executable_unsafe"
	// CodeExitNonzero: the program exited with a non-zero status or was
	// killed by a signal it did not get from the runner.
	CodeExitNonzero = "procexec.exit_nonzero"
	// CodeForbidden: the policy classifies the command as forbidden.
	CodeForbidden = "procexec.forbidden"
	// CodeInvalidSpec: the spec is malformed (purpose, timeout, limits,
	// arguments, environment) or declares another classification than the
	// policy's.
	CodeInvalidSpec = "procexec.invalid_spec"
	// CodeOutputOverflow: stdout or stderr passed its byte limit; the group
	// was killed and the output is truncated at the limit.
	CodeOutputOverflow = "procexec.output_overflow"
	// CodePlatformUnsupported: this platform lacks what the runner needs
	// (process-group kill with /proc, memfd_create, /proc/self/fd).
	CodePlatformUnsupported = "procexec.platform_unsupported"
	// CodeTimeout: the spec's timeout passed; the group was killed.
	CodeTimeout = "procexec.timeout"
	// CodeUnknown: no policy rule matches the command, or the spec declares
	// the class unknown.
	CodeUnknown = "procexec.unknown"
	// CodeUnresolved: the executable is not an absolute path or bare name
	// found in SearchPath, does not exist, is not a regular executable file,
	// or its symlinks loop.
	CodeUnresolved = "procexec.unresolved"
	// CodeUnsupportedMutation: the command mutates, and the policy does not
	// support its mutation kind.
	CodeUnsupportedMutation = "procexec.unsupported_mutation"
	// CodeWorkDirInvalid: the working directory is not absolute, does not
	// exist, is not a directory, has a symlink in its path, was removed, or
	// its WorkDir was closed.
	CodeWorkDirInvalid = "procexec.workdir_invalid"
)

// Codes lists every code above in sorted order; a test keeps it sorted and
// unique.
var Codes = []string{
	CodeCancelled,
	CodeCleanupFailed,
	CodeExecFailed,
	CodeExecutableUnsafe,
	CodeExitNonzero,
	CodeForbidden,
	CodeInvalidSpec,
	CodeOutputOverflow,
	CodePlatformUnsupported,
	CodeTimeout,
	CodeUnknown,
	CodeUnresolved,
	CodeUnsupportedMutation,
	CodeWorkDirInvalid,
}
