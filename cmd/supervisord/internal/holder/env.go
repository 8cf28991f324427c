package holder

import "strings"

// StripEnv removes what belongs to the service manager, never the agent:
// NOTIFY_SOCKET, LISTEN_* and WATCHDOG_*.
func StripEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == "NOTIFY_SOCKET" || strings.HasPrefix(k, "LISTEN_") || strings.HasPrefix(k, "WATCHDOG_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}
