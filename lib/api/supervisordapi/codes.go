package supervisordapi

// Error codes supervisord returns in addition to lib/wire's (append-only;
// each listed in docs/supervisord.md).
const (
	CodeCredentialsUnavailable = "credentials.unavailable"      // staging or registering egress failed; nothing started
	CodeInstanceConflict       = "instance.conflict"            // the id exists with a different request
	CodeInstanceExists         = "instance.exists"              // a provision of this id is under way
	CodeInstanceExited         = "instance.exited"              // the agent has exited (e.g. resize after exit)
	CodeInstanceInvalid        = "instance.invalid"             // a bad field in a provision request
	CodeInstanceInvalidID      = "instance.invalid_id"          // not a canonical UUID
	CodeInstanceNotFound       = "instance.not_found"           // no instance has that id
	CodeInstanceNotRunning     = "instance.not_running"         // no holder serves the instance
	CodeInstanceSpawnFailed    = "instance.spawn_failed"        // the holder or the agent could not start
	CodeNetworkNamesExhausted  = "network.names_exhausted"      // an isolated instance resolved -synthetic-names names already (its resolver answers REFUSED)
	CodeNetworkNftUnavailable  = "network.nftables_unavailable" // an isolated instance's namespace cannot get the nftables rules of transparent egress; the agent was not started
	CodeNetworkUnavailable     = "network.unavailable"          // network isolated (asked for, or the default) cannot be had here: no namespace; never a fallback to host
	CodeRuntimeNotImplemented  = "runtime.not_implemented"      // host runtime not enabled, or not supported on this OS
	CodeRuntimeUnavailable     = "runtime.unavailable"          // e.g. container before the helper exists
	CodeSignalInvalid          = "signal.invalid"               // neither a number 1..64 nor a signal name of this system
	CodeStreamSlow             = "stream.slow_client"           // an attached client fell behind and was dropped
	CodeUIDExhausted           = "uid.exhausted"                // no free agent uid in the range
	CodeWorkingDirNotFound     = "working_dir.not_found"        // working_dir is not absolute, or not an existing directory
)

// Codes lists the codes above, sorted and unique (a test checks).
var Codes = []string{
	CodeCredentialsUnavailable,
	CodeInstanceConflict,
	CodeInstanceExists,
	CodeInstanceExited,
	CodeInstanceInvalid,
	CodeInstanceInvalidID,
	CodeInstanceNotFound,
	CodeInstanceNotRunning,
	CodeInstanceSpawnFailed,
	CodeNetworkNamesExhausted,
	CodeNetworkNftUnavailable,
	CodeNetworkUnavailable,
	CodeRuntimeNotImplemented,
	CodeRuntimeUnavailable,
	CodeSignalInvalid,
	CodeStreamSlow,
	CodeUIDExhausted,
	CodeWorkingDirNotFound,
}
