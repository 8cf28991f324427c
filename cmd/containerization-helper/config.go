package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/daemon"
)

// flags are the helper's own flags (besides the common ones and roles).
type flags struct {
	allowExe   daemon.StringList
	allowSHA   daemon.StringList
	idle       time.Duration
	runtime    string
	auditFsync string
	fsync      audit.FsyncPolicy // auditFsync, parsed by check
}

func (f *flags) register(fs *flag.FlagSet) {
	fs.Var(&f.allowExe, "allow-exe", "executable whose SHA-256 may connect (repeatable; hashed at start); default: hostctl and supervisord next to this binary")
	fs.Var(&f.allowSHA, "allow-exe-sha256", "SHA-256 (64 hex) of an executable that may connect (repeatable)")
	fs.DurationVar(&f.idle, "idle-timeout", 60*time.Second, "exit after this long without connections or ops under way; 0 never exits")
	fs.StringVar(&f.runtime, "runtime", "runc", "OCI runtime: runc or crun")
	fs.StringVar(&f.auditFsync, "audit-fsync", "always", "audit log fsync policy: always (every record is on disk before the op goes on) or never (the kernel flushes it)")
}

// check refuses a negative -idle-timeout and parses -audit-fsync.
func (f *flags) check() (err error) {
	if f.idle < 0 {
		return errors.New("-idle-timeout must be 0 or positive")
	}
	f.fsync, err = fsyncPolicy(f.auditFsync)
	return err
}

// fsyncPolicy parses -audit-fsync (as egressd's): "always" fsyncs every
// audit record before the op goes on (the default: two records per
// mutation, one per other op), "never" leaves flushing to the kernel —
// records then survive a crash of the helper but not of the machine.
func fsyncPolicy(s string) (audit.FsyncPolicy, error) {
	switch s {
	case "always":
		return audit.FsyncAlways, nil
	case "never":
		return audit.FsyncNever, nil
	}
	return 0, fmt.Errorf("-audit-fsync: want always or never, got %q", s)
}
