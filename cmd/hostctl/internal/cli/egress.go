package cli

import (
	"context"
	"fmt"

	"github.com/peterbourgon/ff/v3/ffcli"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/daemon"
)

// egressCmd is `hostctl egress stats|info`: egressd's accounting and its
// proxy coordinates.
func egressCmd(g *globals) *ffcli.Command {
	return &ffcli.Command{
		Name:        "egress",
		ShortUsage:  "hostctl egress <stats|info> ...",
		ShortHelp:   "egressd's per-invocation byte counts and proxy coordinates",
		FlagSet:     g.newFlagSet("egress"),
		Subcommands: []*ffcli.Command{egressStatsCmd(g), egressInfoCmd(g)},
		Exec:        groupExec("egress"),
	}
}

// egressStatsJSON is one invocation in `egress stats --json`.
type egressStatsJSON struct {
	Invocation         string `json:"invocation"`           // the bundle's invocation id
	NetworkEgressBytes uint64 `json:"network_egress_bytes"` // outbound request bytes as sent (line, headers, body)
	// NetworkIngressBytes counts answer body bytes passed on, open
	// streams' included.
	NetworkIngressBytes uint64 `json:"network_ingress_bytes"`
	Requests            uint64 `json:"requests"` // requests sent upstream
	Refused             uint64 `json:"refused"`  // requests refused
}

func egressStatsCmd(g *globals) *ffcli.Command {
	fs := g.newFlagSet("egress stats")
	inv := fs.String("invocation", "", "only this invocation")
	return &ffcli.Command{
		Name:       "stats",
		ShortUsage: "hostctl egress stats [--invocation ID] [--json]",
		ShortHelp:  "outbound request bytes (network_egress_bytes), answer bytes passed on (network_ingress_bytes, open streams' as they pass), requests sent and refused, per invocation",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageError{"egress stats takes no arguments"}
			}
			c, err := g.client(daemon.NameEgressd)
			if err != nil {
				return err
			}
			defer c.Close()
			out, err := egressdapi.NewClient(c).Stats(ctx, *inv)
			if err != nil {
				return err
			}
			list := make([]egressStatsJSON, 0, len(out.Invocations))
			rows := make([][]string, 0, len(out.Invocations))
			for _, s := range out.Invocations {
				list = append(list, egressStatsJSON{s.Invocation, s.NetworkEgressBytes, s.NetworkIngressBytes, s.Requests, s.Refused})
				rows = append(rows, []string{s.Invocation, fmt.Sprint(s.NetworkEgressBytes), fmt.Sprint(s.NetworkIngressBytes), fmt.Sprint(s.Requests), fmt.Sprint(s.Refused)})
			}
			if g.json {
				return writeJSON(g.stdout, map[string]any{"invocations": list})
			}
			return table(g.stdout, []string{"INVOCATION", "EGRESS_BYTES", "INGRESS_BYTES", "REQUESTS", "REFUSED"}, rows)
		},
	}
}

func egressInfoCmd(g *globals) *ffcli.Command {
	return &ffcli.Command{
		Name:       "info",
		ShortUsage: "hostctl egress info [--json]",
		ShortHelp:  "egressd's epoch, proxy address, proxy socket and public CA bundle (stager role)",
		FlagSet:    g.newFlagSet("egress info"),
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageError{"egress info takes no arguments"}
			}
			c, err := g.client(daemon.NameEgressd)
			if err != nil {
				return err
			}
			defer c.Close()
			out, err := egressdapi.NewClient(c).Info(ctx)
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, map[string]string{"epoch": out.Epoch, "proxy_address": out.ProxyAddress,
					"proxy_socket": out.ProxySocket, "ca_bundle_path": out.CABundlePath})
			}
			return table(g.stdout, []string{"EPOCH", "PROXY_ADDRESS", "PROXY_SOCKET", "CA_BUNDLE"},
				[][]string{{out.Epoch, out.ProxyAddress, out.ProxySocket, out.CABundlePath}})
		},
	}
}
