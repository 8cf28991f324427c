package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// lost is credentials.unavailable for a re-registration that failed,
// keeping the step and the underlying code in the message (the reason an
// instance shows while it is credentials_lost).
func lost(step string, err error) error {
	code, msg := wire.CodeOf(err), "failed"
	var we *wire.Error
	if errors.As(err, &we) {
		msg = we.Msg
	}
	return wire.Wrap(api.CodeCredentialsUnavailable, fmt.Sprintf("%s: %s: %s", step, code, msg), err)
}

// Transient reports whether a failed re-registration is worth trying
// again on its own: a daemon did not answer, was busy or was stopping.
// Any other failure (a credential deleted, a placeholder in use, a
// policy egressd refuses) stays until egressd's next epoch.
func Transient(err error) bool {
	for _, c := range []string{wire.CodeUnavailable, wire.CodeConnectionClosed, wire.CodeFrameTruncated, wire.CodeServerBusy,
		wire.CodeServerShuttingDown, wire.CodeRequestDeadline} {
		if wire.HasCode(err, c) {
			return true
		}
	}
	return false
}

// Reregister gives a running agent its bundle back after egressd forgot
// it (a restart; also after secretd restarted first): it stages creds at
// secretd under invocation with the placeholders the agent already holds
// (held, from its agent.env), and registers the bundle at egressd with
// the same proxy token and policy (allow, every method). It returns
// egressd's epoch. All or nothing: on failure what was staged is revoked
// and a bundle half registered is dropped (both by the client's owner
// id), and the error is credentials.unavailable naming the step and the
// underlying code (Transient tells whether to try again).
func (c *Client) Reregister(ctx context.Context, invocation string, creds []api.CredentialSpec, allow []string, held Held) (string, error) {
	if c.eg == nil || (len(creds) > 0 && c.sd == nil) {
		return "", lost("egress", wire.Errorf(wire.CodeUnavailable, "egressd or secretd is not configured"))
	}
	if len(held.Placeholders) != len(creds) {
		return "", lost("agent.env", wire.Errorf(api.CodeInstanceInvalid, "%d placeholders for %d credentials", len(held.Placeholders), len(creds)))
	}
	handles := make([][]byte, 0, len(creds))
	fail := func(step string, err error) (string, error) {
		if len(handles) > 0 || len(creds) > 0 {
			_, _ = c.revokeOwned(ctx, invocation)
		}
		clear(handles)
		return "", lost(step, err)
	}
	for i, cr := range creds {
		st, err := c.sd.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: cr.Credential, Destination: cr.Destination,
			Invocation: invocation, Owner: c.cfg.Owner, Placeholder: held.Placeholders[i], Target: cr.Target})
		if err != nil {
			return fail("lease.stage "+cr.Credential, err)
		}
		handles = append(handles, st.Handle)
		if st.Placeholder != held.Placeholders[i] {
			// A secretd that staged another placeholder would leave the
			// agent with one egressd does not know.
			return fail("lease.stage "+cr.Credential, wire.Errorf(wire.CodeResponseMalformed, "secretd staged another placeholder than the one asked for"))
		}
	}
	req := &egressdapi.BundleRegisterRequest{Handles: handles, Invocation: invocation, Owner: c.cfg.Owner, Policy: policyOf(allow), ProxyToken: held.Token}
	reg, err := c.register(ctx, req)
	if err != nil {
		return fail("bundle.register", err)
	}
	clear(handles)
	c.observe(reg.Epoch)
	c.cfg.Logger.Info("instance.egress_reregistered", slog.String("instance", invocation), slog.Int("credentials", len(creds)),
		slog.String("epoch", reg.Epoch))
	return reg.Epoch, nil
}

// policyOf is the bundle policy of an instance's allowed origins: each
// with every method.
func policyOf(allow []string) egressdapi.Policy {
	pol := egressdapi.Policy{Allow: make([]egressdapi.AllowRule, 0, len(allow))}
	for _, o := range allow {
		pol.Allow = append(pol.Allow, egressdapi.AllowRule{Origin: o})
	}
	return pol
}

// register sends req to egressd. When the invocation already has a bundle
// of the client's own owner id (a leftover nothing released yet), it is
// dropped (by owner: the check and the drop are one step at egressd) and
// req sent once more; another owner's is never dropped, and the answer
// stays bundle.exists. A register that failed otherwise may have been
// carried out with its answer lost: ours is dropped then.
func (c *Client) register(ctx context.Context, req *egressdapi.BundleRegisterRequest) (*egressdapi.BundleRegisterResponse, error) {
	reg, err := c.eg.BundleRegister(ctx, req)
	if wire.HasCode(err, egressdapi.CodeBundleExists) && c.cfg.Owner != "" {
		if derr := c.eg.BundleDropOwned(ctx, req.Invocation, c.cfg.Owner); derr == nil {
			c.cfg.Logger.Warn("instance.bundle_replaced", slog.String("instance", req.Invocation), slog.String("owner", c.cfg.Owner))
			reg, err = c.eg.BundleRegister(ctx, req)
		}
	}
	if err != nil && !wire.HasCode(err, egressdapi.CodeBundleExists) {
		c.dropOwned(context.WithoutCancel(ctx), req.Invocation)
	}
	return reg, err
}
