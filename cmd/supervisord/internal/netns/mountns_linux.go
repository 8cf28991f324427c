//go:build linux

package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The files PrivateEtc writes into the instance directory (root-owned,
// 0644) and mounts, read-only, over the host's.
const (
	FileResolvConf = "resolv.conf"
	FileHosts      = "hosts"
)

// ResolvConf is an isolated instance's /etc/resolv.conf: the only
// nameserver is the namespace's own loopback, where the holder's bridge
// answers DNS; nothing else is reachable from inside anyway.
const ResolvConf = "# hostkit: network isolated; the only nameserver is the holder's bridge on this namespace's loopback\nnameserver 127.0.0.1\n"

// HostsFile is an isolated instance's /etc/hosts: localhost entries only,
// naming the namespace's own loopback (never the host's).
const HostsFile = "# hostkit: network isolated; this loopback is the instance's own\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"

// etcFiles maps each file to the path it is mounted over.
var etcFiles = []struct{ name, content, target string }{
	{FileResolvConf, ResolvConf, "/etc/resolv.conf"},
	{FileHosts, HostsFile, "/etc/hosts"},
}

// PrivateEtc gives the namespace's thread a mount namespace of its own,
// once, before any agent starts (every later run is forked from the same
// thread, so restarts join it): mount propagation is made private
// (recursively, from /), so that nothing mounted inside ever reaches the
// host's mount table, then resolv.conf and hosts, written into dir, are
// bind-mounted read-only over /etc/resolv.conf and /etc/hosts (following
// a symlink to its target, inside the namespace only). A target the host
// does not have (or a dangling symlink) is left absent; glibc then asks
// 127.0.0.1 anyway. Errors: network.unavailable.
func (ns *NS) PrivateEtc(dir string) error {
	for _, f := range etcFiles {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, []byte(f.content), 0o644); err != nil {
			return unavailable(fmt.Errorf("netns.PrivateEtc: %w", err))
		}
		if err := os.Chmod(p, 0o644); err != nil { // whatever the umask
			return unavailable(fmt.Errorf("netns.PrivateEtc: %w", err))
		}
	}
	return ns.Do(func() error {
		if err := privateMounts(); err != nil {
			return unavailable(err)
		}
		for _, f := range etcFiles {
			if _, err := os.Stat(f.target); errors.Is(err, os.ErrNotExist) {
				continue
			}
			src := filepath.Join(dir, f.name)
			if err := unix.Mount(src, f.target, "", unix.MS_BIND, ""); err != nil {
				return unavailable(fmt.Errorf("netns.PrivateEtc: bind %s: %w", f.target, err))
			}
			ro := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
			if err := unix.Mount("", f.target, "", ro, ""); err != nil {
				return unavailable(fmt.Errorf("netns.PrivateEtc: read-only %s: %w", f.target, err))
			}
		}
		return nil
	})
}

// privateMounts moves the calling (locked) thread into a new mount
// namespace and makes every mount in it private, recursively: a mount
// made inside then never propagates to the host's, nor one of the host's
// into it.
func privateMounts() error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("netns: unshare mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("netns: make mounts private: %w", err)
	}
	return nil
}

// Probe reports whether this process can make what network isolated
// needs: a network namespace with loopback up and a private mount
// namespace. Both are made on a throwaway thread and end with it.
// Errors: network.unavailable.
func Probe() error {
	ns, err := New()
	if err != nil {
		return err
	}
	defer ns.Close()
	if err := ns.Do(privateMounts); err != nil {
		return unavailable(err)
	}
	return nil
}
