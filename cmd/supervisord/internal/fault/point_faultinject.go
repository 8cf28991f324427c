//go:build faultinject

package fault

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EnvPoint names the pause point to stop at, as NAME or NAME#N (the Nth
// time it is reached, from 1); EnvDir is where the marker file NAME is
// made once supervisord stops there. Only a build with the tag
// faultinject reads them.
const (
	EnvPoint = "SUPERVISORD_FAULT_POINT"
	EnvDir   = "SUPERVISORD_FAULT_DIR"
)

var hits sync.Map // name → *int, guarded by mu
var mu sync.Mutex

// Point stops the calling goroutine for good when name is the point (and
// the hit) $SUPERVISORD_FAULT_POINT names, after making the marker file
// $SUPERVISORD_FAULT_DIR/name: the test that set them kills supervisord
// there. Everywhere else it returns at once.
func Point(name string) {
	want, n := parse(os.Getenv(EnvPoint))
	if want != name {
		return
	}
	mu.Lock()
	v, _ := hits.LoadOrStore(name, new(int))
	c := v.(*int)
	*c++
	hit := *c
	mu.Unlock()
	if hit != n {
		return
	}
	if dir := os.Getenv(EnvDir); dir != "" {
		f, err := os.Create(filepath.Join(dir, name))
		if err == nil {
			f.Close()
		}
	}
	for {
		time.Sleep(time.Hour)
	}
}

func parse(s string) (string, int) {
	name, nth, ok := strings.Cut(s, "#")
	if !ok {
		return s, 1
	}
	n, err := strconv.Atoi(nth)
	if err != nil || n < 1 {
		return name, 1
	}
	return name, n
}
