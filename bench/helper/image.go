//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// umociPath is Debian's umoci.
const umociPath = "/usr/bin/umoci"

// image is an OCI layout and the digest of its one manifest.
type image struct {
	layout, manifest string
}

// buildImage makes a busybox image under dir with umoci: an empty image,
// /bin/busybox (busybox-static) and a few applets in its rootfs, repacked.
func buildImage(dir string) (image, error) {
	layout, work := filepath.Join(dir, "layout"), filepath.Join(dir, "work")
	ref := layout + ":bench"
	for _, args := range [][]string{
		{"init", "--layout", layout},
		{"new", "--image", ref},
		{"config", "--image", ref, "--config.cmd", "/bin/sh"},
		{"unpack", "--image", ref, work},
	} {
		if err := umoci(args...); err != nil {
			return image{}, err
		}
	}
	bin := filepath.Join(work, "rootfs", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return image{}, err
	}
	b, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return image{}, err
	}
	if err := os.WriteFile(filepath.Join(bin, "busybox"), b, 0o755); err != nil {
		return image{}, err
	}
	for _, a := range []string{"sh", "sleep", "true", "echo", "cat"} {
		if err := os.Symlink("busybox", filepath.Join(bin, a)); err != nil {
			return image{}, err
		}
	}
	if err := umoci("repack", "--image", ref, work); err != nil {
		return image{}, err
	}
	if err := os.RemoveAll(work); err != nil {
		return image{}, err
	}
	var idx struct {
		Manifests []struct {
			Digest string `json:"digest"`
		} `json:"manifests"`
	}
	b, err = os.ReadFile(filepath.Join(layout, "index.json"))
	if err == nil {
		err = json.Unmarshal(b, &idx)
	}
	if err != nil || len(idx.Manifests) != 1 {
		return image{}, fmt.Errorf("index.json: want one manifest (%v)", err)
	}
	return image{layout: layout, manifest: idx.Manifests[0].Digest}, nil
}

func umoci(args ...string) error {
	cmd := exec.Command(umociPath, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("umoci %s: %v\n%s", args[0], err, out)
	}
	return nil
}
