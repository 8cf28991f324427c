package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"hostkit.dev/lib/wire"
)

// SchemaVersion is the only "schema" this package reads and writes.
const SchemaVersion = 1

// Limits on what one record may hold (bytes).
const (
	maxKeyBytes    = 256      // an idempotency key
	maxHashBytes   = 128      // a request or plan hash
	maxOpBytes     = 64       // an op name
	maxResultBytes = 64 << 10 // a stored idempotency result
	maxPlanBytes   = 64 << 10 // a plan's contents
	maxPathBytes   = 4096     // a bundle or console log path
)

// doc is state.json, schema 1. Times are Unix milliseconds. Every map key
// is lowercase ASCII (checkJSON relies on it); idempotency keys, which may
// be any bytes, live in a list as base64.
type doc struct {
	Schema  int    `json:"schema"`  // SchemaVersion; another is state.schema_unsupported
	Project string `json:"project"` // the project UUID, made at the first start and never changed
	// Generation counts the durable writes of the document; the newer of
	// state.json and a state.wal slot wins (package doc, "Durability").
	Generation  uint64            `json:"generation"`
	CreatedMS   int64             `json:"created_ms"`  // when the state was first made
	Fences      map[string]uint64 `json:"fences"`      // instance UUID → the highest fence seen (a lower one is fence.stale)
	Idempotency []idemJSON        `json:"idempotency"` // stored mutation answers, live until ExpiresMS
	// Plans is always written empty: plans live in memory only. One
	// read from a file is validated and dropped.
	Plans      map[string]planJSON `json:"plans"`
	Containers map[string]contJSON `json:"containers"` // container id → its record
}

type idemJSON struct {
	Key         []byte `json:"key"`          // "<peer uid>:<op>:<idempotency key>", at most 256 bytes (base64 in JSON)
	Op          string `json:"op"`           // the op the key was used for
	RequestHash string `json:"request_hash"` // hex SHA-256 of the request's canonical body
	Result      []byte `json:"result"`       // the canonical answer (server's idemResult), at most 64 KiB
	CreatedMS   int64  `json:"created_ms"`   // when it was stored
	ExpiresMS   int64  `json:"expires_ms"`   // CreatedMS + the record TTL (24 h by default); later it is forgotten
	// enc is the record's JSON, made at its first encode: a record is
	// never changed in place (a put replaces it), so every later write of
	// the document copies these bytes instead of encoding (and base64-ing)
	// the record again.
	enc []byte
}

type planJSON struct {
	Contents  []byte `json:"contents"`   // the plan's canonical MessagePack, at most 64 KiB: its hash is the plan's name
	CreatedMS int64  `json:"created_ms"` // when it was stored
	ExpiresMS int64  `json:"expires_ms"` // the plan's expiry; later it is plan.expired
}

type contJSON struct {
	Instance   string `json:"instance"`    // the owning instance, canonical UUID
	Bundle     string `json:"bundle"`      // the bundle directory, absolute and clean; "" before it exists
	ConsoleLog string `json:"console_log"` // the console log, absolute and clean; "" before it exists
	Fence      uint64 `json:"fence"`       // the instance fence the container was planned with
	PlanHash   string `json:"plan_hash"`   // the create plan's hash; "" when none
	Phase      Phase  `json:"phase"`       // the phase written before the runtime is asked (Phase*)
	UpdatedMS  int64  `json:"updated_ms"`  // when the record was last written
}

// newDoc is the document of a first start.
func newDoc(project string, nowMS int64) *doc {
	return &doc{
		Schema:     SchemaVersion,
		Project:    project,
		CreatedMS:  nowMS,
		Fences:     map[string]uint64{},
		Plans:      map[string]planJSON{},
		Containers: map[string]contJSON{},
	}
}

// encode renders d deterministically and compactly: the bytes
// json.Marshal gives (it sorts map keys; the idempotency list is kept
// sorted by key), with each idempotency record's JSON made once and
// reused (idemJSON.enc), since every durable write carries the whole
// document and those records are most of it. Compact, not indented:
// MarshalIndent costs twice the time and a third more bytes.
func (d *doc) encode() ([]byte, error) {
	fences, err := json.Marshal(d.Fences)
	if err != nil {
		return nil, err
	}
	plans, err := json.Marshal(d.Plans)
	if err != nil {
		return nil, err
	}
	conts, err := json.Marshal(d.Containers)
	if err != nil {
		return nil, err
	}
	project, err := json.Marshal(d.Project)
	if err != nil {
		return nil, err
	}
	n := len(fences) + len(plans) + len(conts) + len(project) + 160
	for i := range d.Idempotency {
		r := &d.Idempotency[i]
		if r.enc == nil {
			if r.enc, err = json.Marshal(r); err != nil {
				return nil, err
			}
		}
		n += len(r.enc) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"schema":`...)
	b = strconv.AppendInt(b, int64(d.Schema), 10)
	b = append(append(b, `,"project":`...), project...)
	b = strconv.AppendUint(append(b, `,"generation":`...), d.Generation, 10)
	b = strconv.AppendInt(append(b, `,"created_ms":`...), d.CreatedMS, 10)
	b = append(append(b, `,"fences":`...), fences...)
	b = append(b, `,"idempotency":`...)
	if d.Idempotency == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range d.Idempotency {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, d.Idempotency[i].enc...)
		}
		b = append(b, ']')
	}
	b = append(append(b, `,"plans":`...), plans...)
	b = append(append(b, `,"containers":`...), conts...)
	return append(b, '}', '\n'), nil
}

// decodeDoc decodes and validates state.json. Errors:
// CodeSchemaUnsupported (checked first, so a newer helper's file is named
// as such), CodeCorrupt.
func decodeDoc(b []byte) (*doc, error) {
	if err := checkJSON(b); err != nil {
		return nil, wire.Wrap(CodeCorrupt, "state.json is not a strict JSON document", err)
	}
	var probe struct {
		Schema json.RawMessage `json:"schema"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, wire.Wrap(CodeCorrupt, "state.json is not a JSON object", err)
	}
	if !bytes.Equal(bytes.TrimSpace(probe.Schema), []byte("1")) {
		return nil, wire.Errorf(CodeSchemaUnsupported, "state.json has schema %.16q; this helper reads schema %d",
			bytes.TrimSpace(probe.Schema), SchemaVersion)
	}
	var d doc
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, wire.Wrap(CodeCorrupt, "state.json does not decode", err)
	}
	if err := d.validate(); err != nil {
		return nil, wire.Wrap(CodeCorrupt, "state.json holds an invalid record: "+err.Error(), err)
	}
	if d.Fences == nil {
		d.Fences = map[string]uint64{}
	}
	d.Plans = map[string]planJSON{} // never carried over: an unconsumed plan does not survive a restart
	if d.Containers == nil {
		d.Containers = map[string]contJSON{}
	}
	return &d, nil
}

// validate checks every record as the mutating methods would have.
func (d *doc) validate() error {
	if !ValidUUID(d.Project) {
		return fmt.Errorf("project is not a canonical UUID")
	}
	for inst := range d.Fences {
		if !ValidUUID(inst) {
			return fmt.Errorf("a fence's instance is not a canonical UUID")
		}
	}
	for i, r := range d.Idempotency {
		if err := checkIdem(string(r.Key), r.Op, r.RequestHash, r.Result); err != nil {
			return err
		}
		if i > 0 && bytes.Compare(d.Idempotency[i-1].Key, r.Key) >= 0 {
			return fmt.Errorf("idempotency records are not sorted and unique")
		}
	}
	for h, p := range d.Plans {
		if !validHash(h) || len(p.Contents) > maxPlanBytes {
			return fmt.Errorf("a plan record is malformed")
		}
	}
	for id, c := range d.Containers {
		if err := c.toContainer(id).validate(); err != nil {
			return err
		}
	}
	return nil
}

// findIdem returns the index of key in the sorted list, and whether it is
// there.
func (d *doc) findIdem(key string) (int, bool) {
	return slices.BinarySearchFunc(d.Idempotency, key, func(r idemJSON, k string) int {
		return strings.Compare(string(r.Key), k)
	})
}

// validHash reports whether h is 1–128 bytes of [a-z0-9_.:-] (a plan hash
// such as "sha256:<hex>", or hex).
func validHash(h string) bool { return len(h) <= maxHashBytes && plainKey(h) }

// validContainerID reports whether id matches the provider's container id
// rule: [a-z0-9][a-z0-9_.-]{0,63} without "..".
func validContainerID(id string) bool {
	if id == "" || len(id) > 64 || strings.Contains(id, "..") {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '_' || c == '.' || c == '-')
		if !ok {
			return false
		}
	}
	return true
}

// validPath reports whether p is "" or an absolute, clean path of
// bounded length without NUL.
func validPath(p string) bool {
	return p == "" || len(p) <= maxPathBytes && filepath.IsAbs(p) && filepath.Clean(p) == p && !strings.ContainsRune(p, 0)
}
