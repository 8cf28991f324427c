package cli

import (
	"fmt"
	"strings"

	api "hostkit.dev/lib/api/supervisordapi"
)

// instanceJSON is an instance in --json output: supervisordapi.Instance's
// fields (whose comments give the detail), times suffixed _ms.
type instanceJSON struct {
	InstanceID     string            `json:"instance_id"`             // canonical lowercase UUID
	Name           string            `json:"name,omitempty"`          // the request's name
	State          string            `json:"state"`                   // supervisordapi.State*
	Command        []string          `json:"command"`                 // the agent's argv
	Runtime        string            `json:"runtime"`                 // host or container
	ContainerID    string            `json:"container_id,omitempty"`  // runtime container: the helper's container id
	Image          *imageJSON        `json:"image,omitempty"`         // runtime container: the image it runs
	Network        string            `json:"network"`                 // isolated, host or none
	PID            int64             `json:"pid,omitempty"`           // the agent leader's pid
	PGID           int64             `json:"pgid,omitempty"`          // the agent's process group id
	AgentUID       uint32            `json:"agent_uid"`               // the uid the agent runs as
	Isolated       bool              `json:"isolated"`                // the agent runs under a uid of its own
	PTY            bool              `json:"pty"`                     // the agent runs on a pseudo-terminal
	SessionBackend string            `json:"session_backend"`         // native or tmux
	Session        string            `json:"session"`                 // direct or managed
	WorkingDir     string            `json:"working_dir"`             // the agent's working directory
	WatchAgent     string            `json:"watch_agent"`             // host-<first 8 hex of the id>
	Labels         map[string]string `json:"labels,omitempty"`        // the request's labels
	Loadout        string            `json:"loadout,omitempty"`       // the request's loadout
	Profile        string            `json:"profile,omitempty"`       // the request's profile
	StopTimeoutMS  int64             `json:"stop_timeout_ms"`         // ms a stop waits after SIGTERM
	Exit           *exitJSON         `json:"exit,omitempty"`          // how the leader ended; absent while it runs
	CreatedAt      int64             `json:"created_at_ms"`           // Unix ms
	StartedAt      int64             `json:"started_at_ms,omitempty"` // Unix ms
	ExitedAt       int64             `json:"exited_at_ms,omitempty"`  // Unix ms
	BootID         string            `json:"boot_id,omitempty"`       // the kernel boot id the agent started in
	Warning        string            `json:"warning,omitempty"`       // "; "-joined warnings (network host, not isolated, egress)
}

// imageJSON is a container instance's image: a local OCI layout and the
// manifest digest it was verified against.
type imageJSON struct {
	Layout         string `json:"layout"`          // absolute path of the OCI image layout
	ManifestDigest string `json:"manifest_digest"` // "sha256:" + 64 lowercase hex
}

// exitJSON is supervisordapi.ExitStatus.
type exitJSON struct {
	Code    int64  `json:"code"`              // exit code, when Signal is ""
	Signal  string `json:"signal,omitempty"`  // terminating signal name, e.g. SIGKILL
	Unknown bool   `json:"unknown,omitempty"` // the end was not observed
}

func toInstanceJSON(in *api.Instance) instanceJSON {
	out := instanceJSON{InstanceID: in.InstanceID, Name: in.Name, State: in.State, Command: in.Command, Runtime: in.Runtime,
		Network: in.Network, PID: in.PID, PGID: in.PGID, AgentUID: in.AgentUID, Isolated: in.Isolated, PTY: in.PTY,
		SessionBackend: in.SessionBackend, Session: in.Session, WorkingDir: in.WorkingDir, WatchAgent: in.WatchAgent,
		Labels: in.Labels, Loadout: in.Loadout, Profile: in.Profile, StopTimeoutMS: in.StopTimeoutMS,
		CreatedAt: in.CreatedAt, StartedAt: in.StartedAt, ExitedAt: in.ExitedAt, BootID: in.BootID, Warning: in.Warning}
	out.ContainerID = in.ContainerID
	if in.Image != nil {
		out.Image = &imageJSON{Layout: in.Image.Layout, ManifestDigest: in.Image.ManifestDigest}
	}
	if in.Exit != nil {
		out.Exit = &exitJSON{Code: in.Exit.Code, Signal: in.Exit.Signal, Unknown: in.Exit.Unknown}
	}
	return out
}

// exitString renders an exit status: "0", "SIGKILL", "unknown".
func exitString(e *api.ExitStatus) string {
	switch {
	case e == nil:
		return "-"
	case e.Unknown:
		return "unknown"
	case e.Signal != "":
		return e.Signal
	}
	return fmt.Sprint(e.Code)
}

// printInstance prints one instance as key: value lines (or JSON).
func (g *globals) printInstance(in *api.Instance) error {
	if g.json {
		return writeJSON(g.stdout, toInstanceJSON(in))
	}
	rows := [][]string{
		{"id", in.InstanceID}, {"name", in.Name}, {"state", in.State}, {"command", strings.Join(in.Command, " ")},
		{"runtime", in.Runtime}, {"pid", pidStr(in.PID)},
	}
	if in.Runtime == api.RuntimeContainer {
		// No agent uid or session: the container's init runs under the
		// helper, and its output is the console log (docs/supervisord.md).
		image := "-"
		if in.Image != nil {
			image = in.Image.Layout + "@" + in.Image.ManifestDigest
		}
		rows = append(rows, []string{"container id", in.ContainerID}, []string{"image", image}, []string{"network", in.Network})
	} else {
		rows = append(rows, []string{"agent uid", fmt.Sprint(in.AgentUID)}, []string{"network", in.Network},
			[]string{"session", in.SessionBackend + " (" + in.Session + ")"}, []string{"pty", fmt.Sprint(in.PTY)})
	}
	rows = append(rows, []string{"working dir", in.WorkingDir}, []string{"watch agent", in.WatchAgent},
		[]string{"created", msTime(in.CreatedAt)}, []string{"started", msTime(in.StartedAt)})
	if in.Exit != nil {
		rows = append(rows, []string{"exit", exitString(in.Exit)}, []string{"exited", msTime(in.ExitedAt)})
	}
	for _, r := range rows {
		if _, err := fmt.Fprintf(g.stdout, "%-13s %s\n", r[0]+":", r[1]); err != nil {
			return err
		}
	}
	if in.State == api.StateCredsLost {
		fmt.Fprintln(g.stderr, "warning: egressd restarted and lost this instance's credentials; re-provision it")
	}
	if in.Warning != "" {
		fmt.Fprintf(g.stderr, "warning: %s\n", in.Warning)
	}
	return nil
}
