package cli

import (
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/matryer/is"
)

// An independent MessagePack implementation (Debian's python3-msgpack, run
// by /usr/bin/python3) encodes a request, and decodes the answer of a
// running daemon: the wire is compatible with more than itself.
func TestPythonMsgpackInterop(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := shortRoot(t)
	p := startDaemon(t, "egressd", "egressd", root)
	out, err := exec.Command("/usr/bin/python3", "testdata/health_client.py", p.socket, "../../../../lib/wire/testdata/wire-vectors.json").CombinedOutput()
	is.NoErr(err) // python3-msgpack must be installed (scripts/setup)
	var resp struct {
		V    int    `json:"v"`
		OK   bool   `json:"ok"`
		ID   string `json:"id"`
		Body struct {
			Status  string `json:"status"`
			Epoch   string `json:"epoch"`
			Version string `json:"version"`
		} `json:"body"`
	}
	is.NoErr(json.Unmarshal(out, &resp))
	is.Equal(resp.V, 1)
	is.True(resp.OK)
	is.Equal(len(resp.ID), 32) // our 16-byte id echoed
	is.Equal(resp.Body.Status, "ok")
	is.Equal(len(resp.Body.Epoch), 16)
}
