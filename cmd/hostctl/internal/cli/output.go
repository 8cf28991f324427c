package cli

import (
	"encoding/json"
	"io"
	"text/tabwriter"

	"github.com/vmihailenco/msgpack/v5"
	"hostkit.dev/lib/wire"
)

// writeJSON prints v as indented JSON with a trailing newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table prints rows under a header, columns aligned with two spaces.
func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, h := range header {
		if i > 0 {
			io.WriteString(tw, "\t")
		}
		io.WriteString(tw, h)
	}
	io.WriteString(tw, "\n")
	for _, r := range rows {
		for i, c := range r {
			if i > 0 {
				io.WriteString(tw, "\t")
			}
			io.WriteString(tw, c)
		}
		io.WriteString(tw, "\n")
	}
	return tw.Flush()
}

// writeWireJSON writes a wire body (a struct with msgpack tags) as
// indented JSON under its wire field names, so `--json` and the socket
// API name fields alike.
func writeWireJSON(w io.Writer, v any) error {
	b, err := wire.Marshal(v)
	if err != nil {
		return err
	}
	var m map[string]any
	if err := msgpack.Unmarshal(b, &m); err != nil {
		return err
	}
	return writeJSON(w, m)
}
