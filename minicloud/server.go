// Package minicloud is the reference cloud stratus manages on a laptop and
// in every test and benchmark: an IaaS HTTP API (instances, L4 load
// balancers, routes) with bearer-token authentication, per-token rate
// limits, paging, idempotency keys, asynchronous load-balancer
// provisioning, fault injection and call statistics; state in an embedded
// bbolt database; and a real data plane (package dataplane) that carries
// TCP and UDP traffic from load-balancer VIPs on loopback to instances.
//
// Run it with `stratus minicloud serve`, or in-process with NewServer and
// Serve (package minicloudtest wraps that for tests). The Go client is
// package client; docs/minicloud.md is the API reference. Package openstack
// serves an OpenStack dialect of the same cloud on the same server (Mount).
package minicloud

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/dataplane"
	"github.com/stratus-ccm/stratus/minicloud/store"
)

// Server is a minicloud API server with its store and data plane.
type Server struct {
	cfg   Config
	log   logr.Logger
	store *store.Store
	mux   *http.ServeMux

	limMu    sync.Mutex
	limiters map[string]*rate.Limiter

	statsMu sync.Mutex
	stats   api.Stats
	// byToken holds the same counts per token, so two clients sharing one
	// cloud (say, two managers in a benchmark) can be told apart.
	byToken map[string]*api.Stats
	faults  api.Faults

	// planeMu serializes reconciling load balancers into the data plane,
	// so the plane always ends up matching the latest stored state. It
	// guards timers, started and closed; plane is set once by Start
	// (never with NoDataPlane).
	planeMu sync.Mutex
	plane   atomic.Pointer[dataplane.Plane]
	timers  map[string]*time.Timer
	started bool
	closed  bool

	// targets maps instances to the load balancers that serve them
	// (directly or through a backend pool); pools maps backend pool names
	// to the load balancers that name them.
	targets refIndex
	pools   refIndex
	// aliases are further addresses of load balancers (SetAliases) and
	// aliasApplied the data-plane keys bound for them; both guarded by
	// planeMu.
	aliases      map[string][]netip.Addr
	aliasApplied map[string][]string
	// mounts are the dialects served beside the native API (Mount).
	mounts []mount
	// operations are the rate-limited, counted operations, for validating
	// fault filters.
	operations []string

	// routesChanged wakes the kernel-route sync (Config.KernelRoutes).
	routesChanged chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// NewServer opens the state database and returns a server ready to Serve.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	st, err := store.Open(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger,
		store:    st,
		limiters: map[string]*rate.Limiter{},
		timers:   map[string]*time.Timer{},

		aliases:      map[string][]netip.Addr{},
		aliasApplied: map[string][]string{},

		routesChanged: make(chan struct{}, 1),
	}
	s.resetStats()
	s.routes()
	return s, nil
}

// Handler returns the HTTP API. Load balancers only carry traffic once
// Serve (or Start) has started the data plane.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// Start starts the data plane and restores it from the stored state: active
// load balancers listen again and provisioning ones resume their countdown.
// The data plane stops when ctx is done or Close is called.
func (s *Server) Start(ctx context.Context) error {
	s.planeMu.Lock()
	if s.started || s.closed {
		s.planeMu.Unlock()
		return errors.New("minicloud: server already started or closed")
	}
	s.started = true
	if !s.cfg.NoDataPlane {
		s.plane.Store(dataplane.New(ctx, s.log.WithName("dataplane"), s.cfg.DataPlane))
	}
	s.planeMu.Unlock()

	var lbs []lbRecord
	err := s.store.View(func(tx *store.Tx) error {
		var err error
		lbs, _, err = store.List[lbRecord](tx, store.LoadBalancers, "", 0, nil)
		res := s.newResolver(tx)
		for i := range lbs {
			s.indexLB(res, &lbs[i])
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("restore load balancers: %w", err)
	}
	var active []string
	for _, lb := range lbs {
		if lb.State == api.LBProvisioning {
			s.scheduleActivation(lb.ID, time.Until(lb.CreatedAt.Add(s.cfg.LBProvisionDelay)))
			continue
		}
		active = append(active, lb.ID)
	}
	s.reconcileLBs(active)
	if kr := s.cfg.KernelRoutes; kr != nil {
		go s.runKernelRoutes(ctx, *kr)
	}
	return nil
}

// Serve starts the data plane and serves the API on ln until ctx is done;
// then it shuts down gracefully and closes the server.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	defer s.Close()
	if err := s.Start(ctx); err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("serving", "address", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("serve minicloud API: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close()
	}
	<-errc
	return nil
}

// Close stops the data plane and provisioning timers and closes the
// database. It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.planeMu.Lock()
		s.closed = true
		for id, t := range s.timers {
			t.Stop()
			delete(s.timers, id)
		}
		if p := s.plane.Load(); p != nil {
			p.Close()
		}
		s.planeMu.Unlock()
		s.closeErr = s.store.Close()
	})
	return s.closeErr
}

// apiError is an error answered with a status code and an api.ErrorBody.
type apiError struct {
	status     int
	code       string
	msg        string
	retryAfter time.Duration
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func errInvalid(format string, args ...any) error {
	return &apiError{status: http.StatusBadRequest, code: api.CodeInvalid, msg: fmt.Sprintf(format, args...)}
}

func errNotFound(format string, args ...any) error {
	return &apiError{status: http.StatusNotFound, code: api.CodeNotFound, msg: fmt.Sprintf(format, args...)}
}

func errConflict(format string, args ...any) error {
	return &apiError{status: http.StatusConflict, code: api.CodeConflict, msg: fmt.Sprintf(format, args...)}
}

func errThrottled(after time.Duration) error {
	return &apiError{status: http.StatusTooManyRequests, code: api.CodeThrottled, msg: "request rate limit exceeded", retryAfter: after}
}

// handlerFunc answers one request: a status and a body to encode as JSON
// (nil for no body), or an error.
type handlerFunc func(r *http.Request) (int, any, error)

// handle registers op (a method and pattern, e.g. "GET /v1/instances/{id}").
// serveHTTP has authenticated the request; all but the /v1/_ operations
// endpoints count in the stats, are rate limited and suffer faults.
func (s *Server) handle(op string, h handlerFunc) {
	ops := strings.Contains(op, "/v1/_")
	if !ops {
		s.operations = append(s.operations, op)
	}
	s.mux.HandleFunc(op, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		token, _ := r.Context().Value(tokenKey{}).(string)
		status, body, err := 0, any(nil), error(nil)
		if admitted, _ := r.Context().Value(admittedKey{}).(bool); !ops && !admitted {
			err = s.admit(r.Context(), op, token)
		}
		if err == nil {
			status, body, err = h(r)
		}
		if err != nil {
			var ae *apiError
			if errors.As(err, &ae) {
				status = ae.status
			} else {
				status = http.StatusInternalServerError
				s.log.Error(err, "request failed", "operation", op, "path", r.URL.Path)
			}
			writeError(w, err)
		} else {
			writeJSON(w, status, body)
		}
		s.log.V(1).Info("request", "operation", op, "path", r.URL.Path, "status", status, "duration", time.Since(start))
	})
}

// tokenKey is the context key of the caller's token.
type tokenKey struct{}

// authenticate returns the request's bearer token when it is one of the
// configured tokens. The scheme is case-insensitive (RFC 7235).
func (s *Server) authenticate(r *http.Request) (string, bool) {
	token, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		return "", false
	}
	for _, t := range s.cfg.Tokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1 {
			return token, true
		}
	}
	return "", false
}

// bearerToken parses an Authorization header of the Bearer scheme.
func bearerToken(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimLeft(token, " ")
	return token, token != ""
}

// admit counts the request and applies the rate limit and injected faults.
func (s *Server) admit(ctx context.Context, op, token string) error {
	s.statsMu.Lock()
	for _, st := range s.statsOf(token) {
		st.Requests[op]++
		st.Total++
	}
	f := s.faults
	s.statsMu.Unlock()

	if lim := s.limiter(token); lim != nil {
		now := time.Now()
		res := lim.ReserveN(now, 1)
		if d := res.DelayFrom(now); !res.OK() || d > 0 {
			res.CancelAt(now)
			s.countThrottled(op, token)
			return errThrottled(d)
		}
	}
	if !faultApplies(f, op) {
		return nil
	}
	if f.LatencyMS > 0 {
		t := time.NewTimer(time.Duration(f.LatencyMS) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	if f.ThrottleRate > 0 && rand.Float64() < f.ThrottleRate {
		s.countThrottled(op, token)
		return errThrottled(time.Second)
	}
	if f.UnauthorizedRate > 0 && rand.Float64() < f.UnauthorizedRate {
		s.statsMu.Lock()
		for _, st := range s.statsOf(token) {
			st.Unauthorized++
		}
		s.statsMu.Unlock()
		return &apiError{status: http.StatusUnauthorized, code: api.CodeUnauthorized, msg: "injected fault: token rejected"}
	}
	if f.ErrorRate > 0 && rand.Float64() < f.ErrorRate {
		s.statsMu.Lock()
		for _, st := range s.statsOf(token) {
			st.Errors++
		}
		s.statsMu.Unlock()
		return &apiError{status: http.StatusInternalServerError, code: api.CodeInternal, msg: "injected fault"}
	}
	return nil
}

func faultApplies(f api.Faults, op string) bool {
	if f.ErrorRate == 0 && f.ThrottleRate == 0 && f.UnauthorizedRate == 0 && f.LatencyMS == 0 {
		return false
	}
	if len(f.Operations) == 0 {
		return true
	}
	for _, o := range f.Operations {
		if o == op {
			return true
		}
	}
	return false
}

func (s *Server) countThrottled(op, token string) {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	for _, st := range s.statsOf(token) {
		st.Throttled++
		st.ThrottledByOperation[op]++
	}
}

// statsOf returns the global stats and those of token; statsMu is held.
func (s *Server) statsOf(token string) [2]*api.Stats {
	st := s.byToken[token]
	if st == nil {
		st = newStats()
		s.byToken[token] = st
	}
	return [2]*api.Stats{&s.stats, st}
}

func newStats() *api.Stats {
	return &api.Stats{Requests: map[string]int64{}, ThrottledByOperation: map[string]int64{}, Since: time.Now().UTC()}
}

func (s *Server) limiter(token string) *rate.Limiter {
	if s.cfg.RateLimit <= 0 || slices.Contains(s.cfg.UnlimitedTokens, token) {
		return nil
	}
	s.limMu.Lock()
	defer s.limMu.Unlock()
	lim := s.limiters[token]
	if lim == nil {
		burst := s.cfg.Burst
		if burst <= 0 {
			burst = max(1, int(math.Ceil(s.cfg.RateLimit)))
		}
		lim = rate.NewLimiter(rate.Limit(s.cfg.RateLimit), burst)
		s.limiters[token] = lim
	}
	return lim
}

func (s *Server) resetStats() {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	s.stats = *newStats()
	s.byToken = map[string]*api.Stats{}
}

// idempotencyScope keys an Idempotency-Key by token and path, so clients
// cannot see each other's resources through a shared key.
func idempotencyScope(r *http.Request, key string) string {
	token, _ := r.Context().Value(tokenKey{}).(string)
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:8]) + " " + r.URL.Path + " " + key
}

func retryAfterSeconds(d time.Duration) string {
	secs := int(math.Ceil(d.Seconds()))
	return strconv.Itoa(max(1, secs))
}
