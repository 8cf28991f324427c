// Package egress wires an instance to secretd and egressd (docs/design.md, "A
// credentialed agent run", steps 3–5 and 8; docs/supervisord.md, "Egress"):
// it stages one lease per requested credential, registers the instance's
// bundle (every instance gets one, with or without credentials) under a fresh
// proxy token, and renders the proxy, CA and placeholder variables of the
// agent's environment. It never sees a raw credential value: secretd hands it
// handles and placeholders, and egressd consumes the handles itself.
package egress

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/api/secretdapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/fault"
)

// IsolatedProxyAddress is the proxy address an agent in `network: isolated`
// uses: the holder's listener inside the namespace (docs/design.md, "A
// credentialed agent run", step 5).
const IsolatedProxyAddress = "127.0.0.1:4750"

// DefaultTimeout bounds each call to secretd or egressd.
const DefaultTimeout = 5 * time.Second

// Config configures the egress client.
type Config struct {
	SecretdSocket string // secretd's API socket ("" = not configured)
	EgressdSocket string // egressd's API socket ("" = not configured)
	// Required makes provisioning fail closed (credentials.unavailable)
	// when egressd cannot give an instance without credentials its bundle.
	// When false, such an instance starts without any proxy environment,
	// and health says so. Credentialed instances always fail closed.
	Required bool
	Timeout  time.Duration // per call; 0 = DefaultTimeout
	Logger   *slog.Logger  // the daemon's redacting logger
	// PublicDir is the layout's public directory (0755, files 0644),
	// where the shared wgetrc is written; "" = no WGETRC.
	PublicDir string
	// Owner is supervisord's persistent owner id (store.LoadOwner): every
	// lease and bundle carries it, and every release names it, so that
	// only what this supervisord staged is ever released by it.
	Owner string
}

// Client stages leases and registers bundles. Safe for concurrent use.
type Client struct {
	cfg Config
	sd  *secretdapi.Client
	eg  *egressdapi.Client
	src []*rpc.Client // closed by Close
	ep  epochState
}

// New returns a client; nothing is dialled until the first call.
func New(cfg Config) *Client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	c := &Client{cfg: cfg}
	if cfg.SecretdSocket != "" {
		r := rpc.NewClient(cfg.SecretdSocket, cfg.Timeout)
		c.sd, c.src = secretdapi.NewClient(r), append(c.src, r)
	}
	if cfg.EgressdSocket != "" {
		r := rpc.NewClient(cfg.EgressdSocket, cfg.Timeout)
		c.eg, c.src = egressdapi.NewClient(r), append(c.src, r)
	}
	return c
}

// Close closes the client's connections.
func (c *Client) Close() {
	for _, r := range c.src {
		r.Close()
	}
}

// Required reports whether an instance without credentials needs a bundle.
func (c *Client) Required() bool { return c.cfg.Required }

// Owner is the owner id the client stages and registers under.
func (c *Client) Owner() string { return c.cfg.Owner }

// Record is what one start of an instance registered (kept in
// metadata.json). It holds no secret: placeholders and the proxy token
// live only in agent.env.
type Record struct {
	Registered   bool     `json:"registered"`            // a bundle is registered at egressd for the instance id
	Credentialed bool     `json:"credentialed"`          // the bundle holds credentials
	Epoch        string   `json:"epoch,omitempty"`       // egressd's epoch at registration
	Credentials  []string `json:"credentials,omitempty"` // credential names, in request order
	Warning      string   `json:"warning,omitempty"`     // why the instance has no bundle
	// Lost says why the last re-registration after egressd forgot the
	// bundle (a restart) failed: the step and the underlying code. ""
	// when none failed since the bundle was registered at Epoch.
	Lost string `json:"lost,omitempty"`
}

// Grant is the outcome of Acquire: the record, the variables to add to
// the agent's environment (they override the request's env) and the
// origins of the staged credentials' destinations.
type Grant struct {
	Record Record            // what metadata.json keeps of the bundle
	Env    map[string]string // placeholders under the requested names, proxy and CA variables; empty when egress is degraded
	// Destinations holds each staged lease's destination origin (as
	// secretd recorded it: the request's, or the credential's own when
	// the request named none), in request order, without repeats. An
	// isolated instance's resolver answers for their hosts.
	Destinations []string
}

// unavailable is credentials.unavailable keeping the underlying code in
// the message.
func unavailable(step string, err error) error {
	code, msg := wire.CodeOf(err), "failed"
	var we *wire.Error
	if errors.As(err, &we) {
		msg = we.Msg
	}
	return wire.Wrap(api.CodeCredentialsUnavailable, fmt.Sprintf("%s: %s: %s; nothing was started", step, code, msg), err)
}

// Acquire stages creds at secretd under invocation, registers the bundle
// at egressd with allow (origins, every method) and a fresh proxy token,
// and returns the agent's egress variables. All or nothing: on any failure
// what was staged is revoked and the error is credentials.unavailable.
// isolated selects IsolatedProxyAddress as the proxy address and the
// namespace's loopback as NO_PROXY, and refuses a credential whose
// destination (named, or the one the credential allows) is a
// literal-loopback origin with instance.invalid.
func (c *Client) Acquire(ctx context.Context, invocation string, creds []api.CredentialSpec, allow []string, isolated bool) (*Grant, error) {
	log := c.cfg.Logger
	if c.eg == nil || (len(creds) > 0 && c.sd == nil) {
		err := wire.Errorf(wire.CodeUnavailable, "egressd or secretd is not configured")
		if len(creds) == 0 && !c.cfg.Required {
			return c.degraded(invocation, err), nil
		}
		return nil, unavailable("egress", err)
	}
	info, err := c.eg.Info(ctx)
	if err != nil {
		if len(creds) == 0 && !c.cfg.Required {
			return c.degraded(invocation, err), nil
		}
		return nil, unavailable("egress.info", err)
	}
	handles := make([][]byte, 0, len(creds))
	env := map[string]string{}
	names := make([]string, 0, len(creds))
	var dests []string
	fail := func(step string, err error) (*Grant, error) {
		c.revoke(ctx, invocation, len(handles) > 0)
		clear(handles)
		log.Warn("instance.egress_failed", slog.String("instance", invocation), slog.String("step", step), slog.String("code", wire.CodeOf(err)))
		return nil, unavailable(step, err)
	}
	for _, cr := range creds {
		st, err := c.sd.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: cr.Credential, Destination: cr.Destination,
			Invocation: invocation, Owner: c.cfg.Owner, Target: cr.Target})
		if err != nil {
			return fail("lease.stage "+cr.Credential, err)
		}
		handles = append(handles, st.Handle)
		if isolated && cr.Destination == "" {
			// The credential chose its one destination: an isolated
			// instance's loopback is its own, so a loopback one is refused.
			meta, err := c.sd.LeaseLookup(ctx, st.Handle)
			if err != nil {
				return fail("lease.lookup "+cr.Credential, err)
			}
			if err := loopbackDestination(cr.Credential, meta.Destination); err != nil {
				c.revoke(ctx, invocation, true)
				clear(handles)
				return nil, err
			}
		}
		env[cr.Env] = st.Placeholder
		names = append(names, cr.Credential)
		dest, err := c.destination(ctx, cr, st.Handle)
		if err != nil {
			return fail("lease.lookup "+cr.Credential, err)
		}
		if !slices.Contains(dests, dest) {
			dests = append(dests, dest)
		}
		fault.Point(fault.ProvisionLease)
	}
	token, err := NewProxyToken()
	if err != nil {
		return fail("proxy token", err)
	}
	req := &egressdapi.BundleRegisterRequest{Handles: handles, Invocation: invocation, Owner: c.cfg.Owner, Policy: policyOf(allow), ProxyToken: token}
	reg, err := c.register(ctx, req)
	if err != nil {
		return fail("bundle.register", err)
	}
	clear(handles)
	fault.Point(fault.ProvisionBundle)
	c.observe(reg.Epoch)
	addr := info.ProxyAddress
	if isolated {
		addr = IsolatedProxyAddress
	}
	wgetrc := ""
	if c.cfg.PublicDir != "" {
		var werr error
		if wgetrc, werr = ensureWgetRC(c.cfg.PublicDir, info.CABundlePath); werr != nil {
			log.Warn("instance.wgetrc", slog.String("instance", invocation), slog.Any("err", werr))
		}
	}
	ProxyEnv(env, Vars{Invocation: invocation, Token: token, Addr: addr, CABundle: info.CABundlePath, WgetRC: wgetrc, Isolated: isolated})
	log.Info("instance.egress", slog.String("instance", invocation), slog.Int("credentials", len(creds)),
		slog.String("epoch", reg.Epoch), slog.Int("allow", len(allow)))
	return &Grant{Record: Record{Registered: true, Credentialed: len(creds) > 0, Epoch: reg.Epoch, Credentials: names}, Env: env,
		Destinations: dests}, nil
}

// destination is the destination origin of the lease cr staged (handle):
// the one cr names, or, when it names none, the one secretd chose
// (lease.lookup, a stager's op: the handle stays with us).
func (c *Client) destination(ctx context.Context, cr api.CredentialSpec, handle []byte) (string, error) {
	if cr.Destination != "" {
		if o, err := netguard.CanonicalOrigin(cr.Destination); err == nil {
			return o, nil // secretd accepted it, so it is an origin
		}
	}
	m, err := c.sd.LeaseLookup(ctx, handle)
	if err != nil {
		return "", err
	}
	return m.Destination, nil
}

// degraded is the grant of an instance without credentials when egressd
// cannot be reached and bundles are not required: no proxy environment.
func (c *Client) degraded(invocation string, err error) *Grant {
	w := "egressd unreachable at start (" + wire.CodeOf(err) + "): the agent has no egress bundle and no proxy environment (-egress-required=false)"
	c.cfg.Logger.Warn("instance.egress_degraded", slog.String("instance", invocation), slog.String("warning", w))
	return &Grant{Record: Record{Warning: w}, Env: map[string]string{}}
}

// Release drops invocation's bundle at egressd and revokes what is left of
// its leases at secretd (stop and destroy), both limited to the client's
// owner id. It reports whether both daemons answered; the errors are
// logged: a daemon that is down has lost them anyway, and one that did
// not answer is swept later (Manager's owner sweep).
func (c *Client) Release(ctx context.Context, invocation string, rec *Record) bool {
	if rec == nil || !rec.Registered {
		return true
	}
	ctx = context.WithoutCancel(ctx)
	_, berr := c.dropOwned(ctx, invocation)
	ok := berr == nil
	if rec.Credentialed {
		_, lerr := c.revokeOwned(ctx, invocation)
		ok = ok && lerr == nil
	}
	c.cfg.Logger.Info("instance.egress_released", slog.String("instance", invocation), slog.Bool("complete", ok))
	return ok
}

// revoke revokes invocation's unconsumed leases (of the client's owner)
// when any were staged.
func (c *Client) revoke(ctx context.Context, invocation string, staged bool) {
	if staged {
		_, _ = c.revokeOwned(ctx, invocation)
	}
}

// revokeOwned revokes invocation's unconsumed leases of the client's
// owner and returns how many went; errors are logged.
func (c *Client) revokeOwned(ctx context.Context, invocation string) (int, error) {
	if c.sd == nil {
		return 0, nil
	}
	r, err := c.sd.LeaseRevokeOwned(context.WithoutCancel(ctx), invocation, c.cfg.Owner)
	if err != nil {
		c.cfg.Logger.Warn("instance.lease_revoke", slog.String("instance", invocation), slog.String("code", wire.CodeOf(err)))
		return 0, err
	}
	return r.Revoked, nil
}

// dropOwned drops invocation's bundle if it carries the client's owner
// id and reports whether one was dropped. No bundle, or another owner's,
// is not an error: nothing of ours is left there. Other errors are
// logged.
func (c *Client) dropOwned(ctx context.Context, invocation string) (bool, error) {
	if c.eg == nil {
		return false, nil
	}
	err := c.eg.BundleDropOwned(context.WithoutCancel(ctx), invocation, c.cfg.Owner)
	switch {
	case err == nil:
		return true, nil
	case wire.HasCode(err, egressdapi.CodeBundleUnknown), wire.HasCode(err, egressdapi.CodeBundleOwnerMismatch):
		return false, nil
	}
	c.cfg.Logger.Warn("instance.bundle_drop", slog.String("instance", invocation), slog.String("code", wire.CodeOf(err)))
	return false, err
}

// NewProxyToken returns a proxy token: 32 random bytes as unpadded
// base64url (egressdapi.ProxyTokenLen characters).
func NewProxyToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Check reports whether egressd and secretd answer (egress.info, health).
// Errors: credentials.unavailable.
func (c *Client) Check(ctx context.Context) error {
	if c.eg == nil || c.sd == nil {
		return unavailable("egress", wire.Errorf(wire.CodeUnavailable, "egressd or secretd is not configured"))
	}
	if _, err := c.eg.Info(ctx); err != nil {
		return unavailable("egress.info", err)
	}
	if _, err := healthapi.Get(ctx, c.src[0]); err != nil {
		return unavailable("secretd health", err)
	}
	return nil
}
