package units

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/rpc"
)

// TestDaemonsSurviveSIGHUP sends SIGHUP to each real daemon binary while
// it serves: each logs daemon.sighup, the same process (same epoch) goes
// on answering health, and SIGTERM still stops it with status 0. A daemon
// that died of SIGHUP would count as cleanly stopped under systemd, and
// Restart=on-failure would never bring it back.
func TestDaemonsSurviveSIGHUP(t *testing.T) {
	t.Parallel()
	tests := []struct {
		binary, name string
		args         []string
	}{
		{"secretd", "secretd", nil},
		{"egressd", "egressd", []string{"-proxy-address", "127.0.0.1:0"}},
		{"supervisord", "supervisord", []string{"-holder-pool", "1"}},
		{"containerization-helper", "helper", []string{"-idle-timeout", "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.binary, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			root := filepath.Join(shortDir(t), "r")
			args := append([]string{"-root", root}, tt.args...)
			if tt.name == "helper" {
				args = append(args, "-allow-exe", testExe(t)) // this test calls health itself
			}
			cmd := exec.Command(filepath.Join(binDir, tt.binary), args...)
			cmd.Env = cleanEnv()
			var stderr syncBuffer
			cmd.Stderr = &stderr
			is.NoErr(cmd.Start())
			exit := make(chan error, 1)
			go func() { exit <- cmd.Wait() }()
			defer func() {
				cmd.Process.Kill() // after an exit, a no-op
				<-exit
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			waitLog := func(msg string, n int) {
				t.Helper()
				for len(logMsgs(stderr.String(), msg)) < n {
					select {
					case err := <-exit:
						exit <- err
						t.Fatalf("%s exited (%v) before %d× %s; stderr:\n%s", tt.binary, err, n, msg, stderr.String())
					case <-ctx.Done():
						t.Fatalf("%s: no %d× %s; stderr:\n%s", tt.binary, n, msg, stderr.String())
					case <-time.After(10 * time.Millisecond):
					}
				}
			}
			waitLog("daemon.ready", 1)
			c := rpc.NewClient(filepath.Join(root, "run", tt.name, "api.sock"), 10*time.Second)
			defer c.Close()
			h, err := healthapi.Get(ctx, c)
			is.NoErr(err)
			for n := 1; n <= 2; n++ {
				is.NoErr(cmd.Process.Signal(syscall.SIGHUP))
				waitLog("daemon.sighup", n) // logged, one line per signal
				again, err := healthapi.Get(ctx, c)
				if err != nil {
					t.Fatalf("%s: health after SIGHUP %d: %v; stderr:\n%s", tt.binary, n, err, stderr.String())
				}
				is.Equal(again.Status, "ok")
				is.Equal(again.Epoch, h.Epoch) // the same process, still serving
			}
			is.NoErr(cmd.Process.Signal(syscall.SIGTERM))
			select {
			case err := <-exit:
				exit <- err
				if err != nil {
					t.Fatalf("%s exit after SIGTERM: %v; stderr:\n%s", tt.binary, err, stderr.String())
				}
			case <-ctx.Done():
				t.Fatalf("%s did not stop after SIGTERM; stderr:\n%s", tt.binary, stderr.String())
			}
		})
	}
}

// logMsgs returns the JSON log lines in out whose msg is msg; a partial
// last line (a process still writing) is skipped.
func logMsgs(out, msg string) []map[string]any {
	var lines []map[string]any
	for _, line := range strings.Split(out, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			lines = append(lines, m)
		}
	}
	return lines
}
