package capability

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"

	"hostkit.dev/lib/wire"
)

// MaxFileSize caps a snapshot file (bytes) before it is parsed.
const MaxFileSize = 1 << 20

// snapshots holds the checked-in snapshot files, one per (codec, host kind):
// snapshots/<codec>-<host kind>.json, written by capsnap -write from a real
// conformance run and reviewed like code.
//
//go:embed snapshots/*.json
var snapshots embed.FS

// fileForm is a snapshot file: the snapshot's fields in this order, two
// spaces of indentation, a final newline, and the digest for reviewers and
// operators (it is recomputed, never trusted).
type fileForm struct {
	Provider     string   `json:"provider"`     // the runtime's name, e.g. "runc"
	Version      string   `json:"version"`      // its exact version, e.g. "1.1.5"
	Codec        string   `json:"codec"`        // its codec line, e.g. "runc-1.1"
	HostKind     string   `json:"host_kind"`    // one of HostKinds
	Suite        string   `json:"suite"`        // Suite
	Passed       []string `json:"passed"`       // the evidence: tests (and test/check entries) passed, sorted
	Capabilities []string `json:"capabilities"` // derived from Passed, sorted; checked, never trusted
	Digest       string   `json:"digest"`       // "sha256:" + 64 hex of the canonical encoding; recomputed, never trusted
}

// FileName is the name of the snapshot file for a codec and host kind.
func FileName(codec, hostKind string) string { return codec + "-" + hostKind + ".json" }

// File returns the snapshot's file form (the exact bytes DecodeFile
// accepts).
func (s *Snapshot) File() []byte {
	f := fileForm{Provider: s.provider, Version: s.version, Codec: s.codec, HostKind: s.hostKind,
		Suite: s.suite, Passed: nonNil(s.passed), Capabilities: nonNil(s.caps), Digest: s.digest}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		panic("capability: encoding a snapshot file cannot fail: " + err.Error())
	}
	return buf.Bytes()
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return slices.Clone(l)
}

// DecodeFile decodes a snapshot file strictly: at most MaxFileSize bytes,
// one JSON object with exactly fileForm's fields, built with New (so every
// rule of New holds), its capabilities equal to those derived from its
// evidence, its digest equal to the recomputed one, and the bytes equal to
// File's (sorted, unique lists; no duplicate keys; canonical layout).
// Errors are plain.
func DecodeFile(b []byte) (*Snapshot, error) {
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("capability.DecodeFile: %d bytes, over %d", len(b), MaxFileSize)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f fileForm
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("capability.DecodeFile: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("capability.DecodeFile: data after the snapshot")
	}
	s, err := New(f.Provider, f.Version, f.Codec, f.HostKind, f.Suite, f.Passed)
	if err != nil {
		return nil, fmt.Errorf("capability.DecodeFile: %w", err)
	}
	switch {
	case !slices.Equal(f.Capabilities, s.caps):
		return nil, fmt.Errorf("capability.DecodeFile: capabilities %v are not the ones the evidence grants %v", f.Capabilities, s.caps)
	case f.Digest != s.digest:
		return nil, fmt.Errorf("capability.DecodeFile: digest %s is not the snapshot's %s", f.Digest, s.digest)
	case !bytes.Equal(b, s.File()):
		return nil, errors.New("capability.DecodeFile: not in canonical file form (order, duplicates, layout)")
	}
	return s, nil
}

// Lookup returns the checked-in snapshot for a provider's codec line
// ("runc-1.1") and host kind ("cgroup-hybrid"), decoded afresh (callers
// share nothing). Errors: *wire.Error CodeUnavailable (retry never) when
// the pair is malformed, has no snapshot, or its file does not decode.
func Lookup(codec, hostKind string) (*Snapshot, error) {
	unavailable := func(msg string, err error) error {
		e := wire.Wrap(CodeUnavailable, msg, err)
		e.Retry = wire.RetryNever
		return e
	}
	if !reCodec.MatchString(codec) || !slices.Contains(HostKinds, hostKind) {
		return nil, unavailable("no capability snapshot: malformed codec or host kind", nil)
	}
	name := "snapshots/" + FileName(codec, hostKind)
	b, err := fs.ReadFile(snapshots, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, unavailable(fmt.Sprintf("no capability snapshot for %s on %s: run scripts/conformance on such a host and review its result", codec, hostKind), err)
	}
	if err != nil {
		return nil, unavailable("capability snapshot for "+codec+" on "+hostKind+" unreadable", err)
	}
	s, err := DecodeFile(b)
	if err == nil && (s.codec != codec || s.hostKind != hostKind) {
		err = fmt.Errorf("file %s holds %s on %s", name, s.codec, s.hostKind)
	}
	if err != nil {
		return nil, unavailable("capability snapshot for "+codec+" on "+hostKind+" is invalid", err)
	}
	return s, nil
}

// Embedded lists the embedded snapshot file names, sorted.
func Embedded() ([]string, error) {
	ents, err := fs.ReadDir(snapshots, "snapshots")
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out, nil
}
