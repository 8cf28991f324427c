package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/wire"
)

// A socket loosened to 0666 still refuses a peer that holds no role: the
// kernel-reported UID decides, the answer is peer.denied, and the denial is
// in the audit log with the peer's uid.
func TestLoosenedSocketStillDeniesOtherUID(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := shortRoot(t)
	p := startDaemon(t, "supervisord", "supervisord", root)
	for _, d := range []string{root, filepath.Dir(p.socket)} {
		is.NoErr(os.Chmod(d, 0o755))
	}
	is.NoErr(os.Chmod(p.socket, 0o666))

	const otherUID = 65533
	cmd := exec.Command(filepath.Join(binDir, "hostctl"), "-root", root, "doctor", "--json", "--expect", "supervisord")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID}}
	out, err := cmd.Output()
	is.Equal(exitStatus(err), ExitUnavailable)
	var doc struct {
		Daemons []doctorRow `json:"daemons"`
	}
	is.NoErr(json.Unmarshal(out, &doc))
	is.Equal(doc.Daemons[2].Daemon, "supervisord")
	is.Equal(doc.Daemons[2].Code, wire.CodePeerDenied)

	// The denial is audited with the peer's uid, and the chain verifies.
	logDir := filepath.Join(root, "log", "supervisord")
	var found bool
	for i := 0; i < 50 && !found; i++ {
		recs, err := audit.ReadTail(logDir, "audit.jsonl", 10)
		is.NoErr(err)
		for _, r := range recs {
			if r.Outcome == audit.OutcomeDenied && r.Actor.UID == otherUID && r.Code == wire.CodePeerDenied && strings.Contains(r.Op, "health") {
				found = true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	is.True(found)
	_, err = audit.Verify(logDir, "audit.jsonl")
	is.NoErr(err)
}
