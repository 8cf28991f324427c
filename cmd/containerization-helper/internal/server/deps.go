package server

import (
	"context"

	"hostkit.dev/cmd/containerization-helper/internal/state"
	"hostkit.dev/lib/api/helperapi"
)

// The server reaches state, images and capabilities through these small
// interfaces; run.go binds them to packages state, image and capability.
// They say exactly what the ops need, so a test can also see which
// guarantee each op relies on.

// Store is the helper's persistent state: package state's *state.Store
// (project binding, per-instance fences, plan records consumed once,
// idempotency records, container records with phases for crash
// recovery). Every write of the document is durable before it returns;
// plans live in memory only.
type Store interface {
	ProjectID() string
	CheckFence(instance string, n uint64) error
	PutPlan(p state.Plan) error
	Plan(hash string) (state.Plan, error)
	Idem(key, op, requestHash string) ([]byte, bool, error)
	// Apply makes several changes durable in one write (a mutation's
	// fence, plan and in-progress record; its settled record and answer).
	Apply(b state.Batch) (state.Plan, error)
	PutContainer(c state.Container) error
	Reconcile(id string, phase state.Phase) error
	DeleteContainer(id string) error
	Container(id string) (state.Container, bool, error)
	Containers() ([]state.Container, error)
	Recovering() []state.Container
}

// Plan is one confirmed mutation. Its canonical MessagePack encoding
// (keys in bytewise order) is what the store keeps, and the plan hash is
// "sha256:" + the hex SHA-256 of those bytes: the same plan always has the
// same hash, any change to a field changes it, and a record edited on
// disk no longer matches its name.
type Plan struct {
	Command        []string          `msgpack:"command"`         // create: the container's argv
	ContainerID    string            `msgpack:"container_id"`    // the container the plan confirms (create: the id picked)
	Context        helperapi.Context `msgpack:"context"`         // the mutation context the mutation must repeat
	CreatedAt      int64             `msgpack:"created_at"`      // Unix ms
	Env            []string          `msgpack:"env"`             // create: "KEY=value" entries
	ExpiresAt      int64             `msgpack:"expires_at"`      // Unix ms
	Force          bool              `msgpack:"force"`           // delete: stop a running container first
	Kind           string            `msgpack:"kind"`            // helperapi.Kind*
	Layout         string            `msgpack:"layout"`          // create: the image layout's path
	ManifestDigest string            `msgpack:"manifest_digest"` // create: "sha256:" + 64 hex
	Nonce          string            `msgpack:"nonce"`           // 16 random bytes, hex: two equal requests get two plans
	PeerUID        uint32            `msgpack:"peer_uid"`        // the planning peer's uid: only it may carry the plan out
	StopTimeoutMS  int64             `msgpack:"stop_timeout_ms"` // restart, forced delete: ms; 0 = the default
	// Hash is the plan hash; it is not part of what is hashed.
	Hash string `msgpack:"-"`
}

// idemResult is what a stored idempotency record holds: the canonical
// response body, or the error.
type idemResult struct {
	Body  []byte `msgpack:"body"`  // the answer's canonical body, on success
	Code  string `msgpack:"code"`  // the error's code; "" on success
	Msg   string `msgpack:"msg"`   // the error's message (already redacted)
	Retry string `msgpack:"retry"` // the error's retry hint
}

// Images verifies and unpacks local OCI images (package image).
type Images interface {
	// Evidence verifies the layout's manifest and every blob.
	Evidence(ctx context.Context, ref helperapi.ImageRef) (*helperapi.Evidence, error)
	// Unpack verifies the image again and makes bundle (which must not
	// exist) a bundle of it: its own config.json (args, env, terminal
	// false, the annotations, its cgroup) over the image's shared,
	// read-only rootfs (unpacked once per manifest digest).
	Unpack(ctx context.Context, ref helperapi.ImageRef, bundle string, patch BundlePatch) error
}

// BundlePatch is what the helper sets in an unpacked bundle's
// config.json.
type BundlePatch struct {
	Args        []string          // process.args, from the create plan
	Env         []string          // process.env ("KEY=value"), from the create plan; when not nil it replaces the image's
	Annotations map[string]string // the ownership annotations (helperapi.Annotation*)
}

// Snapshot is the active provider's capability snapshot (package
// capability).
type Snapshot interface {
	// Digest is "sha256:" + 64 hex over the snapshot's canonical encoding.
	Digest() string
	// Require fails with capability.unavailable when a capability is
	// missing.
	Require(caps ...string) error
	// Capabilities lists the capabilities, sorted.
	Capabilities() []string
}
