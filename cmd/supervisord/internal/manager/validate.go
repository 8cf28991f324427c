package manager

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/egress"
)

// normalize validates req and fills defaults. Errors: runtime.*,
// instance.invalid_id, instance.invalid, working_dir.not_found,
// credentials.unavailable.
func (m *Manager) normalize(req *api.ProvisionRequest) error {
	switch req.Runtime {
	case "", api.RuntimeHost:
		req.Runtime = api.RuntimeHost
		if req.Image != nil {
			return wire.Errorf(api.CodeInstanceInvalid, "image needs runtime container")
		}
	case api.RuntimeContainer:
		return m.normalizeContainer(req) // container.go: through the helper, never on the host
	default:
		return wire.Errorf(api.CodeInstanceInvalid, "runtime must be host or container")
	}
	if !m.cfg.HostRuntimeEnabled {
		return wire.Errorf(api.CodeRuntimeNotImplemented, "the host runtime is not enabled (-host-runtime-enabled)")
	}
	if runtime.GOOS != "linux" {
		return wire.Errorf(api.CodeRuntimeNotImplemented, "the host runtime needs Linux")
	}
	if req.InstanceID == "" {
		req.InstanceID = api.NewID()
	}
	id, err := api.CanonicalID(req.InstanceID)
	if err != nil {
		return err
	}
	req.InstanceID = id
	if len(req.Command) == 0 || req.Command[0] == "" {
		return wire.Errorf(api.CodeInstanceInvalid, "command is required")
	}
	for _, a := range req.Command {
		if strings.ContainsRune(a, 0) {
			return wire.Errorf(api.CodeInstanceInvalid, "command arguments must not hold NUL")
		}
	}
	if req.WorkingDir == "" {
		req.WorkingDir = m.cfg.DefaultWorkingDir
	}
	if !filepath.IsAbs(req.WorkingDir) {
		return wire.Errorf(api.CodeWorkingDirNotFound, "working_dir must be an absolute path")
	}
	if fi, err := os.Stat(req.WorkingDir); err != nil || !fi.IsDir() {
		return wire.Errorf(api.CodeWorkingDirNotFound, "working_dir does not exist or is not a directory")
	}
	switch {
	case req.StopTimeoutMS == 0:
		req.StopTimeoutMS = api.DefaultStopTimeoutMS
	case req.StopTimeoutMS < api.MinStopTimeoutMS || req.StopTimeoutMS > api.MaxStopTimeoutMS:
		return wire.Errorf(api.CodeInstanceInvalid, "stop_timeout_ms must be 1000..300000")
	}
	if req.PTY {
		if req.PTYRows == 0 {
			req.PTYRows = api.DefaultRows
		}
		if req.PTYCols == 0 {
			req.PTYCols = api.DefaultCols
		}
	}
	if err := m.normalizeBackends(req); err != nil {
		return err
	}
	if err := egress.Validate(req.Credentials); err != nil {
		return err
	}
	if m.networkMode(req) == api.NetworkIsolated {
		return egress.ValidateIsolated(req.Credentials)
	}
	return nil
}

// digest is the sha256 of req's canonical encoding.
func digest(req *api.ProvisionRequest) (string, error) {
	b, err := wire.Marshal(req)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}
