package demo

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/daemon"
)

// syntheticPrefix is where the instance's resolver takes the addresses it
// answers with (docs/supervisord.md, "Transparent egress").
var syntheticPrefix = netip.MustParsePrefix("198.18.0.0/15")

// nodeUsable returns an error naming what to install when the agent's
// Node.js, path, is missing: the demo fails rather than skip its Node step.
func nodeUsable(path string) error {
	if fi, err := os.Stat(path); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return errors.New("the agent needs " + path + " (Node.js 18 or later, for its built-in fetch; scripts/setup installs it)")
	}
	return nil
}

// stepNode shows a program that ignores the proxy variables, Node's
// built-in fetch run with none set, reaching the API through egressd all
// the same: the namespace's resolver gave it a synthetic address, the
// bridge relayed the connection to egressd, which substituted the
// placeholder and audited the request as transparent; the placeholder sent
// to the other server was refused there as it is on the proxied path.
func (r *runner) stepNode(ctx context.Context) error {
	r.t.step(6, "a program that ignores the proxy variables: Node's built-in fetch")
	if !r.node {
		r.t.warn("not run: on host network Node's fetch would go straight to the network, around egressd")
		r.t.note("(it needs the isolated namespace, whose every connection reaches egressd; run the demo as root)")
		return nil
	}
	r.t.printf("  the agent ran node with HTTPS_PROXY and the other proxy variables unset:\n")
	for _, l := range r.agent.lines {
		if strings.HasPrefix(l, "agent: node ") {
			r.t.printf("    | %s\n", l)
		}
	}
	n := r.agent.node
	addr, err := netip.ParseAddr(n.addr)
	r.t.check(n.proxy == "none" && err == nil && syntheticPrefix.Contains(addr),
		fmt.Sprintf("node %s saw no proxy variable; %s resolved to %s, a synthetic address from the instance's own resolver", n.version, apiHost, addr),
		fmt.Sprintf("node: want no proxy variable and a synthetic address in %s for %s, got version %q, proxy variables %q, address %q",
			syntheticPrefix, apiHost, n.version, n.proxy, n.addr))

	res, _ := r.agent.find("node", r.api.origin(), "with")
	var got []seen
	for _, s := range r.api.requests() {
		if s.path == nodePath {
			got = append(got, s)
		}
	}
	r.t.check(res.status == "200" && len(got) == 1 && got[0].authorization == "Bearer "+string(r.token),
		fmt.Sprintf("fetch %s: 200; the API received the real token (Bearer %s), the agent sent only its placeholder", nodePath, preview(r.token)),
		fmt.Sprintf("node to the API: want 200 and one request with the real token at %s; got %q %q, %d request(s)", nodePath, res.status, res.code, len(got)))
	mis, _ := r.agent.find("node", r.other.origin(), "with")
	r.t.check(mis.status == "403" && mis.code == misuseCode,
		fmt.Sprintf("fetch with the placeholder to %s: refused, 403 %s, as on the proxied path", otherHost, misuseCode),
		fmt.Sprintf("node to %s with the placeholder: want 403 %s, got %q %q", otherHost, misuseCode, mis.status, mis.code))

	ok, refused := r.transparentAudit(ctx)
	r.t.check(ok != nil && refused != nil,
		fmt.Sprintf("egressd's audit: %s (GET %s, 200) and the refusal (%s) are transparent=tls: the bridge relayed them",
			r.auditRef(ok), nodePath, r.auditRef(refused)),
		fmt.Sprintf("egressd's audit: want %s %s with status 200 and a refusal %s, each transparent=tls for %s; found %v and %v",
			auditRequest, nodePath, misuseCode, r.id, ok != nil, refused != nil))
	return nil
}

// auditRequest is egressd's audit op for a request it decided.
const auditRequest = "egress.request"

// transparentAudit returns egressd's audit records of the Node step: the
// answered request to the API and the refused one, each marked
// transparent=tls (nil for one not found). A record is written as the
// request ends, so it waits up to 5 s for both.
func (r *runner) transparentAudit(ctx context.Context) (ok, refused *audit.Record) {
	for deadline := time.Now().Add(5 * time.Second); ; {
		recs, err := audit.ReadTail(r.layout.LogDir(daemon.NameEgressd), daemon.AuditFile, 1000)
		if err == nil {
			for i := range recs {
				rec := &recs[i]
				f := rec.Fields
				if rec.Op != auditRequest || f["invocation"] != r.id || f["transparent"] != "tls" {
					continue
				}
				switch {
				case rec.Phase == audit.PhaseAfter && rec.Outcome == audit.OutcomeOK && f["path"] == nodePath && fmt.Sprint(f["status"]) == "200":
					ok = rec
				case rec.Code == misuseCode:
					refused = rec
				}
			}
		}
		if (ok != nil && refused != nil) || time.Now().After(deadline) || ctx.Err() != nil {
			return ok, refused
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// auditRef names a record as the audit trail shows it ("egressd #15").
func (r *runner) auditRef(rec *audit.Record) string {
	if rec == nil {
		return "none"
	}
	return fmt.Sprintf("%s #%d", rec.Daemon, rec.Seq)
}
