// Package store keeps supervisord's instance directories:
// <state>/instances/<id>/ (0700) holding metadata.json (schema-versioned,
// written atomically, with the intent of the operation in progress),
// agent.env (0600), the holder's holder.json and exit.json, and the output
// log; and supervisord's owner id (<state>/owner). A directory being
// removed is first renamed to <state>/instances/.trash-<id>-<nonce>.
package store

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"hostkit.dev/cmd/supervisord/internal/egress"
	"hostkit.dev/cmd/supervisord/internal/proc"
	api "hostkit.dev/lib/api/supervisordapi"
)

// SchemaVersion is metadata.json's schema version.
const SchemaVersion = 1

// File names inside an instance directory.
const (
	FileMetadata  = "metadata.json"
	FileAgentEnv  = "agent.env"
	FileIntent    = "intent.json" // read only: older versions wrote the intent here, now Metadata.Intent
	FileHolder    = "holder.json" // written by the holder once the agent started
	FileExit      = "exit.json"   // written by the holder when the tree is gone
	FileLog       = "output.log"  // rotated as output-<time>.log by lumberjack
	FileHolderErr = "holder.err"  // the holder's own stderr
	// FileDNSRefusedPrefix names the resolver's refusal reports of a
	// network isolated instance, dns-refused-<unix ns>.json (netns.RefusalReport,
	// written by the holder at most once a second, removed by supervisord once
	// audited).
	FileDNSRefusedPrefix = "dns-refused-"
)

// Spec is what a holder needs to start an agent: the normalized provision
// request.
type Spec struct {
	Command        []string          `json:"command"`                   // the agent's argv, as requested
	Env            map[string]string `json:"env,omitempty"`             // not written by this version: the agent's environment is agent.env
	WorkingDir     string            `json:"working_dir"`               // absolute: the request's, or -default-working-dir; "" for a container
	PTY            bool              `json:"pty"`                       // the agent runs on a pseudo-terminal
	Rows           uint16            `json:"rows,omitempty"`            // PTY lines at start (the default applied)
	Cols           uint16            `json:"cols,omitempty"`            // PTY columns at start (the default applied)
	SessionBackend string            `json:"session_backend"`           // native or tmux; "" for a container
	Network        string            `json:"network"`                   // isolated, host (a host instance's mode, resolved at provision: never re-read from the flag) or none (container)
	Allow          []string          `json:"allow,omitempty"`           // the request's network.allow origins (every method), registered with the bundle
	AgentUID       int               `json:"agent_uid"`                 // -1: supervisord's own uid
	StopTimeoutMS  int64             `json:"stop_timeout_ms"`           // ms a stop waits after SIGTERM (the default applied)
	LogMaxMB       int               `json:"log_max_mb"`                // -log-max-mb: output log size per file, MiB (at least 1)
	LogFiles       int               `json:"log_files"`                 // -log-files: output log files kept, the current one included (at least 1)
	Restart        string            `json:"restart,omitempty"`         // never or on-failure
	MaxRestarts    int               `json:"max_restarts,omitempty"`    // consecutive on-failure restarts at most
	ProxySocket    string            `json:"proxy_socket,omitempty"`    // network isolated: egressd's proxy.sock, bridged from 127.0.0.1:4750 in the namespace
	SyntheticNames int               `json:"synthetic_names,omitempty"` // network isolated: names the resolver answers for (0: netns.DefaultMaxNames)
	Destinations   []string          `json:"destinations,omitempty"`    // network isolated: the origins of the staged credentials' destinations, which the resolver answers for too
	Tmux           string            `json:"tmux,omitempty"`            // session_backend tmux: the tmux binary
	TmuxSocket     string            `json:"tmux_socket,omitempty"`     // session_backend tmux: the server's socket
}

// Metadata is metadata.json. Only supervisord writes it.
type Metadata struct {
	SchemaVersion int                  `json:"schema_version"`       // SchemaVersion; another value is left alone (instance.unreadable)
	ID            string               `json:"instance_id"`          // canonical lowercase UUID, the directory's name
	RequestDigest string               `json:"request_digest"`       // sha256 of the canonical provision request
	Request       api.ProvisionRequest `json:"request"`              // the provision request as normalized (defaults applied; network as sent)
	Spec          Spec                 `json:"spec"`                 // what the holder starts the agent with
	State         string               `json:"state"`                // the recorded state (api.State*); status may show a live one
	Session       string               `json:"session"`              // direct or managed
	WatchAgent    string               `json:"watch_agent"`          // host-<first 8 hex of the id> (api.WatchAgent)
	Holder        proc.Identity        `json:"holder"`               // the holder serving the instance; zero before it started
	Agent         proc.Identity        `json:"agent"`                // the agent leader as last recorded (holder.json); zero before it started
	PGID          int                  `json:"pgid"`                 // the agent's process group id; 0 before it started
	Exit          *api.ExitStatus      `json:"exit,omitempty"`       // how the tree ended (from exit.json); nil while it runs
	Egress        *egress.Record       `json:"egress,omitempty"`     // the bundle of the current start (nil: never started)
	CreatedAt     int64                `json:"created_at"`           // Unix ms of the provision
	StartedAt     int64                `json:"started_at,omitempty"` // Unix ms the agent started; 0 before
	ExitedAt      int64                `json:"exited_at,omitempty"`  // Unix ms the tree ended; 0 while it runs
	UpdatedAt     int64                `json:"updated_at"`           // Unix ms of this write
	Restarts      int                  `json:"restarts,omitempty"`   // on-failure restarts (from exit.json once ended)
	Intent        *Intent              `json:"intent,omitempty"`     // the operation in progress (nil: none)
}

// Ops of an Intent.
const (
	// OpProvision: the instance is being made. Written, durably, before
	// the first lease is staged; cleared in the write that records the
	// agent running (or, without start, the finished record). Reconcile
	// finishes it when the agent was started (a holder took the
	// instance) and undoes it otherwise: leases revoked, bundle dropped,
	// directory removed.
	OpProvision = "provision"
	// OpStop: the instance's tree is being stopped and its bundle
	// released. Reconcile finishes it.
	OpStop = "stop"
	// OpDestroy: the instance is being destroyed. Reconcile finishes it:
	// the tree stopped, the bundle and leases released, the directory
	// removed.
	OpDestroy = "destroy"
)

// Intent is the durable record of a multi-step operation on an instance,
// written in metadata.json before the operation's first step that
// reaches outside the directory, so that a crash of supervisord at any
// step leaves something reconcile finishes or undoes (docs/supervisord.md,
// "Durability" and "Restart"). Records of older versions carry only
// Nonce and CreatedAt (Op ""): a spawn was attempted.
type Intent struct {
	Op        string `json:"op,omitempty"` // OpProvision, OpStop, OpDestroy; "" = an older version's spawn intent
	Nonce     string `json:"nonce"`        // random; the holder echoes it in holder.json
	CreatedAt int64  `json:"created_at"`   // Unix ms
	// Owner and Invocation name what the operation stages and registers
	// outside supervisord: leases at secretd and a bundle at egressd,
	// both under Invocation (the instance id) and Owner (supervisord's
	// owner id, store.LoadOwner).
	Owner       string   `json:"owner,omitempty"`
	Invocation  string   `json:"invocation,omitempty"`  // see Owner
	Credentials []string `json:"credentials,omitempty"` // credential names to stage, in request order
	Bundle      bool     `json:"bundle,omitempty"`      // a bundle is to be registered for Invocation
	// Holder is the holder given the instance, recorded before the
	// assignment is sent: a holder still starting when supervisord
	// restarts is waited for by its identity, never mistaken for none.
	Holder *proc.Identity `json:"holder,omitempty"`
}

// HolderRecord is holder.json, written by the holder once the agent runs.
type HolderRecord struct {
	Nonce     string        `json:"nonce"`      // the assignment's nonce (Intent.Nonce): this start's record, not an earlier one's
	Holder    proc.Identity `json:"holder"`     // the holder itself
	Agent     proc.Identity `json:"agent"`      // the agent leader it started
	PGID      int           `json:"pgid"`       // the agent's process group id (its session's)
	StartedAt int64         `json:"started_at"` // Unix ms the agent started
}

// ExitRecord is exit.json, written by the holder once the leader is reaped
// and no descendant remains.
type ExitRecord struct {
	Exit     api.ExitStatus `json:"exit"`               // how the leader ended; Unknown when it was not observed
	Stopped  bool           `json:"stopped"`            // the end came from a stop request
	Killed   int            `json:"killed"`             // processes the freeze-and-kill took
	ExitedAt int64          `json:"exited_at"`          // Unix ms the tree was found empty
	Restarts int            `json:"restarts,omitempty"` // on-failure restarts the holder made
}

// Store is the instances directory.
type Store struct {
	Root string // the instances directory, <state>/supervisord/instances
}

// Dir is instance id's directory.
func (s Store) Dir(id string) string { return filepath.Join(s.Root, id) }

// Path is a file of instance id.
func (s Store) Path(id, name string) string { return filepath.Join(s.Root, id, name) }

// Init makes the instances directory (0700).
func (s Store) Init() error {
	if err := os.MkdirAll(s.Root, 0o700); err != nil {
		return err
	}
	return os.Chmod(s.Root, 0o700)
}

// Create makes instance id's directory with O_EXCL semantics (mkdir):
// os.ErrExist when it already exists.
func (s Store) Create(id string) error {
	if err := os.Mkdir(s.Dir(id), 0o700); err != nil {
		return err
	}
	return os.Chmod(s.Dir(id), 0o700)
}

// IDs lists instance directories, sorted.
func (s Store) IDs() ([]string, error) {
	ents, err := os.ReadDir(s.Root)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() {
			if _, err := api.CanonicalID(e.Name()); err == nil {
				ids = append(ids, e.Name())
			}
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// ReadJSON reads file name of instance id into v. os.ErrNotExist when
// missing.
func (s Store) ReadJSON(id, name string, v any) error {
	b, err := os.ReadFile(s.Path(id, name))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("store: %s of %s: %w", name, id, err)
	}
	return nil
}

// Load reads metadata.json and checks its schema version.
func (s Store) Load(id string) (*Metadata, error) {
	var m Metadata
	if err := s.ReadJSON(id, FileMetadata, &m); err != nil {
		return nil, err
	}
	if m.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("store: %s: metadata schema %d, want %d", id, m.SchemaVersion, SchemaVersion)
	}
	return &m, nil
}

// Save writes metadata.json atomically and durably.
func (s Store) Save(m *Metadata) error {
	m.SchemaVersion = SchemaVersion
	return WriteJSON(s.Path(m.ID, FileMetadata), m)
}

// SaveIntent writes metadata.json atomically and makes it durable with
// its directory entries (the file, the instance directory and the
// instances directory, fsynced at once): an intent must survive a host
// crash before its operation reaches outside supervisord.
func (s Store) SaveIntent(m *Metadata) error {
	if err := s.SaveAtomic(m); err != nil {
		return err
	}
	return SyncAll(s.Path(m.ID, FileMetadata), s.Dir(m.ID), s.Root)
}

// TrashPrefix starts the name of an instance directory being removed.
const TrashPrefix = ".trash-"

// Trash moves instance id's directory out of the instance namespace, to
// a TrashPrefix name in the instances directory, in one atomic step made
// durable, and returns its new path ("" when there was no directory).
// The caller deletes it; a crash before that leaves it in the trash,
// which reconcile empties, never a half-deleted instance under its id.
func (s Store) Trash(id string) (string, error) {
	trash := filepath.Join(s.Root, TrashPrefix+id+"-"+randHex(6))
	if err := os.Rename(s.Dir(id), trash); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", nil
		}
		return "", err
	}
	return trash, SyncAll(s.Root)
}

// Entry is one entry of the instances directory.
type Entry struct {
	Name  string // the entry's file name
	ID    string // the canonical instance id, or "" when Name is none
	Dir   bool   // the entry is a directory (a symlink to one is not)
	Trash bool   // a directory being removed (TrashPrefix)
}

// Entries lists the instances directory, sorted by name.
func (s Store) Entries() ([]Entry, error) {
	ents, err := os.ReadDir(s.Root)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	out := make([]Entry, 0, len(ents))
	for _, e := range ents {
		en := Entry{Name: e.Name(), Dir: e.IsDir(), Trash: strings.HasPrefix(e.Name(), TrashPrefix)}
		if id, err := api.CanonicalID(e.Name()); err == nil && id == e.Name() {
			en.ID = id
		}
		out = append(out, en)
	}
	return out, nil
}

// SaveAtomic writes metadata.json atomically without fsync (see
// WriteJSONAtomic); SyncAll makes it durable.
func (s Store) SaveAtomic(m *Metadata) error {
	m.SchemaVersion = SchemaVersion
	return WriteJSONAtomic(s.Path(m.ID, FileMetadata), m)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
