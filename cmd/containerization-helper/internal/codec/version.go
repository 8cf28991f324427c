package codec

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"

	"hostkit.dev/lib/wire"
)

// ForVersion returns the exact codec for runtime name ("runc" or "crun")
// at version (as ParseVersion returns it, e.g. "1.1.5+ds1"): runc 1.1.x is
// "runc-1.1", crun 1.8.x is "crun-1.8". Anything else, including another
// minor version of either, a pre-release or a malformed version, is
// CodeIncompatible: an output shape is never guessed.
func ForVersion(name, version string) (Codec, error) {
	major, minor, ok := splitVersion(version)
	if !ok {
		return nil, wire.Errorf(CodeIncompatible, "%s: unrecognised version", safeName(name))
	}
	switch line := name + "-" + strconv.Itoa(major) + "." + strconv.Itoa(minor); line {
	case "runc-1.1":
		return runc11{}, nil
	case "crun-1.8":
		return crun18{}, nil
	default:
		return nil, wire.Errorf(CodeIncompatible, "%s %d.%d: no codec for this runtime version line (have runc-1.1, crun-1.8)",
			safeName(name), major, minor)
	}
}

// ParseVersion returns the version from `<name> --version` output (cap
// MaxVersion, valid UTF-8). The first line must be exactly
// "<name> version <X.Y.Z>[+build]" (runc: "runc version 1.1.5+ds1"; crun:
// "crun version 1.8.1"); later lines (commit, spec, go, libseccomp, rundir,
// feature flags) are not semantic and are ignored. Errors: CodeDecode.
func ParseVersion(name string, out []byte) (string, error) {
	what := safeName(name) + " --version"
	if len(out) > MaxVersion {
		return "", decodeErr(what, "%d bytes, over the %d-byte cap", len(out), MaxVersion)
	}
	if !utf8.Valid(out) {
		return "", decodeErr(what, "not valid UTF-8")
	}
	first, _, _ := bytes.Cut(out, []byte("\n"))
	v, ok := strings.CutPrefix(string(first), name+" version ")
	if !ok || name == "" {
		return "", decodeErr(what, "first line is not %q", safeName(name)+" version X.Y.Z")
	}
	if _, _, ok := splitVersion(v); !ok {
		return "", decodeErr(what, "malformed version")
	}
	return v, nil
}

// splitVersion parses X.Y.Z with optional "+build" metadata (no leading
// zeros; no pre-release: "1.1.0-rc.1" and Debian's "1.1.0~rc1" are
// refused) and returns X and Y.
func splitVersion(v string) (major, minor int, ok bool) {
	core, build, hasBuild := strings.Cut(v, "+")
	if hasBuild && (build == "" || !buildChars(build)) {
		return 0, 0, false
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return 0, 0, false
	}
	var n [3]int
	for i, p := range parts {
		if p == "" || len(p) > 6 || (len(p) > 1 && p[0] == '0') {
			return 0, 0, false
		}
		for j := 0; j < len(p); j++ {
			if p[j] < '0' || p[j] > '9' {
				return 0, 0, false
			}
		}
		n[i], _ = strconv.Atoi(p)
	}
	return n[0], n[1], true
}

// buildChars reports whether s is build metadata: [0-9A-Za-z.~+-]+.
func buildChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.' || c == '~' || c == '+' || c == '-') {
			return false
		}
	}
	return len(s) <= 64
}

// safeName returns name for a message: one of the two runtimes, or a
// placeholder.
func safeName(name string) string {
	if name == "runc" || name == "crun" {
		return name
	}
	return "runtime"
}
