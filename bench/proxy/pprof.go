package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// pprofEnv names the environment variable that the bench's pprof build of
// egressd reads: the loopback address to serve net/http/pprof on.
const pprofEnv = "HOSTKIT_BENCH_PPROF"

// pprofSource is added to egressd's main package by the bench's build
// only (go build -overlay), never to the product's: an init is the one
// way to start the server without touching egressd's code.
const pprofSource = `package main

import (
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	if a := os.Getenv("` + pprofEnv + `"); a != "" {
		go http.ListenAndServe(a, nil)
	}
}
`

// pprofOverlay writes, into dir, the file and the overlay (go help build,
// -overlay) that add pprofSource to tree/cmd/egressd, and returns the
// overlay's path.
func pprofOverlay(dir, tree string) (string, error) {
	src := filepath.Join(dir, "bench_pprof.go")
	if err := os.WriteFile(src, []byte(pprofSource), 0o600); err != nil {
		return "", err
	}
	pkg, err := filepath.Abs(filepath.Join(tree, "cmd", "egressd"))
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(pkg, "zz_bench_pprof.go"): src}})
	overlay := filepath.Join(dir, "overlay.json")
	return overlay, os.WriteFile(overlay, b, 0o600)
}

// saveProfile fetches /debug/pprof/<name> from the pprof server at addr
// into dir/<file>; it returns the first line of a debug=1 answer (the
// goroutine profile's total) or "".
func saveProfile(addr, name, dir, file string) (string, error) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/" + name)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("pprof %s: status %d", name, resp.StatusCode)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return first, os.WriteFile(filepath.Join(dir, file), b, 0o600)
}

// memStats returns the runtime.MemStats lines of a heap?debug=1 answer
// saved in file that say where a resident set goes, in MiB.
func memStats(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	var out []string
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(strings.TrimPrefix(line, "# "))
		if len(f) < 3 || f[1] != "=" {
			continue
		}
		switch f[0] {
		case "HeapAlloc", "HeapInuse", "HeapIdle", "HeapReleased", "Stack", "Sys", "NextGC", "MSpan", "OtherSys", "GCSys", "NumGC":
			v := f[2]
			if n, err := strconv.ParseFloat(v, 64); err == nil && f[0] != "NumGC" {
				v = fmt.Sprintf("%.1f", n/(1<<20))
			}
			out = append(out, f[0]+" "+v)
		}
	}
	return strings.Join(out, ", ")
}
