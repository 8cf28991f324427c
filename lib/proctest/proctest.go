// Package proctest finds and ends the processes a test binary left behind.
// Tests that start daemons make the test process a child subreaper
// (prctl(2) PR_SET_CHILD_SUBREAPER), so every orphan of theirs — a holder
// whose supervisord was killed, an agent whose holder was — is reparented
// to it rather than to PID 1 (which on the test machines does not reap).
// After the tests, TestMain calls Leftovers: anything still parented to
// the test process is a leak, which it ends and reports, so that a test
// that forgets to destroy what it started fails instead of leaving a
// process running on the machine.
package proctest

// Proc is a process found left behind.
type Proc struct {
	PID  int    // process id
	Args string // its command line as ps(1) shows it
}
