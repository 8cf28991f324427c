package helperapi

import (
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

// DeleteResponse's log fields are wire-compatible both ways: an older
// helper's answer decodes with HasLogTail false, and an older client,
// which ignores unknown response fields, still reads a new answer.
func TestDeleteResponseCompat(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	old, err := wire.Marshal(map[string]any{"container_id": "hk-0123456789abcdef", "deleted": true})
	is.NoErr(err)
	var d DeleteResponse
	is.NoErr(wire.Unmarshal(old, &d, false))
	is.Equal(d, DeleteResponse{ContainerID: "hk-0123456789abcdef", Deleted: true})

	b, err := wire.Marshal(&DeleteResponse{ContainerID: "hk-0123456789abcdef", Deleted: true, HasLogTail: true, LogTail: []byte("up\nbye\n"), LogTruncated: true})
	is.NoErr(err)
	var back DeleteResponse
	is.NoErr(wire.Unmarshal(b, &back, true))
	is.Equal(string(back.LogTail), "up\nbye\n")
	is.True(back.HasLogTail && back.LogTruncated)
	var older struct {
		ContainerID string `msgpack:"container_id"`
		Deleted     bool   `msgpack:"deleted"`
	}
	is.NoErr(wire.Unmarshal(b, &older, false))
	is.True(older.Deleted)
}
