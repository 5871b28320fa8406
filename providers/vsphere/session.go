package vsphere

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/session/keepalive"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"
)

// Session timing. vCenter drops idle sessions after 30 minutes by default;
// a keepalive well inside that keeps one session for the process's life.
const (
	defaultKeepalive       = 5 * time.Minute
	tlsHandshakeTimeout    = 10 * time.Second
	defaultCallTimeout     = 2 * time.Minute
	responseHeaderTimeout  = 2 * time.Minute
	maxLoginFailureBackoff = 30 * time.Second
)

// conn is the provider's connection to one vCenter: one long-lived SOAP
// session and one vAPI REST session (for tags), each with a keepalive, and
// a new login whenever vCenter says the session is gone.
type conn struct {
	vc        *VCenter
	creds     *credentials
	keepalive time.Duration
	// wrap, when set, wraps the HTTP transport (tests count requests).
	wrap func(http.RoundTripper) http.RoundTripper

	mu   sync.Mutex
	vim  *vim25.Client
	gen  uint64 // bumped at every SOAP login; views and collectors belong to one
	ka   *keepalive.HandlerSOAP
	rest *rest.Client
	rgen uint64 // the SOAP generation the REST client belongs to
	rka  *keepalive.HandlerREST
	// lastLoginErr and lastLoginAt make repeated logins with refused
	// credentials wait, so vCenter does not lock the account out.
	lastLoginErr error
	lastLoginAt  time.Time
	refused      credential
	credsChanged chan struct{}
}

func newConn(vc *VCenter, creds *credentials) *conn {
	return &conn{vc: vc, creds: creds, keepalive: defaultKeepalive, credsChanged: make(chan struct{}, 1)}
}

// sdkURL is vCenter's SOAP endpoint.
func (c *conn) sdkURL() *url.URL {
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(c.vc.Server, strconv.Itoa(c.vc.Port)), Path: "/sdk"}
}

// credentialsChanged wakes a watch waiting to retry, so that new
// credentials are tried at once.
func (c *conn) credentialsChanged() {
	select {
	case c.credsChanged <- struct{}{}:
	default:
	}
}

// client returns a logged-in SOAP client and its session generation.
func (c *conn) client(ctx context.Context) (*vim25.Client, uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.vim != nil {
		return c.vim, c.gen, nil
	}
	cred, err := c.creds.get()
	if err != nil {
		return nil, 0, err
	}
	// Refused credentials are not tried again for a while (vCenter may lock
	// the account out), unless they changed.
	if c.lastLoginErr != nil && cred == c.refused && time.Since(c.lastLoginAt) < maxLoginFailureBackoff {
		return nil, 0, c.lastLoginErr
	}
	vc, ka, err := c.login(ctx, cred)
	c.lastLoginAt = time.Now()
	if err != nil {
		if errors.Is(err, ErrInvalidLogin) {
			c.lastLoginErr, c.refused = err, cred
		}
		return nil, 0, err
	}
	c.lastLoginErr = nil
	c.vim, c.ka = vc, ka
	c.gen++
	return c.vim, c.gen, nil
}

// newSOAPClient returns an unauthenticated SOAP client with the config's
// TLS settings.
func (c *conn) newSOAPClient() (*soap.Client, error) {
	u := c.sdkURL()
	sc := soap.NewClient(u, c.vc.InsecureFlag)
	if c.vc.CAFile != "" {
		if err := sc.SetRootCAs(c.vc.CAFile); err != nil {
			return nil, fmt.Errorf("vCenter %s: caFile %s: %w", c.vc.Server, c.vc.CAFile, err)
		}
	}
	if c.vc.Thumbprint != "" {
		sc.SetThumbprint(u.Host, c.vc.Thumbprint)
	}
	tr := sc.DefaultTransport()
	tr.TLSHandshakeTimeout = tlsHandshakeTimeout
	tr.ResponseHeaderTimeout = responseHeaderTimeout
	sc.Transport = c.transport(tr)
	return sc, nil
}

func (c *conn) transport(rt http.RoundTripper) http.RoundTripper {
	rt = statusTransport{next: rt}
	if c.wrap != nil {
		rt = c.wrap(rt)
	}
	return rt
}

// login opens a SOAP session with the current credentials.
func (c *conn) login(ctx context.Context, cred credential) (*vim25.Client, *keepalive.HandlerSOAP, error) {
	sc, err := c.newSOAPClient()
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	vc, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return nil, nil, classify(fmt.Sprintf("connect to vCenter %s", c.vc.Server), err)
	}
	// Retries of temporary network errors as upstream (soapRoundtripCount),
	// inside the keepalive so that the keepalive's pings retry too.
	ka := keepalive.NewHandlerSOAP(vim25.Retry(sc, vim25.TemporaryNetworkError(c.vc.RoundTripCount)), c.keepalive, nil)
	vc.RoundTripper = ka
	if err := session.NewManager(vc).Login(ctx, url.UserPassword(cred.user, cred.password)); err != nil {
		if isInvalidLogin(err) {
			return nil, nil, fmt.Errorf("log in to vCenter %s as %q (credentials from %s): %w", c.vc.Server, cred.user, c.vc.credentialSource(), ErrInvalidLogin)
		}
		return nil, nil, classify(fmt.Sprintf("log in to vCenter %s as %q", c.vc.Server, cred.user), err)
	}
	return vc, ka, nil
}

// dropSession forgets the SOAP session of generation gen (and its REST
// session) after vCenter said it is gone; the next call logs in again.
func (c *conn) dropSession(gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.vim == nil {
		return
	}
	c.ka.Stop()
	c.vim, c.ka = nil, nil
	c.dropRESTLocked()
}

func (c *conn) dropRESTLocked() {
	if c.rka != nil {
		c.rka.Stop()
	}
	c.rest, c.rka = nil, nil
}

// do runs fn with a logged-in client, logging in again once when vCenter
// says the session is gone, and classifies the error.
func (c *conn) do(ctx context.Context, what string, fn func(ctx context.Context, vc *vim25.Client, gen uint64) error) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	for attempt := 0; ; attempt++ {
		vc, gen, err := c.client(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		err = fn(ctx, vc, gen)
		if isNotAuthenticated(err) && attempt == 0 {
			c.dropSession(gen)
			continue
		}
		return classify(what, err)
	}
}

// restClient returns a logged-in vAPI REST client (tags), logging in with
// the SOAP session's credentials when needed.
func (c *conn) restClient(ctx context.Context) (*rest.Client, error) {
	vc, gen, err := c.client(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rest != nil && c.rgen == gen {
		return c.rest, nil
	}
	c.dropRESTLocked()
	cred, err := c.creds.get()
	if err != nil {
		return nil, err
	}
	rc := rest.NewClient(vc)
	rc.Transport = c.transport(rc.Transport)
	rka := keepalive.NewHandlerREST(rc, c.keepalive, nil)
	rc.Transport = rka
	if err := rc.Login(ctx, url.UserPassword(cred.user, cred.password)); err != nil {
		if restStatus(err) == http.StatusUnauthorized {
			return nil, fmt.Errorf("log in to the vAPI endpoint of vCenter %s as %q: %w", c.vc.Server, cred.user, ErrInvalidLogin)
		}
		return nil, classify(fmt.Sprintf("log in to the vAPI endpoint of vCenter %s", c.vc.Server), err)
	}
	c.rest, c.rka, c.rgen = rc, rka, gen
	return rc, nil
}

// doREST runs fn with a logged-in REST client, logging in again once on 401.
func (c *conn) doREST(ctx context.Context, what string, fn func(context.Context, *rest.Client) error) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	for attempt := 0; ; attempt++ {
		rc, err := c.restClient(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		err = fn(ctx, rc)
		if restStatus(err) == http.StatusUnauthorized && attempt == 0 {
			c.mu.Lock()
			if c.rest == rc {
				c.dropRESTLocked()
			}
			c.mu.Unlock()
			continue
		}
		return classify(what, err)
	}
}

// close logs out of both sessions.
func (c *conn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c.rest != nil {
		_ = c.rest.Logout(ctx)
	}
	c.dropRESTLocked()
	if c.vim != nil {
		_ = session.NewManager(c.vim).Logout(ctx)
		c.ka.Stop()
	}
	c.vim, c.ka = nil, nil
}

// withDefaultTimeout bounds calls whose caller set no deadline.
func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, defaultCallTimeout)
}
