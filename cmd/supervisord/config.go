package main

import (
	"flag"
	"fmt"
	"strings"

	"hostkit.dev/cmd/supervisord/internal/manager"
	"hostkit.dev/cmd/supervisord/internal/netns"
	api "hostkit.dev/lib/api/supervisordapi"
)

// boolish is a flag value accepting 1/true/yes and 0/false/no (Go's bool
// parsing refuses yes).
type boolish bool

func (b *boolish) String() string { return fmt.Sprint(bool(*b)) }

func (b *boolish) Set(s string) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true", "yes", "on":
		*b = true
	case "0", "false", "no", "off", "":
		*b = false
	default:
		return fmt.Errorf("want 1, true or yes (or 0, false, no), got %q", s)
	}
	return nil
}

// flags are supervisord's own flags (besides the common ones and roles).
type flags struct {
	hostRuntime boolish
	uidMin      int
	uidMax      int
	workDir     string
	logMB       int
	logFiles    int
	egress      *egressConfig
	synthNames  int
	defNet      string
	proxySock   string
	tmuxBin     string
	helperSock  string
	pool        int
}

func (f *flags) register(fs *flag.FlagSet) {
	fs.Var(&f.hostRuntime, "host-runtime-enabled", "run agents as host processes (1, true or yes); off: runtime host fails with runtime.not_implemented")
	fs.IntVar(&f.uidMin, "agent-uid-min", 61184, "lowest agent uid (when root)")
	fs.IntVar(&f.uidMax, "agent-uid-max", 65519, "highest agent uid (when root)")
	fs.StringVar(&f.workDir, "default-working-dir", "/", "working directory for instances whose request names none")
	fs.IntVar(&f.logMB, "log-max-mb", 10, "size cap of one instance output log file, MiB")
	fs.IntVar(&f.logFiles, "log-files", 3, "instance output log files kept, the current one included")
	f.egress = egressFlags(fs)
	fs.IntVar(&f.synthNames, "synthetic-names", netns.DefaultMaxNames, "names one isolated instance's resolver gives synthetic addresses to (past it: REFUSED, audited)")
	fs.StringVar(&f.defNet, "default-network", api.DefaultNetwork, "network mode of a host instance whose request names none: isolated (its own network and mount namespaces; only egressd is reachable) or host (egress policy holds only for programs that honour the proxy variables)")
	fs.StringVar(&f.proxySock, "egress-proxy-socket", "", "egressd's proxy socket, bridged into network isolated namespaces (default <run>/egressd/proxy.sock)")
	fs.StringVar(&f.tmuxBin, "tmux", "tmux", "the tmux binary of session_backend tmux")
	fs.StringVar(&f.helperSock, "helper-socket", "", "the containerization-helper's socket, for runtime container (default <run>/helper/api.sock; none: runtime container fails with runtime.unavailable)")
	fs.IntVar(&f.pool, "holder-pool", 2, "holders kept started and idle, so a provision skips a holder's exec and start-up (0: off)")
}

// check refuses values out of their ranges.
func (f *flags) check() error {
	if f.pool < 0 || f.pool > manager.MaxHolderPool {
		return fmt.Errorf("-holder-pool: want 0-%d, got %d", manager.MaxHolderPool, f.pool)
	}
	if f.defNet != api.NetworkIsolated && f.defNet != api.NetworkHost {
		return fmt.Errorf("-default-network: want isolated or host, got %q", f.defNet)
	}
	if f.uidMin < 1000 || f.uidMax < f.uidMin {
		return fmt.Errorf("-agent-uid-min/-agent-uid-max: bad range %d-%d", f.uidMin, f.uidMax)
	}
	return nil
}
