package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/api/secretdapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/daemon"
)

// stepServers starts the demo API and the other server, each with a leaf
// from a throwaway CA that only egressd is told to trust.
func (r *runner) stepServers(ctx context.Context) error {
	r.t.step(1, "two local HTTPS servers (a throwaway CA; egressd maps their names to 127.0.0.1)")
	ca, err := newCA()
	if err != nil {
		return err
	}
	if err := os.WriteFile(r.caFile(), ca.pem, 0o644); err != nil {
		return err
	}
	if r.api, err = startServer(ca, apiHost, apiAnswer(r.token), apiStream(r.token)); err != nil {
		return err
	}
	if r.other, err = startServer(ca, otherHost, otherAnswer, nil); err != nil {
		return err
	}
	r.t.ok("%-32s the API: answers 200 only to the real token; streams events at %s", r.api.origin(), streamPath)
	r.t.ok("%-32s another server: records whatever reaches it", r.other.origin())
	return nil
}

func (r *runner) caFile() string { return filepath.Join(r.root, "demo-ca.pem") }

// stepDaemons starts secretd, egressd and supervisord and waits for each
// to answer health.
func (r *runner) stepDaemons(ctx context.Context) error {
	r.t.step(2, "the daemons, as real processes under the temporary root")
	egArgs := []string{"-proxy-address", "127.0.0.1:0", "-ca-file", r.caFile(),
		"-resolve", fmt.Sprintf("%s:%d:127.0.0.1", apiHost, r.api.port),
		"-resolve", fmt.Sprintf("%s:%d:127.0.0.1", otherHost, r.other.port)}
	for _, d := range []struct {
		name string
		args []string
	}{
		{daemon.NameSecretd, nil},
		{daemon.NameEgressd, egArgs},
		{daemon.NameSupervisord, []string{"-host-runtime-enabled", "yes"}},
	} {
		p, err := startDaemon(r.binDir, d.name, r.root, r.cfg.Keep, d.args...)
		if err != nil {
			return err
		}
		r.daemons = append(r.daemons, p)
		c := r.client(d.name)
		h, err := p.waitReady(ctx, c)
		if err != nil {
			return err
		}
		detail := ""
		switch d.name {
		case daemon.NameSecretd:
			r.sd = secretdapi.NewClient(c)
		case daemon.NameEgressd:
			r.eg = egressdapi.NewClient(c)
			info, err := r.eg.Info(ctx)
			if err != nil {
				return fmt.Errorf("egress.info: %w", err)
			}
			r.proxy = info.ProxyAddress
			detail = "; proxy on " + info.ProxyAddress
		case daemon.NameSupervisord:
			r.sv = api.NewClient(c)
			all, err := healthapi.GetAll(ctx, c)
			if err != nil {
				return fmt.Errorf("supervisord health: %w", err)
			}
			if on, _ := all["host_runtime_enabled"].(bool); !on {
				return fmt.Errorf("supervisord reports host_runtime_enabled false")
			}
			r.isolated, _ = all["agents_isolated"].(bool)
			r.netIso, _ = all["network_isolation"].(bool)
			detail = "; host runtime enabled"
		}
		r.t.ok("%-12s pid %-7d ready (health %s, epoch %s)%s", d.name, p.cmd.Process.Pid, h.Status, h.Epoch, detail)
	}
	if r.isolated {
		r.t.ok("agents run under their own uid (supervisord runs as root)")
	} else {
		r.t.warn("agents are NOT isolated here: supervisord runs as uid %d, not root, so the agent runs as you", os.Geteuid())
		r.t.note("and could read your files, secretd's store included. Run the demo as root to see it under its own uid.")
	}
	return nil
}

// stepCredential stores demo-api in secretd.
func (r *runner) stepCredential(ctx context.Context) error {
	r.t.step(3, "the operator stores a credential in secretd")
	_, err := r.sd.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: credentialName, Value: r.token,
		Destinations: []string{r.api.origin()},
		Targets:      []secretdapi.TargetSpec{{Target: "header:Authorization", Template: "Bearer {}"}}}, "")
	if err != nil {
		return fmt.Errorf("credential.put: %w", err)
	}
	r.t.ok("%s = %s, a random value", credentialName, preview(r.token))
	r.t.note("allowed only for %s, only as Authorization: Bearer {}", r.api.origin())
	return nil
}

// stepAgent provisions the agent and waits for its output.
func (r *runner) stepAgent(ctx context.Context) error {
	r.t.step(4, "supervisord runs an agent that holds only a placeholder")
	r.python = havePythonRequests()
	// Node's fetch reaches egressd only through the namespace: on host
	// network it would go around egressd, so it runs only isolated.
	r.node = r.netIso
	if err := writeAgent(r.agentDir(), r.python, r.node); err != nil {
		return err
	}
	env := map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin", "DEMO_API_URL": r.api.origin(), "DEMO_OTHER_URL": r.other.origin()}
	tools := "curl"
	if r.python {
		env["DEMO_PYTHON"] = "1"
		tools += ", then python3 requests"
	}
	if r.node {
		env["DEMO_NODE"] = r.cfg.Node
		tools += ", then node's fetch without the proxy variables"
	}
	r.live = true
	// No mode: supervisord's default, network isolated. Where it cannot
	// make a namespace (not root), the demo asks for host explicitly and
	// says so: supervisord never falls back on its own.
	network := &api.Network{Allow: []string{r.other.origin()}}
	if !r.netIso {
		network.Mode = api.NetworkHost
	}
	in, err := r.sv.Provision(ctx, &api.ProvisionRequest{InstanceID: r.id, Name: "demo-agent",
		Command: []string{"/bin/sh", "agent.sh"}, WorkingDir: r.agentDir(), Env: env, Start: true, StopTimeoutMS: 1000,
		Labels:      map[string]string{"hostkit.demo": "1"},
		Credentials: []api.CredentialSpec{{Credential: credentialName, Env: tokenEnv}},
		Network:     network})
	if err != nil {
		return fmt.Errorf("instance.provision: %w", err)
	}
	r.t.ok("instance %s started: /bin/sh agent.sh (%s)", in.InstanceID, tools)
	if in.Network == api.NetworkIsolated {
		r.t.ok("network isolated (supervisord's default): the agent's only way out is egressd, through its holder's bridge")
	} else {
		r.t.warn("network host, asked for explicitly: supervisord cannot make a network namespace here (it needs root)")
		r.t.note("%s", api.HostNetworkWarning)
	}
	r.t.note("%s from credential %s; its policy also allows %s", tokenEnv, credentialName, r.other.origin())
	if err := r.waitAgent(ctx); err != nil {
		return err
	}
	r.t.printf("  the agent's output:\n")
	for _, l := range r.agent.lines {
		// Steps 5 and 6 show the events and the Node step.
		if !eventRE.MatchString(l) && !strings.HasPrefix(l, "agent: event at ") && !strings.HasPrefix(l, "agent: node ") {
			r.t.printf("    | %s\n", l)
		}
	}
	ph := r.placeholder()
	r.t.check(ph != "" && !containsSecret([]byte(strings.Join(r.agent.lines, "\n")), r.token),
		fmt.Sprintf("the agent saw only a placeholder (%s…), never the token", ph[:min(len(ph), 10)]),
		fmt.Sprintf("the agent's view: want one hkp_ placeholder and no token, got placeholders %q", r.agent.placeholders))
	r.checkInstanceFiles()
	st, err := r.sv.Status(ctx, r.id)
	if err != nil {
		return fmt.Errorf("instance.status: %w", err)
	}
	uid := strconv.FormatUint(uint64(st.AgentUID), 10)
	switch {
	case r.isolated:
		r.t.check(st.Isolated && r.agent.uid == uid && uid != strconv.Itoa(os.Geteuid()),
			fmt.Sprintf("the agent ran as uid %s, its own (hostctl runs as uid %d)", uid, os.Geteuid()),
			fmt.Sprintf("agent uid: status says %s (isolated %v), the agent printed %q", uid, st.Isolated, r.agent.uid))
	default:
		r.t.check(r.agent.uid == strconv.Itoa(os.Geteuid()),
			fmt.Sprintf("the agent ran as uid %s: your own, NOT isolated (%s)", r.agent.uid, st.Warning),
			fmt.Sprintf("agent uid: want %d (not isolated), the agent printed %q", os.Geteuid(), r.agent.uid))
	}
	return nil
}

// placeholder returns the one placeholder the agent printed ("" when
// there is not exactly one distinct value).
func (r *runner) placeholder() string {
	set := map[string]bool{}
	for _, p := range r.agent.placeholders {
		set[p] = true
	}
	if len(set) != 1 {
		return ""
	}
	return r.agent.placeholders[0]
}

// waitAgent polls the instance's output log until the agent's last line,
// its exit, or 30 s.
func (r *runner) waitAgent(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		logs, err := r.sv.Logs(ctx, &api.LogsRequest{InstanceID: r.id})
		if err != nil {
			return fmt.Errorf("instance.logs: %w", err)
		}
		r.agent = parseAgent(string(logs.Data))
		if r.agent.done {
			return nil
		}
		st, err := r.sv.Status(ctx, r.id)
		if err != nil {
			return fmt.Errorf("instance.status: %w", err)
		}
		if st.State != api.StateRunning {
			return fmt.Errorf("the agent ended early (state %s); its output:\n%s", st.State, strings.Join(r.agent.lines, "\n"))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent did not finish within 30s; its output:\n%s", strings.Join(r.agent.lines, "\n"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkInstanceFiles asserts that no file of the instance (agent.env, the
// output log, metadata) holds the raw token, while the instance lives.
func (r *runner) checkInstanceFiles() {
	dir := filepath.Join(r.layout.StateDir(daemon.NameSupervisord), "instances", r.id)
	hits, n := filesWith(dir, r.token, "")
	r.t.check(n > 0 && len(hits) == 0,
		fmt.Sprintf("the instance's %d files (agent.env, output log...) hold the placeholder, not the token", n),
		fmt.Sprintf("instance files: %d read, the raw token is in %q", n, hits))
}
