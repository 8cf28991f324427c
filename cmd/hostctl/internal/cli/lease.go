package cli

import (
	"context"
	"fmt"

	"github.com/peterbourgon/ff/v3/ffcli"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/daemon"
)

// leaseCmd is `hostctl lease list|revoke`: secretd's staged leases.
func leaseCmd(g *globals) *ffcli.Command {
	return &ffcli.Command{
		Name:        "lease",
		ShortUsage:  "hostctl lease <list|revoke> ...",
		ShortHelp:   "inspect and revoke one-shot leases staged at secretd",
		FlagSet:     g.newFlagSet("lease"),
		Subcommands: []*ffcli.Command{leaseListCmd(g), leaseRevokeCmd(g)},
		Exec:        groupExec("lease"),
	}
}

func leaseListCmd(g *globals) *ffcli.Command {
	fs := g.newFlagSet("lease list")
	inv := fs.String("invocation", "", "only the leases of this invocation")
	return &ffcli.Command{
		Name:       "list",
		ShortUsage: "hostctl lease list [--invocation ID] [--json]",
		ShortHelp:  "list staged, unexpired leases (metadata and handle fingerprints only)",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageError{"lease list takes no arguments"}
			}
			c, err := g.client(daemon.NameSecretd)
			if err != nil {
				return err
			}
			defer c.Close()
			out, err := secretdapi.NewClient(c).LeaseList(ctx, *inv)
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, leasesJSON(out.Leases))
			}
			rows := make([][]string, 0, len(out.Leases))
			for _, l := range out.Leases {
				rows = append(rows, []string{l.Invocation, l.Credential, l.Destination, l.Target, l.HandleFP,
					fmt.Sprint(l.StagerUID), msTime(l.StagedAt), msTime(l.ExpiresAt)})
			}
			return table(g.stdout, []string{"INVOCATION", "CREDENTIAL", "DESTINATION", "TARGET", "HANDLE_FP", "STAGER_UID", "STAGED", "EXPIRES"}, rows)
		},
	}
}

// leaseJSON is one lease in `lease list --json`.
type leaseJSON struct {
	Invocation  string `json:"invocation"`    // the invocation the lease is bound to
	Credential  string `json:"credential"`    // the credential's name
	Destination string `json:"destination"`   // the canonical origin the lease allows
	Target      string `json:"target"`        // the target the lease allows
	HandleFP    string `json:"handle_fp"`     // 12 hex characters naming the handle without revealing it
	Placeholder string `json:"placeholder"`   // the lease's placeholder (not a secret)
	StagerUID   uint32 `json:"stager_uid"`    // the staging peer's uid
	StagedAt    int64  `json:"staged_at_ms"`  // Unix ms
	ExpiresAt   int64  `json:"expires_at_ms"` // Unix ms
}

func leasesJSON(ls []secretdapi.LeaseMeta) map[string]any {
	out := make([]leaseJSON, 0, len(ls))
	for _, l := range ls {
		out = append(out, leaseJSON{Invocation: l.Invocation, Credential: l.Credential, Destination: l.Destination,
			Target: l.Target, HandleFP: l.HandleFP, Placeholder: l.Placeholder, StagerUID: l.StagerUID,
			StagedAt: l.StagedAt, ExpiresAt: l.ExpiresAt})
	}
	return map[string]any{"leases": out}
}

func leaseRevokeCmd(g *globals) *ffcli.Command {
	fs := g.newFlagSet("lease revoke")
	inv := fs.String("invocation", "", "the invocation whose unconsumed leases to revoke (required)")
	return &ffcli.Command{
		Name:       "revoke",
		ShortUsage: "hostctl lease revoke --invocation ID",
		ShortHelp:  "revoke every unconsumed lease of an invocation (their values are zeroed)",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 || *inv == "" {
				return usageError{"lease revoke needs --invocation ID and no arguments"}
			}
			c, err := g.client(daemon.NameSecretd)
			if err != nil {
				return err
			}
			defer c.Close()
			out, err := secretdapi.NewClient(c).LeaseRevoke(ctx, *inv)
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, map[string]any{"invocation": *inv, "revoked": out.Revoked})
			}
			_, err = fmt.Fprintf(g.stdout, "revoked %d lease(s) of %s\n", out.Revoked, *inv)
			return err
		},
	}
}
