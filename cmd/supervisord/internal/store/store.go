// Package store keeps supervisord's instance directories:
// <state>/instances/<id>/ (0700) holding metadata.json (schema-versioned,
// written atomically), agent.env (0600), intent.json (written before each
// spawn), the holder's holder.json and exit.json, and the output log.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

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
)

// Spec is what a holder needs to start an agent: the normalized provision
// request.
type Spec struct {
	Command        []string          `json:"command"`
	Env            map[string]string `json:"env,omitempty"`
	WorkingDir     string            `json:"working_dir"`
	PTY            bool              `json:"pty"`
	Rows           uint16            `json:"rows,omitempty"`
	Cols           uint16            `json:"cols,omitempty"`
	SessionBackend string            `json:"session_backend"`
	Network        string            `json:"network"`
	Allow          []string          `json:"allow,omitempty"`
	AgentUID       int               `json:"agent_uid"` // -1: supervisord's own uid
	StopTimeoutMS  int64             `json:"stop_timeout_ms"`
	LogMaxMB       int               `json:"log_max_mb"`
	LogFiles       int               `json:"log_files"`
	Restart        string            `json:"restart,omitempty"`      // never or on-failure
	MaxRestarts    int               `json:"max_restarts,omitempty"` // consecutive on-failure restarts at most
	ProxySocket    string            `json:"proxy_socket,omitempty"` // network isolated: egressd's proxy.sock, bridged from 127.0.0.1:4750 in the namespace
	Tmux           string            `json:"tmux,omitempty"`         // session_backend tmux: the tmux binary
	TmuxSocket     string            `json:"tmux_socket,omitempty"`  // session_backend tmux: the server's socket
}

// Metadata is metadata.json. Only supervisord writes it.
type Metadata struct {
	SchemaVersion int                  `json:"schema_version"`
	ID            string               `json:"instance_id"`
	RequestDigest string               `json:"request_digest"` // sha256 of the canonical provision request
	Request       api.ProvisionRequest `json:"request"`
	Spec          Spec                 `json:"spec"`
	State         string               `json:"state"`
	Session       string               `json:"session"` // direct or managed
	WatchAgent    string               `json:"watch_agent"`
	Holder        proc.Identity        `json:"holder"`
	Agent         proc.Identity        `json:"agent"`
	PGID          int                  `json:"pgid"`
	Exit          *api.ExitStatus      `json:"exit,omitempty"`
	Egress        *egress.Record       `json:"egress,omitempty"` // the bundle of the current start (nil: never started)
	CreatedAt     int64                `json:"created_at"`
	StartedAt     int64                `json:"started_at,omitempty"`
	ExitedAt      int64                `json:"exited_at,omitempty"`
	UpdatedAt     int64                `json:"updated_at"`
	Restarts      int                  `json:"restarts,omitempty"` // on-failure restarts (from exit.json once ended)
	Intent        *Intent              `json:"intent,omitempty"`   // the last spawn's intent, saved before its holder is assigned
}

// Intent records, before a holder is given an instance, that a spawn was
// attempted, so that a crash between spawn and metadata can be
// reconciled. It is part of the metadata.json written before the spawn
// (older versions wrote it to intent.json).
type Intent struct {
	Nonce     string `json:"nonce"`
	CreatedAt int64  `json:"created_at"`
}

// HolderRecord is holder.json, written by the holder once the agent runs.
type HolderRecord struct {
	Nonce     string        `json:"nonce"`
	Holder    proc.Identity `json:"holder"`
	Agent     proc.Identity `json:"agent"`
	PGID      int           `json:"pgid"`
	StartedAt int64         `json:"started_at"`
}

// ExitRecord is exit.json, written by the holder once the leader is reaped
// and no descendant remains.
type ExitRecord struct {
	Exit     api.ExitStatus `json:"exit"`
	Stopped  bool           `json:"stopped"` // the end came from a stop request
	Killed   int            `json:"killed"`  // processes the freeze-and-kill took
	ExitedAt int64          `json:"exited_at"`
	Restarts int            `json:"restarts,omitempty"` // on-failure restarts the holder made
}

// Store is the instances directory.
type Store struct{ Root string }

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

// SaveAtomic writes metadata.json atomically without fsync (see
// WriteJSONAtomic); SyncAll makes it durable.
func (s Store) SaveAtomic(m *Metadata) error {
	m.SchemaVersion = SchemaVersion
	return WriteJSONAtomic(s.Path(m.ID, FileMetadata), m)
}
