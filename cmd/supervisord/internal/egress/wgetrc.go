package egress

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// WgetRCName is the shared wgetrc's file name in the public directory.
const WgetRCName = "supervisord-wgetrc"

// wgetRC is the shared wgetrc's content: only ca_certificate, since wget
// (GnuTLS builds) ignores SSL_CERT_FILE. wget reads the proxy from the
// proxy variables; the proxy token never goes into a file that every
// agent can read.
func wgetRC(caBundle string) []byte {
	return fmt.Appendf(nil, "# written by supervisord: wget trusts egressd's CA bundle; the proxy comes from https_proxy\nca_certificate = %s\n", caBundle)
}

// ensureWgetRC writes the shared wgetrc (0644) naming caBundle into dir,
// atomically, unless it already holds exactly that, and returns its path.
// A bundle path with a newline is refused (it would add a line).
func ensureWgetRC(dir, caBundle string) (string, error) {
	if dir == "" || caBundle == "" || strings.ContainsAny(caBundle, "\r\n") {
		return "", fmt.Errorf("egress.ensureWgetRC: no public directory or a bad CA bundle path")
	}
	p := filepath.Join(dir, WgetRCName)
	want := wgetRC(caBundle)
	if b, err := os.ReadFile(p); err == nil && bytes.Equal(b, want) {
		return p, nil
	}
	f, err := os.CreateTemp(dir, "."+WgetRCName+"-*")
	if err != nil {
		return "", fmt.Errorf("egress.ensureWgetRC: %w", err)
	}
	defer os.Remove(f.Name()) // after the rename, nothing
	_, err = f.Write(want)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		return "", fmt.Errorf("egress.ensureWgetRC: %w", err)
	}
	return p, nil
}
