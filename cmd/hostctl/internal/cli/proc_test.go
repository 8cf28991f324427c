package cli

import (
	"os/exec"
	"path/filepath"
)

// runBinary runs a built binary to completion and returns its combined output.
func runBinary(binary string, args ...string) (string, error) {
	out, err := exec.Command(filepath.Join(binDir, binary), args...).CombinedOutput()
	return string(out), err
}
