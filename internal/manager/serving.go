package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	cliflag "k8s.io/component-base/cli/flag"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// healthPaths are served without authentication or authorization, as upstream's
// --authorization-always-allow-paths default.
var healthPaths = []string{"/healthz", "/readyz", "/livez"}

// selfSignedPairName is the base name of the generated serving certificate in
// --cert-dir, as upstream names it.
const selfSignedPairName = "cloud-controller-manager"

// healthChecks is the set of named checks behind /healthz, /readyz and /livez.
// Checks may be added while the server runs (controllers start after leadership
// is acquired).
type healthChecks struct {
	mu     sync.RWMutex
	checks map[string]healthz.Checker
}

func newHealthChecks() *healthChecks {
	return &healthChecks{checks: map[string]healthz.Checker{"ping": healthz.Ping}}
}

// add registers a check; the name is also its sub-path (/healthz/<name>).
func (h *healthChecks) add(name string, check healthz.Checker) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks[name] = check
}

// ServeHTTP serves the aggregate at "/" and single checks at "/<name>", through
// controller-runtime's healthz handler over a snapshot of the checks.
func (h *healthChecks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.RLock()
	snapshot := maps.Clone(h.checks)
	h.mu.RUnlock()
	(&healthz.Handler{Checks: snapshot}).ServeHTTP(w, r)
}

// secureServer serves the health paths anonymously and everything else (/metrics)
// behind delegated authentication (TokenReview) and authorization
// (SubjectAccessReview). It runs on every replica, leader or not.
type secureServer struct {
	listener net.Listener
	server   *http.Server
	log      logr.Logger
}

// newSecureServer binds --bind-address:--secure-port (so a busy port is a
// start-up error) and prepares the TLS configuration. It returns nil when
// --secure-port is 0. Runnables it needs (a certificate watcher) are added to mgr.
func newSecureServer(o *Options, mgr manager.Manager, authCfg *rest.Config, health http.Handler, log logr.Logger) (*secureServer, error) {
	if o.SecurePort == 0 {
		log.Info("secure serving disabled (--secure-port=0): no /healthz and no /metrics")
		return nil, nil
	}
	tlsCfg, err := o.tlsConfig(mgr, log)
	if err != nil {
		return nil, err
	}
	httpClient, err := rest.HTTPClientFor(authCfg)
	if err != nil {
		return nil, fmt.Errorf("delegated authentication client: %w", err)
	}
	auth, err := newDelegatedAuth(authCfg, httpClient)
	if err != nil {
		return nil, err
	}
	protected := http.NewServeMux()
	protected.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	if o.Profiling {
		addProfiling(protected)
	}
	guarded := auth.wrap(log.WithName("authn"), protected)

	mux := http.NewServeMux()
	for _, p := range healthPaths {
		h := http.StripPrefix(p, health)
		mux.Handle(p, h)
		mux.Handle(p+"/", h)
	}
	mux.Handle("/", guarded)

	addr := net.JoinHostPort(o.BindAddress, strconv.Itoa(o.SecurePort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--secure-port %d: listen on %s: %w", o.SecurePort, addr, err)
	}
	return &secureServer{
		listener: tls.NewListener(ln, tlsCfg),
		server: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 32 * time.Second,
		},
		log: log,
	}, nil
}

// addProfiling serves net/http/pprof under /debug/pprof/ as upstream's
// --profiling does. It goes on the guarded mux: a profile shows the
// process's memory and goroutines, so only an identity allowed to get the
// path (as for /metrics) may read it.
func addProfiling(mux *http.ServeMux) {
	mux.Handle("/debug/pprof", http.RedirectHandler("/debug/pprof/", http.StatusFound))
	mux.HandleFunc("/debug/pprof/", pprof.Index) // also every named profile: heap, goroutine, ...
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// Start serves until ctx is done, then shuts down gracefully.
func (s *secureServer) Start(ctx context.Context) error {
	s.log.Info("serving securely", "address", s.listener.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- s.server.Serve(s.listener) }()
	select {
	case err := <-errc:
		return fmt.Errorf("secure serving on %s: %w", s.listener.Addr(), err)
	case <-ctx.Done():
	}
	// Health and metrics requests are short; a client that holds its connection
	// open must not delay the shutdown of the controllers.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.server.Shutdown(shutdownCtx); err != nil {
		_ = s.server.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// NeedLeaderElection is false: standbys serve health and metrics too.
func (s *secureServer) NeedLeaderElection() bool { return false }

// tlsConfig returns the secure port's TLS configuration (servingTLS of the
// --tls-* and --cert-dir flags).
func (o *Options) tlsConfig(mgr manager.Manager, log logr.Logger) (*tls.Config, error) {
	return servingTLS(mgr, log, tlsFlags{
		prefix: "", certFile: o.TLSCertFile, keyFile: o.TLSPrivateKeyFile, certDir: o.CertDir,
		pairName: selfSignedPairName, minVersion: o.TLSMinVersion, cipherSuites: o.TLSCipherSuites,
	})
}

// tlsFlags are the TLS flags of one port: the secure port's (--tls-*,
// --cert-dir) or the webhooks' (--webhook-tls-*, --webhook-cert-dir).
type tlsFlags struct {
	prefix            string // of the flag names in errors: "" or "webhook-"
	certFile, keyFile string
	certDir           string
	pairName          string // of the self-signed pair in certDir
	minVersion        string
	cipherSuites      []string
}

// servingTLS returns a serving TLS configuration: the given certificate files
// (reloaded when they change), or a self-signed certificate for localhost, kept in
// the cert dir when set and in memory otherwise.
func servingTLS(mgr manager.Manager, log logr.Logger, f tlsFlags) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	if f.minVersion != "" {
		v, err := cliflag.TLSVersion(f.minVersion)
		if err != nil {
			return nil, fmt.Errorf("--%stls-min-version: %w", f.prefix, err)
		}
		cfg.MinVersion = v
	}
	if len(f.cipherSuites) > 0 {
		suites, err := cliflag.TLSCipherSuites(f.cipherSuites)
		if err != nil {
			return nil, fmt.Errorf("--%stls-cipher-suites: %w", f.prefix, err)
		}
		cfg.CipherSuites = suites
	}
	if f.certFile != "" {
		w, err := certwatcher.New(f.certFile, f.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--%stls-cert-file %s / --%stls-private-key-file %s: %w", f.prefix, f.certFile, f.prefix, f.keyFile, err)
		}
		if err := mgr.Add(w); err != nil {
			return nil, err
		}
		cfg.GetCertificate = w.GetCertificate
		return cfg, nil
	}
	pair, err := selfSignedCert(f.certDir, f.pairName, "--"+f.prefix+"cert-dir", log)
	if err != nil {
		return nil, err
	}
	cfg.Certificates = []tls.Certificate{pair}
	return cfg, nil
}

// selfSignedCert returns the certificate pairName kept in dir, or generates one
// for localhost and 127.0.0.1 (and writes it to dir when dir is set); flag
// names dir in errors.
func selfSignedCert(dir, pairName, flag string, log logr.Logger) (tls.Certificate, error) {
	var certPath, keyPath string
	if dir != "" {
		certPath = filepath.Join(dir, pairName+".crt")
		keyPath = filepath.Join(dir, pairName+".key")
		if ok, err := cert.CanReadCertAndKey(certPath, keyPath); err != nil {
			return tls.Certificate{}, fmt.Errorf("%s %s: %w", flag, dir, err)
		} else if ok {
			pair, err := tls.LoadX509KeyPair(certPath, keyPath)
			if err != nil {
				return tls.Certificate{}, fmt.Errorf("%s %s: %w", flag, dir, err)
			}
			return pair, nil
		}
	}
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("localhost", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate self-signed serving certificate: %w", err)
	}
	if dir != "" {
		if err := cert.WriteCert(certPath, certPEM); err != nil {
			return tls.Certificate{}, fmt.Errorf("%s %s: %w", flag, dir, err)
		}
		if err := keyutil.WriteKey(keyPath, keyPEM); err != nil {
			return tls.Certificate{}, fmt.Errorf("%s %s: %w", flag, dir, err)
		}
		log.Info("generated self-signed serving certificate", "cert", certPath)
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}
