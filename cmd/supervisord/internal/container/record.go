// Package container is supervisord's runtime container
// (docs/supervisord.md, "runtime: container"): it creates, starts, observes,
// stops and deletes one container per instance through the
// containerization-helper's socket (lib/api/helperapi). supervisord never
// runs a container runtime itself, and a container request is never run
// as a host process: when the helper cannot be reached or refuses, every
// operation fails closed with runtime.unavailable.
//
// Each instance keeps its container's record in its instance directory
// (container.json, next to metadata.json): the helper's project id, the
// capability digest and fence it planned with, the container id, the
// steps done and the mutation in flight (its plan hash and idempotency
// key), so that a crash of supervisord at any point is resolved by
// replaying that mutation with the same key and body (the helper answers
// it once, and again the same way) or, failing that, by observing.
package container

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"hostkit.dev/cmd/supervisord/internal/store"
)

// File names in an instance directory.
const (
	// FileRecord is the container record (Record, JSON, written
	// atomically and durably).
	FileRecord = "container.json"
	// FileLog is the instance's output log (store.FileLog): a stop keeps
	// the container's console log there (the delete answer's log tail,
	// or the copy taken before the delete).
	FileLog = store.FileLog
)

// RecordSchema is container.json's schema version.
const RecordSchema = 1

// Steps of a container instance, in order. Each is one plan-confirmed
// helper mutation.
const (
	StepCreate = "create"
	StepStart  = "start"
	StepDelete = "delete"
)

// Record is container.json: what supervisord knows of an instance's
// container. Only the manager writes it, under the instance lock.
type Record struct {
	SchemaVersion int    `json:"schema_version"`       // RecordSchema
	ProjectID     string `json:"project_id,omitempty"` // the helper's project the container belongs to (set at the first negotiate)
	// Fence is the instance's fence generation (≥ 1): 1 at provision,
	// raised by one each time a supervisord process re-adopts the
	// instance (Readopt), so a mutation planned by an earlier process is
	// refused (fence.stale) once the new one has mutated.
	Fence       uint64   `json:"fence"`
	ContainerID string   `json:"container_id,omitempty"` // the helper's id ("hk-" + 16 hex); "" before the create plan chose it
	PID         int64    `json:"pid,omitempty"`          // host pid of the container's init when it was started
	Done        []string `json:"done,omitempty"`         // steps carried out (Step*)
	Attempts    int      `json:"attempts,omitempty"`     // plans made in all: part of each idempotency key
	Pending     *Pending `json:"pending,omitempty"`      // the mutation in flight, saved before it is sent
	LogSaved    bool     `json:"log_saved,omitempty"`    // the console log was copied to FileLog (before or by the delete)
	CreatedAt   int64    `json:"created_at,omitempty"`   // Unix ms, from the helper
	KeyGen      string   `json:"key_gen,omitempty"`      // 6 random hex digits in every idempotency key of this record ("" in older records)
}

// Pending is a mutation that was sent (or was about to be) and whose
// answer supervisord has not recorded: replayed with the same key and
// body, it gets the helper's stored answer, or is carried out now.
type Pending struct {
	Step             string `json:"step"`              // Step*: the step the mutation carries out
	Op               string `json:"op"`                // the helper op (helperapi.OpCreate, OpStart, OpDelete)
	Idem             string `json:"idem"`              // the idempotency key sent: sv-<instance>-<KeyGen>-<step>-<Attempts> (older records: no KeyGen part)
	ContainerID      string `json:"container_id"`      // helperapi.MutationRequest.ContainerID
	PlanHash         string `json:"plan_hash"`         // "sha256:" + 64 hex, from container.plan
	ProjectID        string `json:"project_id"`        // the mutation context's project (helperapi.Context)
	CapabilityDigest string `json:"capability_digest"` // the mutation context's capability digest
	Fence            uint64 `json:"fence"`             // the mutation context's fence
}

// done reports whether step was carried out.
func (r *Record) done(step string) bool { return slices.Contains(r.Done, step) }

// Created reports whether the container was created.
func (r *Record) Created() bool { return r.done(StepCreate) }

// Started reports whether the container was started.
func (r *Record) Started() bool { return r.done(StepStart) }

// Deleted reports whether the container was deleted (stop, destroy or a
// failed provision's clean-up).
func (r *Record) Deleted() bool { return r.done(StepDelete) }

// LoadRecord reads dir's container.json. os.ErrNotExist when missing.
func LoadRecord(dir string) (*Record, error) {
	b, err := os.ReadFile(filepath.Join(dir, FileRecord))
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("container: %s: %w", FileRecord, err)
	}
	if r.SchemaVersion != RecordSchema {
		return nil, fmt.Errorf("container: %s: schema %d, want %d", FileRecord, r.SchemaVersion, RecordSchema)
	}
	return &r, nil
}

// Save writes r to dir's container.json atomically and durably: it is
// written before every mutation is sent, so a crash leaves the mutation
// to replay.
func (r *Record) Save(dir string) error {
	r.SchemaVersion = RecordSchema
	return store.WriteJSON(filepath.Join(dir, FileRecord), r)
}
