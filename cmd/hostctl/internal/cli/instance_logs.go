package cli

import (
	"context"
	"encoding/json"
	"io"

	"github.com/peterbourgon/ff/v3/ffcli"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

func instanceLogsCmd(g *globals) *ffcli.Command {
	fs := g.newFlagSet("instance logs")
	follow := fs.Bool("f", false, "follow: print output as it arrives, until the instance ends or Ctrl-C")
	lines := fs.Int("n", 0, "print only the last N lines of the tail (0 = the whole tail, at most 64 KiB)")
	return &ffcli.Command{
		Name:       "logs",
		ShortUsage: "hostctl instance logs ID [-f] [-n N] [--json]",
		ShortHelp:  "print an instance's output log",
		LongHelp:   "With --json, prints {\"data\": ...}; with -f and --json, one JSON object per line: {\"data\": ...} as output arrives and {\"exit\": status} at the end.",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			id, err := oneArg(fs, args, "instance logs", "an instance ID")
			if err != nil {
				return err
			}
			if *lines < 0 {
				return usageError{"-n must be 0 or more"}
			}
			c, done, err := g.supervisord()
			if err != nil {
				return err
			}
			defer done()
			if !*follow {
				l, err := c.Logs(ctx, &api.LogsRequest{InstanceID: id})
				if err != nil {
					return err
				}
				data := lastLines(l.Data, *lines)
				if g.json {
					return writeJSON(g.stdout, map[string]string{"data": string(data)})
				}
				_, err = g.stdout.Write(data)
				return err
			}
			return g.followLogs(ctx, c, id, *lines)
		},
	}
}

// followLogs prints the tail (its last n lines when n > 0), then output as
// it arrives, until an exit frame, an error frame or ctx ends.
func (g *globals) followLogs(ctx context.Context, c *api.Client, id string, n int) error {
	st, err := c.FollowLogs(ctx, &api.LogsRequest{InstanceID: id})
	if err != nil {
		return err
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { st.Close() })
	defer stop()
	first := true
	for {
		f, err := st.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return nil // Ctrl-C
			}
			if wire.CodeOf(err) == wire.CodeStreamClosed || err == io.EOF {
				return nil
			}
			return err
		}
		switch f.T {
		case wire.StreamData:
			b := f.B
			if first {
				b = lastLines(b, n)
			}
			first = false
			if g.json {
				err = writeJSONLine(g.stdout, map[string]string{"data": string(b)})
			} else {
				_, err = g.stdout.Write(b)
			}
			if err != nil {
				return err
			}
		case wire.StreamExit:
			if g.json {
				return writeJSONLine(g.stdout, map[string]int64{"exit": f.Status})
			}
			return nil
		case wire.StreamError:
			return wire.Errorf(f.Code, "%s", f.Msg)
		case wire.StreamDetach, wire.StreamEOF:
			return nil
		}
	}
}

// writeJSONLine prints v as one line of JSON.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// lastLines returns the last n lines of b (all of b when n <= 0).
func lastLines(b []byte, n int) []byte {
	if n <= 0 {
		return b
	}
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if b[i] == '\n' {
			n--
			if n == 0 {
				return b[i+1:]
			}
		}
	}
	return b
}
