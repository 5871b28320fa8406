package vcsim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vapi/rest"
	_ "github.com/vmware/govmomi/vapi/simulator" // the vAPI (REST, tagging) endpoints
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// Defaults of Options.
const (
	DefaultNamePattern    = "node-%d"
	DefaultZoneCategory   = "k8s-zone"
	DefaultRegionCategory = "k8s-region"
	DefaultNetwork        = "VM Network"
	DefaultUsername       = "user"
	DefaultPassword       = "pass"
	DefaultListen         = "127.0.0.1:0"
)

// Layout is the inventory: per datacenter, clusters of hosts and standalone
// hosts. Each cluster and each standalone host is a zone, each datacenter a
// region. The zero Layout is DefaultLayout.
type Layout struct {
	Datacenters     int // at least 1
	Clusters        int // per datacenter
	ClusterHosts    int // hosts per cluster, at least 1 when Clusters > 0
	StandaloneHosts int // per datacenter
}

// DefaultLayout is one datacenter (DC0) with a cluster of three hosts
// (DC0_C0, zone-a) and one standalone host (DC0_H0, zone-b): node VMs
// alternate between the two zones.
var DefaultLayout = Layout{Datacenters: 1, Clusters: 1, ClusterHosts: 3, StandaloneHosts: 1}

// Options configure Start. The zero value is a usable server: no node VMs,
// DefaultLayout, TLS, user/pass, on a free loopback port.
type Options struct {
	// VMs is the number of node VMs, named by NamePattern with their index
	// (0, 1, …), spread round-robin over the zones (clusters first, then
	// standalone hosts, datacenter by datacenter), powered on, each with a
	// guest hostname equal to its name and an IPv4 address (see NodeIPv4).
	VMs int
	// NamePattern is a fmt pattern with one %d (default "node-%d").
	NamePattern string
	// IPv6 also gives each node an IPv6 address (see NodeIPv6).
	IPv6 bool
	// Network is the network name the guest NICs report (default "VM Network",
	// the hosts' standard port group).
	Network string
	// Layout is the datacenter, cluster and host layout (default DefaultLayout).
	Layout Layout
	// ZoneCategory and RegionCategory name the tag categories (defaults
	// "k8s-zone" and "k8s-region", as upstream's documentation uses).
	ZoneCategory, RegionCategory string

	// Listen is the address to serve on (default "127.0.0.1:0": a free port).
	Listen string
	// DisableTLS serves plain HTTP; by default the server has a fresh
	// self-signed certificate (see Server.CACertPEM, CAFile, Thumbprint).
	DisableTLS bool
	// Username and Password are the only credentials accepted, by SOAP and
	// REST logins (defaults "user" and "pass").
	Username, Password string
	// SessionTimeout, when set, expires sessions idle for that long, as a
	// real vCenter does (vcsim keeps sessions forever by default).
	SessionTimeout time.Duration
	// Latency delays every request, standing in for a real vCenter's.
	Latency time.Duration
	// CAFile is where to write the certificate in PEM (default: a file in a
	// temporary folder that Close removes; a file named here is kept).
	CAFile string
	// Control serves the control API under ControlPath (see Remote).
	Control bool
}

// Server is a running simulated vCenter. Its methods are safe for
// concurrent use.
type Server struct {
	opts  Options
	model *simulator.Model
	sim   *simulator.Server // the simulator's own listener; see Start
	front *front
	c     *vim25.Client // in-process: bypasses HTTP, counting and latency
	addr  string        // host:port clients use
	url   *url.URL      // without user info

	tlsCert tls.Certificate
	caCert  *x509.Certificate
	dir     string // CA file and other files of this server

	inv *inventory

	mu      sync.Mutex
	http    *http.Server
	closed  bool
	serving sync.WaitGroup
	close   sync.Once
}

// Start creates the inventory and serves it until Close.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("vcsim: listen on %s: %w", opts.Listen, err)
	}
	s := &Server{opts: opts, addr: ln.Addr().String()}
	started := false
	defer func() {
		if !started {
			_ = ln.Close()
			s.Close()
		}
	}()
	if s.dir, err = os.MkdirTemp("", "stratus-vcsim-"); err != nil {
		return nil, fmt.Errorf("vcsim: %w", err)
	}
	scheme := "https"
	if opts.DisableTLS {
		scheme = "http"
	} else {
		host, _, _ := net.SplitHostPort(s.addr)
		if s.tlsCert, s.caCert, err = selfSigned(host); err != nil {
			return nil, fmt.Errorf("vcsim: %w", err)
		}
		if err := os.WriteFile(s.CAFile(), certPEM(s.caCert), 0o644); err != nil {
			return nil, fmt.Errorf("vcsim: write CA file: %w", err)
		}
	}
	s.url = &url.URL{Scheme: scheme, Host: s.addr, Path: vim25.Path}

	l := opts.Layout
	s.model = simulator.VPX()
	s.model.Datacenter = l.Datacenters
	s.model.Cluster = l.Clusters
	s.model.ClusterHost = l.ClusterHosts
	s.model.Host = l.StandaloneHosts
	s.model.Machine = 0   // node VMs are created below, named and placed by us
	s.model.Portgroup = 0 // NICs on the hosts' standard "VM Network"
	if err := s.model.Create(); err != nil {
		return nil, fmt.Errorf("vcsim: create the inventory: %w", err)
	}
	svc := s.model.Service
	svc.RegisterEndpoints = true
	// The simulator only serves through its own listener, whose handler
	// cannot be wrapped once it runs. It gets a throwaway loopback port
	// (kept open: the vAPI simulator calls back into it) and our listener
	// serves the same handler behind counting, latency and faults, and can
	// stop and start again on the same address.
	svc.Listen = &url.URL{Host: "127.0.0.1:0", User: url.UserPassword(opts.Username, opts.Password)}
	if !opts.DisableTLS {
		svc.TLS = &tls.Config{Certificates: []tls.Certificate{s.tlsCert}}
	}
	if s.c, err = vim25.NewClient(ctx, svc); err != nil {
		return nil, fmt.Errorf("vcsim: in-process client: %w", err)
	}
	if opts.SessionTimeout > 0 {
		// Read at each login, so it must be in place before the first.
		om := object.NewOptionManager(s.c, *s.c.ServiceContent.Setting)
		err := om.Update(ctx, []types.BaseOptionValue{&types.OptionValue{
			Key: "config.vmacore.soap.sessionTimeout", Value: opts.SessionTimeout.String(),
		}})
		if err != nil {
			return nil, fmt.Errorf("vcsim: set the session timeout: %w", err)
		}
	}
	s.sim = svc.NewServer()
	s.pointAt(s.sim.URL.Host)
	s.front = newFront(svc.ServeMux, opts.Latency)
	if opts.Control {
		s.front.control = controlHandler(s)
	}
	s.serve(ln)
	started = true

	if s.inv, err = newInventory(ctx, s); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (o *Options) setDefaults() error {
	if o.VMs < 0 {
		return fmt.Errorf("vcsim: VMs is %d, want 0 or more", o.VMs)
	}
	if o.NamePattern == "" {
		o.NamePattern = DefaultNamePattern
	}
	if a, b := fmt.Sprintf(o.NamePattern, 1), fmt.Sprintf(o.NamePattern, 2); a == b || strings.Contains(a, "%!") {
		return fmt.Errorf("vcsim: NamePattern %q must contain exactly one integer verb such as %%d", o.NamePattern)
	}
	if o.Network == "" {
		o.Network = DefaultNetwork
	}
	if o.Layout == (Layout{}) {
		o.Layout = DefaultLayout
	}
	l := o.Layout
	switch {
	case l.Datacenters < 1:
		return fmt.Errorf("vcsim: Layout.Datacenters is %d, want at least 1", l.Datacenters)
	case l.Clusters < 0 || l.StandaloneHosts < 0 || l.ClusterHosts < 0:
		return fmt.Errorf("vcsim: Layout %+v has a negative count", l)
	case l.Clusters+l.StandaloneHosts == 0:
		return fmt.Errorf("vcsim: Layout %+v has no cluster and no standalone host for VMs", l)
	case l.Clusters > 0 && l.ClusterHosts == 0:
		return fmt.Errorf("vcsim: Layout.ClusterHosts is 0 with %d clusters, want at least 1", l.Clusters)
	}
	if o.ZoneCategory == "" {
		o.ZoneCategory = DefaultZoneCategory
	}
	if o.RegionCategory == "" {
		o.RegionCategory = DefaultRegionCategory
	}
	if o.ZoneCategory == o.RegionCategory {
		return fmt.Errorf("vcsim: ZoneCategory and RegionCategory are both %q", o.ZoneCategory)
	}
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.Username == "" {
		o.Username = DefaultUsername
	}
	if o.Password == "" {
		o.Password = DefaultPassword
	}
	if o.SessionTimeout < 0 || o.Latency < 0 {
		return errors.New("vcsim: SessionTimeout and Latency must not be negative")
	}
	return nil
}

// pointAt makes the URLs the simulator hands out (service tickets, NFC
// leases, lookup-service endpoints) name our address instead of the
// simulator's own listener at old.
func (s *Server) pointAt(old string) {
	ctx := &simulator.Context{Context: context.Background(), Map: s.model.Map()}
	sm := s.model.Map().SessionManager()
	ctx.WithLock(sm, func() { sm.ServiceHostName = s.addr })
	om := s.model.Map().OptionManager()
	ctx.WithLock(om, func() {
		for _, o := range om.Setting {
			v := o.GetOptionValue()
			if str, ok := v.Value.(string); ok && strings.Contains(str, old) {
				v.Value = strings.ReplaceAll(str, old, s.addr)
			}
		}
	})
}

// serve starts answering on ln.
func (s *Server) serve(ln net.Listener) {
	if !s.opts.DisableTLS {
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{s.tlsCert}, NextProtos: []string{"http/1.1"}})
	}
	// Handshake errors of clients that do not trust the certificate are
	// expected in tests; they are not worth a log line.
	srv := &http.Server{Handler: s.front, ReadHeaderTimeout: time.Minute, ErrorLog: log.New(io.Discard, "", 0)}
	s.mu.Lock()
	s.http = srv
	s.mu.Unlock()
	s.serving.Add(1)
	go func() {
		defer s.serving.Done()
		_ = srv.Serve(ln) // returns on Stop or Close
	}()
}

// Stop closes the listener and every connection: clients get "connection
// refused", as from a vCenter that is down. The inventory, tags and
// sessions stay; Start serves them again on the same address.
func (s *Server) Stop() {
	s.mu.Lock()
	srv := s.http
	s.http = nil
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
	s.serving.Wait()
}

// Start serves again after Stop, on the same address. It is a no-op on a
// running server.
func (s *Server) Start() error {
	s.mu.Lock()
	running, closed := s.http != nil, s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return fmt.Errorf("vcsim: start %s: the server is closed", s.addr)
	case running:
		return nil
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("vcsim: listen again on %s: %w", s.addr, err)
	}
	s.serve(ln)
	return nil
}

// Running reports whether the server answers (not stopped nor closed).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.http != nil
}

// Close stops the server for good and removes its files: the simulator's
// temporary datastore folders and the CA file (unless Options.CAFile named
// it). It is safe to call twice.
func (s *Server) Close() {
	s.close.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.Stop()
		if s.sim != nil {
			s.sim.Close()
		}
		if s.model != nil && s.model.Service != nil {
			s.model.Remove()
		}
		if s.dir != "" {
			_ = os.RemoveAll(s.dir)
		}
	})
}

// URL returns the SOAP endpoint, https://host:port/sdk (http without
// TLS), without credentials.
func (s *Server) URL() *url.URL {
	u := *s.url
	return &u
}

// Addr returns host:port of the server.
func (s *Server) Addr() string { return s.addr }

// Username returns the accepted user name.
func (s *Server) Username() string { return s.opts.Username }

// Password returns the accepted password.
func (s *Server) Password() string { return s.opts.Password }

// Userinfo returns the accepted credentials, for govmomi's Login.
func (s *Server) Userinfo() *url.Userinfo {
	return url.UserPassword(s.opts.Username, s.opts.Password)
}

// TLS reports whether the server serves HTTPS.
func (s *Server) TLS() bool { return !s.opts.DisableTLS }

// CACertPEM returns the server's self-signed certificate (its own CA) in
// PEM, or nil without TLS.
func (s *Server) CACertPEM() []byte {
	if s.caCert == nil {
		return nil
	}
	return certPEM(s.caCert)
}

// CAFile returns the path of a file holding CACertPEM (removed by Close),
// or "" without TLS.
func (s *Server) CAFile() string {
	switch {
	case s.opts.DisableTLS:
		return ""
	case s.opts.CAFile != "":
		return s.opts.CAFile
	}
	return filepath.Join(s.dir, "ca.pem")
}

// Thumbprint returns the SHA-1 thumbprint of the certificate in the form
// vSphere clients pin ("AB:CD:…"), or "" without TLS.
func (s *Server) Thumbprint() string {
	if s.caCert == nil {
		return ""
	}
	return soap.ThumbprintSHA1(s.caCert)
}

// Client returns a govmomi client logged in with the server's credentials,
// verifying the certificate with the CA. Its requests are counted.
func (s *Server) Client(ctx context.Context) (*govmomi.Client, error) {
	sc, err := s.soapClient(s.url)
	if err != nil {
		return nil, err
	}
	vc, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return nil, fmt.Errorf("vcsim: connect to %s: %w", s.url, err)
	}
	c := &govmomi.Client{Client: vc, SessionManager: session.NewManager(vc)}
	if err := c.Login(ctx, s.Userinfo()); err != nil {
		return nil, fmt.Errorf("vcsim: log in to %s: %w", s.url, err)
	}
	return c, nil
}

// RESTClient returns a vAPI (REST) client logged in with the server's
// credentials, on a new SOAP connection that is not logged in. Its requests
// are counted.
func (s *Server) RESTClient(ctx context.Context) (*rest.Client, error) {
	return s.restClient(ctx, s.url)
}

func (s *Server) restClient(ctx context.Context, u *url.URL) (*rest.Client, error) {
	sc, err := s.soapClient(u)
	if err != nil {
		return nil, err
	}
	vc, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return nil, fmt.Errorf("vcsim: connect to %s: %w", u, err)
	}
	rc := rest.NewClient(vc)
	if err := rc.Login(ctx, s.Userinfo()); err != nil {
		return nil, fmt.Errorf("vcsim: REST login to %s: %w", u, err)
	}
	return rc, nil
}

// soapClient returns a SOAP client for u that trusts the server's CA.
func (s *Server) soapClient(u *url.URL) (*soap.Client, error) {
	sc := soap.NewClient(u, false)
	if s.TLS() {
		if err := sc.SetRootCAs(s.CAFile()); err != nil {
			return nil, fmt.Errorf("vcsim: trust %s: %w", s.CAFile(), err)
		}
	}
	return sc, nil
}

// Requests returns the requests counted since Start or ResetRequests.
func (s *Server) Requests() Requests { return s.front.snapshot() }

// ResetRequests sets every request count to zero.
func (s *Server) ResetRequests() { s.front.reset() }

// FailMethod makes the next times calls of the SOAP method (e.g.
// "RetrievePropertiesEx", or "*" for all) answer with fault (a
// SystemError when nil); times <= 0 means until ClearFaults. The
// simulator checks faults after authentication, and they also hit this
// package's own run-time operations that call the method.
func (s *Server) FailMethod(method string, fault types.BaseMethodFault, times int) {
	rule := &simulator.FaultInjectionRule{
		MethodName:  method,
		ObjectType:  "*",
		ObjectName:  "*",
		Probability: 1,
		FaultType:   simulator.FaultTypeGeneric,
		Message:     "vcsim: injected fault",
		Enabled:     true,
	}
	if fault != nil {
		rule.FaultType, rule.Fault = simulator.FaultTypeCustom, fault
	}
	if times > 0 {
		rule.MaxCount = times
	}
	s.model.Service.AddFaultRule(rule)
}

// FaultInjector returns the simulator's fault injector, for rules beyond
// FailMethod (by object, by property filter, with a probability).
func (s *Server) FaultInjector() *simulator.FaultInjector {
	return s.model.Service.FaultInjector()
}

// FailHTTP makes the next times requests with the given counting key (a
// SOAP operation, or a REST key as in Requests.REST) answer with the HTTP
// status before reaching the simulator; times <= 0 means until ClearFaults.
func (s *Server) FailHTTP(key string, status, times int) {
	s.front.fail(key, status, times)
}

// SetLatency delays every request by d on top of Options.Latency, from the
// next request on, until set again (0 ends it): a vCenter that slows down
// for a while. ClearFaults does not end it.
func (s *Server) SetLatency(d time.Duration) {
	s.front.mu.Lock()
	s.front.extra = max(d, 0)
	s.front.mu.Unlock()
}

// ClearFaults removes every FailMethod, FaultInjector and FailHTTP rule.
func (s *Server) ClearFaults() {
	s.model.Service.ClearFaultRules()
	s.front.clearFaults()
}
