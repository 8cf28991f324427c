// Package codec decodes, strictly, what an OCI runtime CLI prints: `state`,
// `list --format json`, `events --stats <id>` (one JSON object, never the
// stream), `ps --format json` and `--version`. There is one exact Codec per
// runtime version line ("runc-1.1", "crun-1.8"); ForVersion picks it and
// refuses anything else (CodeIncompatible), because a runtime's output
// shape is part of its version, not something to guess.
//
// Strict means, for every document:
//
//   - the byte cap (MaxState, MaxList, MaxEvents, MaxPs, MaxVersion) is
//     checked before any parsing;
//   - the input is valid UTF-8 and exactly one JSON value, with nothing but
//     white space after it (trailing garbage and a second value are
//     refused, and so is a truncated document);
//   - a duplicate object key is refused at any depth (encoding/json keeps
//     the last one silently), keys are matched exactly (encoding/json
//     matches struct fields case-insensitively), nesting is capped at
//     maxDepth, a \u escape that is a lone surrogate is refused; package
//     strictjson's one hand-written pass does all of this (FuzzParse
//     checks it against encoding/json);
//   - required fields are present with their JSON type, integers are plain
//     non-negative decimals within range, a status outside the OCI
//     enumeration (creating, created, running, stopped, paused) is refused,
//     and so is a pid that contradicts the status;
//   - keys a codec does not know are refused, except inside the subtrees a
//     codec explicitly tolerates (documented on each codec: the `data` of
//     runc's stats event, whose cgroup counters vary with the kernel, and
//     every member of crun's stored config but ociVersion and
//     annotations; neither is semantic for hostkit).
//
// Every error is a *wire.Error with CodeDecode or CodeIncompatible; messages
// name the document and the JSON path, never a value.
//
// References: runtime-spec runtime.md ("State"), runc 1.1 (list.go, state.go,
// events.go, types/events.go, ps.go) and crun 1.8 (src/list.c, src/state.c,
// src/ps.c; crun 1.8 has no `events` verb).
package codec

// Error codes. They are the provider's codes (package provider re-exports
// them), defined here because this package is the leaf that produces them.
const (
	// CodeDecode: the runtime printed something this codec refuses
	// (oversize, invalid UTF-8, duplicate key, unknown key or enum, wrong
	// type, partial document, trailing data).
	CodeDecode = "provider.decode"
	// CodeIncompatible: no exact codec exists for the runtime and version,
	// or the codec's runtime has no such verb.
	CodeIncompatible = "provider.incompatible"
)

// Byte caps, checked before parsing.
const (
	// MaxState caps one `state` document (1 MiB).
	MaxState = 1 << 20
	// MaxList caps one `list --format json` document (8 MiB).
	MaxList = 8 << 20
	// MaxEvents caps one `events --stats` document (1 MiB).
	MaxEvents = 1 << 20
	// MaxPs caps one `ps --format json` document (1 MiB).
	MaxPs = 1 << 20
	// MaxVersion caps `--version` output (4 KiB).
	MaxVersion = 4 << 10
	// MaxLog is how much of a runtime's --log file RuntimeError reads (the
	// last 64 KiB).
	MaxLog = 64 << 10
)

// maxDepth caps JSON nesting (objects and arrays); runc's stats event, the
// deepest document, nests five levels.
const maxDepth = 32

// maxPid is the largest pid Linux can hand out (PID_MAX_LIMIT, 2^22).
const maxPid = 1 << 22
