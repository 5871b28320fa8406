package minicloud

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/stratus-ccm/stratus/minicloud/dataplane"
	"github.com/stratus-ccm/stratus/minicloud/store"
)

// Support for dialects: fronts that speak another cloud's API (package
// minicloud/openstack) on top of this server. A dialect shares the server's
// store, tokens, rate limits, faults, call statistics and data plane
// through the methods below; it keeps none of its own copies of them.

// Mount serves h for every request whose path is prefix (which must end in
// "/") or starts with it. Such requests skip the bearer authentication of
// the native API: h authenticates them itself (Authenticate) and admits
// each one under its own operation name (Admit). Call Mount before Serve.
func (s *Server) Mount(prefix string, h http.Handler) {
	if !strings.HasPrefix(prefix, "/") || !strings.HasSuffix(prefix, "/") {
		panic("minicloud: mount prefix " + prefix + " must start and end with /")
	}
	s.mounts = append(s.mounts, mount{prefix: prefix, h: h})
}

type mount struct {
	prefix string
	h      http.Handler
}

// mounted returns the dialect handler serving path, if any.
func (s *Server) mounted(path string) http.Handler {
	for _, m := range s.mounts {
		if strings.HasPrefix(path, m.prefix) || path == strings.TrimSuffix(m.prefix, "/") {
			return m.h
		}
	}
	return nil
}

// Authenticate reports whether token is one of the server's bearer tokens.
func (s *Server) Authenticate(token string) bool {
	_, ok := s.authenticate(&http.Request{Header: http.Header{"Authorization": {"Bearer " + token}}})
	return ok
}

// RegisterOperations adds dialect operations ("GET /compute/v2.1/servers")
// to those that faults may name. Call it before Serve.
func (s *Server) RegisterOperations(ops ...string) {
	for _, op := range ops {
		if !slices.Contains(s.operations, op) {
			s.operations = append(s.operations, op)
		}
	}
}

// Rejection is why Admit refused a request: the status to answer (429 or
// 500), the Retry-After of a 429, and a message.
type Rejection struct {
	Status     int
	RetryAfter time.Duration
	Message    string
}

func (r *Rejection) Error() string { return r.Message }

// Admit counts a request of operation op made with token in the call
// statistics and applies the token's rate limit and the injected faults,
// exactly as for a native request. It returns nil, a *Rejection, or the
// context's error when ctx ends during injected latency.
func (s *Server) Admit(ctx context.Context, op, token string) error {
	err := s.admit(ctx, op, token)
	var ae *apiError
	if errors.As(err, &ae) {
		return &Rejection{Status: ae.status, RetryAfter: ae.retryAfter, Message: ae.msg}
	}
	return err
}

// admittedKey marks a request a dialect has admitted already.
type admittedKey struct{}

// Native returns the native API acting for token (which the caller has
// authenticated) without counting, rate limiting or faulting its requests:
// a dialect translates one request it has admitted into native calls, and
// those must not count twice.
func (s *Server) Native(token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), tokenKey{}, token)
		ctx = context.WithValue(ctx, admittedKey{}, true)
		s.mux.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Store returns the server's database. A dialect keeps its own kinds in it
// (store.Store.EnsureKinds), so its state survives restarts with the rest.
func (s *Server) Store() *store.Store { return s.store }

// Config returns the server's configuration.
func (s *Server) Config() Config { return s.cfg }

// AllocatePublicIP assigns a free address of the public pool
// (Config.PublicCIDR, shared with instance public IPs) to owner within tx.
func (s *Server) AllocatePublicIP(tx *store.Tx, owner string) (netip.Addr, error) {
	return tx.AllocateIP(poolPublic, s.cfg.PublicCIDR, owner)
}

// ClaimPublicIP assigns the given address of the public pool to owner
// within tx (store.ErrExists when it is taken).
func (s *Server) ClaimPublicIP(tx *store.Tx, addr netip.Addr, owner string) error {
	return tx.ClaimIP(poolPublic, s.cfg.PublicCIDR, addr, owner)
}

// ReleasePublicIP frees an address of the public pool within tx.
func (s *Server) ReleasePublicIP(tx *store.Tx, addr string) error {
	return tx.ReleaseIP(poolPublic, addr)
}

// SetAliases makes load balancer id listen on addrs too, forwarding exactly
// as on its VIP (same listeners, targets, health and source ranges), while
// it is active: a dialect's floating IPs. The aliases live in memory; a
// dialect sets them again when the server starts. Calling it with no
// addresses removes them.
func (s *Server) SetAliases(id string, addrs []netip.Addr) {
	s.planeMu.Lock()
	if len(addrs) == 0 {
		delete(s.aliases, id)
	} else {
		s.aliases[id] = slices.Clone(addrs)
	}
	s.planeMu.Unlock()
	s.reconcileLB(id)
}

// applyAliases makes the aliases of load balancer id in the data plane
// match s.aliases: bound with spec when the load balancer is active,
// removed otherwise. planeMu is held.
func (s *Server) applyAliases(id string, active bool, spec dataplane.Spec) {
	plane := s.plane.Load()
	if plane == nil {
		return
	}
	want := map[string]netip.Addr{}
	if active {
		for _, a := range s.aliases[id] {
			want[id+" alias "+a.String()] = a
		}
	}
	for _, k := range s.aliasApplied[id] {
		if _, ok := want[k]; !ok {
			plane.Remove(k)
		}
	}
	keys := make([]string, 0, len(want))
	for k, a := range want {
		sp := spec
		sp.VIP = a
		if err := plane.Apply(k, sp); err != nil {
			s.log.Error(err, "data plane incomplete", "loadBalancer", id, "alias", a)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		delete(s.aliasApplied, id)
	} else {
		s.aliasApplied[id] = keys
	}
}

// InstanceIPv6CIDR is the pool of instance private IPv6 addresses.
func InstanceIPv6CIDR() netip.Prefix { return instanceIPv6CIDR }
