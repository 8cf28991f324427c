package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// searchPath is where runtimes and the wrapper's tools are looked up, in
// order; the same fixed list as lib/procexec's, never $PATH.
var searchPath = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// Provider is one runtime under test.
type Provider struct {
	Name     string // "runc" or "crun"
	Path     string // absolute path of the runtime
	Version  string // "1.1.5"
	Codec    string // "runc-1.1": the provider package's codec line
	HostKind string // "cgroup-v1", "cgroup-hybrid", "cgroup-v2"
	// Wrapped: the runtime runs inside a private mount namespace without
	// the cgroup2 mount (crun on a hybrid host), through Sh, Unshare,
	// Umount and V2 (the cgroup2 mount point).
	Wrapped                 bool
	Sh, Unshare, Umount, V2 string
}

// ErrNotInstalled: the runtime is not in the search path.
var ErrNotInstalled = errors.New("not installed")

var reVersionLine = regexp.MustCompile(`^(runc|crun) version ([0-9]+)\.([0-9]+)\.([0-9]+)\S*$`)

// ParseVersion reads `<runtime> --version` output: its first line is
// "runc version 1.1.5" or "crun version 1.8.1". It returns the exact
// version and the codec line ("runc-1.1").
func ParseVersion(name string, out []byte) (version, codec string, err error) {
	first, _, _ := strings.Cut(string(out), "\n")
	m := reVersionLine.FindStringSubmatch(strings.TrimSpace(first))
	if m == nil || m[1] != name {
		return "", "", fmt.Errorf("%s --version: unrecognized first line %q", name, first)
	}
	return m[2] + "." + m[3] + "." + m[4], fmt.Sprintf("%s-%s.%s", name, m[2], m[3]), nil
}

func lookup(name string) (string, error) {
	for _, d := range searchPath {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, ErrNotInstalled)
}

// Detect finds runtime name and its version on a host of the given kind
// (v2 is the cgroup2 mount point on a hybrid host). crun on a hybrid host
// is wrapped the way internal/provider wraps it.
func Detect(ctx context.Context, name, hostKind, v2 string) (*Provider, error) {
	path, err := lookup(name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w", path, err)
	}
	version, codec, err := ParseVersion(name, out)
	if err != nil {
		return nil, err
	}
	p := &Provider{Name: name, Path: path, Version: version, Codec: codec, HostKind: hostKind}
	if p.Sh, err = lookup("sh"); err != nil {
		return nil, err
	}
	if name == "crun" && hostKind == KindHybrid {
		p.Wrapped, p.V2 = true, v2
		if p.Unshare, err = lookup("unshare"); err != nil {
			return nil, fmt.Errorf("crun on a hybrid host needs %w", err)
		}
		if p.Umount, err = lookup("umount"); err != nil {
			return nil, fmt.Errorf("crun on a hybrid host needs %w", err)
		}
	}
	return p, nil
}

// reSafePath: paths the wrapper embeds are plain, so quoting is exact.
var reSafePath = regexp.MustCompile(`^/[A-Za-z0-9/._-]*$`)

// Wrapper returns the RUNTIME script the validation programs run instead
// of the runtime: it adds the global flags internal/provider gives every
// verb (--root <private root> --log <file> --log-format json) and, for a
// wrapped provider, runs every verb but state and list inside
// `unshare --mount --propagation private` with the cgroup2 mount removed,
// the exact argv of internal/provider's command(). (The provider's
// console-log shell around create is left out: the validation programs
// capture create's stdio themselves.)
func (p *Provider) Wrapper(root, log string) (string, error) {
	for _, s := range []string{p.Path, p.Sh, root, log, p.Unshare, p.Umount, p.V2} {
		if s != "" && !reSafePath.MatchString(s) {
			return "", fmt.Errorf("wrapper: unsafe path %q", s)
		}
	}
	rt := fmt.Sprintf("'%s' --root '%s' --log '%s' --log-format json", p.Path, root, log)
	var b strings.Builder
	b.WriteString("#!" + p.Sh + "\n# hostkit conformance RUNTIME wrapper (generated; see conformance/README.md)\n")
	if p.Wrapped {
		fmt.Fprintf(&b, "case \"$1\" in\nstate|list) exec %s \"$@\" ;;\nesac\n", rt)
		fmt.Fprintf(&b, "exec '%s' --mount --propagation private -- '%s' -c '\"$1\" \"$2\" || exit 125; shift 2; exec \"$@\"' hk-nocgroupv2 '%s' '%s' %s \"$@\"\n",
			p.Unshare, p.Sh, p.Umount, p.V2, rt)
	} else {
		fmt.Fprintf(&b, "exec %s \"$@\"\n", rt)
	}
	return b.String(), nil
}
