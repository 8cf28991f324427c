package cli

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/peterbourgon/ff/v3/ffcli"
	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/daemon"
	"hostkit.dev/lib/wire"
)

// doctorRow is one daemon's line in `hostctl doctor` (and its JSON form).
type doctorRow struct {
	Daemon   string `json:"daemon"`              // secretd, egressd, supervisord or helper
	Expected bool   `json:"expected"`            // the daemon should be running: unreachable is then a failure
	Socket   string `json:"socket"`              // the API socket's path
	Exists   bool   `json:"exists"`              // something exists at Socket
	Mode     string `json:"mode,omitempty"`      // its permission bits, octal ("0600"), with " (not a socket)" when it is not one
	Owner    string `json:"owner,omitempty"`     // its owner's user name (or uid)
	DirMode  string `json:"dir_mode,omitempty"`  // the socket directory's permission bits, octal
	DirOwner string `json:"dir_owner,omitempty"` // the socket directory's owner
	Lock     string `json:"lock"`                // held, free, missing, unknown
	// HostRuntimeEnabled is supervisord's host_runtime_enabled (nil for
	// other daemons or when unreachable).
	HostRuntimeEnabled *bool `json:"host_runtime_enabled,omitempty"`
	// Nftables is supervisord's start-up probe of the nftables rules
	// isolated instances need: "available", "unavailable" or "unknown"
	// ("" for other daemons or when unreachable); NftablesCode says why
	// when not available (network.nftables_unavailable: isolated
	// instances fail to start).
	Nftables      string         `json:"nftables,omitempty"`
	NftablesCode  string         `json:"nftables_code,omitempty"`  // see Nftables
	NftablesError string         `json:"nftables_error,omitempty"` // the probe's message when not available
	CABundle      string         `json:"ca_bundle,omitempty"`      // egressd's public CA bundle, when present
	Reachable     bool           `json:"reachable"`                // health answered
	Version       string         `json:"version,omitempty"`        // health's version
	Status        string         `json:"status,omitempty"`         // health's status ("ok")
	Epoch         string         `json:"epoch,omitempty"`          // health's epoch: 16 lowercase hex, new at every start
	UptimeMS      int64          `json:"uptime_ms,omitempty"`      // health's uptime, milliseconds
	Health        map[string]any `json:"health,omitempty"`         // the whole health answer
	Error         string         `json:"error,omitempty"`          // why the daemon could not be reached or asked
	Code          string         `json:"code,omitempty"`           // the health call's error code (daemon.unavailable, peer.denied, ...)
}

func doctorCmd(g *globals) *ffcli.Command {
	fs := g.newFlagSet("doctor")
	expect := fs.String("expect", "secretd,egressd,supervisord", "daemons that must be reachable (comma-separated); the on-demand helper is checked but not expected by default")
	return &ffcli.Command{
		Name:       "doctor",
		ShortUsage: "hostctl doctor [-root DIR] [--json] [--expect LIST]",
		ShortHelp:  "check each daemon's socket and health",
		LongHelp:   "Dials every daemon found under -root (or the system defaults) and prints its socket path, mode, owner, whether it answered, its version and health. Exits 5 when an expected daemon is unreachable.",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageError{"doctor takes no arguments"}
			}
			expected := strings.Split(*expect, ",")
			rows := make([]doctorRow, 0, len(daemon.Names))
			for _, name := range daemon.Names {
				rows = append(rows, g.diagnose(ctx, name, slices.Contains(expected, name)))
			}
			var warnings []string
			if l, err := g.layout(); err == nil {
				warnings = setupWarnings(l, rows)
			}
			warnings = append(warnings, nftWarnings(rows)...)
			if err := g.printDoctor(rows, warnings); err != nil {
				return err
			}
			var down []string
			for _, r := range rows {
				if r.Expected && !r.Reachable {
					down = append(down, r.Daemon)
				}
			}
			if len(down) > 0 {
				return exitError{code: ExitUnavailable, msg: "unreachable: " + strings.Join(down, ", ")}
			}
			return nil
		},
	}
}

func (g *globals) diagnose(ctx context.Context, name string, expected bool) doctorRow {
	row := doctorRow{Daemon: name, Expected: expected}
	path, err := g.socket(name)
	if err != nil {
		row.Error = err.Error()
		return row
	}
	row.Socket = path
	row.Lock = lockState(path)
	if m, owner, ok := modeOwner(filepath.Dir(path)); ok {
		row.DirMode, row.DirOwner = fmt.Sprintf("%04o", m.Perm()), owner
	}
	if name == daemon.NameEgressd {
		if l, err := g.layout(); err == nil {
			if p := filepath.Join(l.Public, "egressd-ca.pem"); fileExists(p) {
				row.CABundle = p
			}
		}
	}
	if fi, err := os.Lstat(path); err == nil {
		row.Exists = true
		row.Mode = fmt.Sprintf("%04o", fi.Mode().Perm())
		if fi.Mode()&fs.ModeSocket == 0 {
			row.Mode += " (not a socket)"
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			row.Owner = ownerName(st.Uid)
		}
	}
	c, err := g.client(name)
	if err != nil {
		row.Error = err.Error()
		return row
	}
	defer c.Close()
	h, err := healthapi.GetAll(ctx, c)
	if err != nil {
		row.Code = wire.CodeOf(err)
		row.Error = err.Error()
		return row
	}
	row.Reachable = true
	row.Health = h
	row.Status, _ = h["status"].(string)
	row.Version, _ = h["version"].(string)
	row.Epoch, _ = h["epoch"].(string)
	row.UptimeMS = toInt64(h["uptime_ms"])
	if v, ok := h["host_runtime_enabled"].(bool); ok {
		row.HostRuntimeEnabled = &v
	}
	row.Nftables, _ = h["nftables"].(string)
	row.NftablesCode, _ = h["nftables_code"].(string)
	row.NftablesError, _ = h["nftables_error"].(string)
	return row
}

// nftWarnings warns, for a supervisord whose probe found no nftables,
// that isolated instances cannot start, with the code they fail with.
func nftWarnings(rows []doctorRow) []string {
	var out []string
	for _, r := range rows {
		if r.Nftables == "unavailable" {
			out = append(out, fmt.Sprintf("%s: %s: isolated instances cannot start: transparent egress needs nftables (NF_TABLES, NFT_NAT, NFT_REDIR) in the kernel, loaded or built in (%s)",
				r.Daemon, r.NftablesCode, r.NftablesError))
		}
	}
	return out
}

func toInt64(v any) int64 {
	switch x := v.(type) {
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int64:
		return x
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case uint64:
		return int64(x)
	}
	return 0
}

func ownerName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil {
		return u.Username
	}
	return id
}

func (g *globals) printDoctor(rows []doctorRow, warnings []string) error {
	if g.json {
		if warnings == nil {
			warnings = []string{}
		}
		return writeJSON(g.stdout, map[string]any{"daemons": rows, "warnings": warnings})
	}
	out := make([][]string, 0, len(rows))
	for _, r := range rows {
		reach := "no"
		if r.Reachable {
			reach = "yes"
		}
		health := r.Status
		if r.Reachable {
			health = fmt.Sprintf("%s (epoch %s, up %ds)", r.Status, r.Epoch, r.UptimeMS/1000)
		} else if r.Code != "" {
			health = r.Code
		}
		exp := ""
		if !r.Expected {
			exp = " (optional)"
		}
		out = append(out, []string{r.Daemon + exp, r.Socket, dash(r.Mode), dash(r.Owner), dash(r.Lock), reach, dash(r.Version), dash(health)})
	}
	if err := table(g.stdout, []string{"DAEMON", "SOCKET", "MODE", "OWNER", "LOCK", "REACHABLE", "VERSION", "HEALTH"}, out); err != nil {
		return err
	}
	for _, r := range rows {
		if r.HostRuntimeEnabled != nil {
			fmt.Fprintf(g.stdout, "supervisord host runtime enabled: %v\n", *r.HostRuntimeEnabled)
		}
		if r.Nftables != "" {
			why := ""
			if r.NftablesCode != "" {
				why = " (" + r.NftablesCode + ")"
			}
			fmt.Fprintf(g.stdout, "supervisord nftables for isolated instances: %s%s\n", r.Nftables, why)
		}
		if r.CABundle != "" {
			fmt.Fprintf(g.stdout, "egressd CA bundle: %s\n", r.CABundle)
		}
	}
	for _, w := range warnings {
		fmt.Fprintf(g.stdout, "warning: %s\n", w)
	}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
