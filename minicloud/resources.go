package minicloud

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/store"
)

// ID prefixes per kind.
const (
	instancePrefix = "i-"
	lbPrefix       = "lb-"
	routePrefix    = "r-"
)

// Address pools.
const (
	poolInstance     = "instance"
	poolInstanceIPv6 = "instance-ipv6"
	poolPublic       = "public"
	poolVIP          = "vip"
)

// instanceIPv6CIDR is the pool of instance private IPv6 addresses: a
// unique-local range, so that no dual-stack instance ever collides with a
// real network. The data plane does not use them (load balancers forward to
// the IPv4 address).
var instanceIPv6CIDR = netip.MustParsePrefix("fd00:10::/64")

// InstanceTypes are the machine sizes minicloud offers.
var InstanceTypes = []api.InstanceType{
	{Name: "mc.small", VCPUs: 1, MemoryMB: 2048},
	{Name: "mc.medium", VCPUs: 2, MemoryMB: 4096},
	{Name: "mc.large", VCPUs: 4, MemoryMB: 8192},
}

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("/", s.notFound)
	s.handle("GET /v1/regions", func(*http.Request) (int, any, error) {
		return http.StatusOK, api.List[api.Region]{Items: []api.Region{{Name: Region, Zones: Zones}}}, nil
	})
	s.handle("GET /v1/instance-types", func(*http.Request) (int, any, error) {
		return http.StatusOK, api.List[api.InstanceType]{Items: InstanceTypes}, nil
	})

	s.handle("POST /v1/instances", s.createInstance)
	s.handle("GET /v1/instances", s.listInstances)
	s.handle("GET /v1/instances/{id}", s.getInstance)
	s.handle("POST /v1/instances/{id}/stop", s.setInstanceState(api.InstanceStopped))
	s.handle("POST /v1/instances/{id}/start", s.setInstanceState(api.InstanceRunning))
	s.handle("DELETE /v1/instances/{id}", s.deleteInstance)

	s.handle("POST /v1/load-balancers", s.createLB)
	s.handle("GET /v1/load-balancers", s.listLBs)
	s.handle("GET /v1/load-balancers/{id}", s.getLB)
	s.handle("PUT /v1/load-balancers/{id}", s.updateLB)
	s.handle("DELETE /v1/load-balancers/{id}", s.deleteLB)

	s.handle("POST /v1/routes", s.createRoute)
	s.handle("GET /v1/routes", s.listRoutes)
	s.handle("GET /v1/routes/{id}", s.getRoute)
	s.handle("DELETE /v1/routes/{id}", s.deleteRoute)

	s.handle("GET /v1/_stats", s.getStats)
	s.handle("POST /v1/_stats/reset", s.resetStatsHandler)
	s.handle("GET /v1/_faults", s.getFaults)
	s.handle("PUT /v1/_faults", s.putFaults)
}

// create runs build in one write transaction. When the request carries an
// Idempotency-Key that was used before, it creates nothing and returns the
// ID and first response of the original request (replayed = true).
func (s *Server) create(r *http.Request, body []byte, kind store.Kind, build func(tx *store.Tx) (id string, resource any, err error)) (id string, resource any, replayed bool, err error) {
	key := r.Header.Get("Idempotency-Key")
	if len(key) > maxIdempotencyKey {
		return "", nil, false, errInvalid("Idempotency-Key longer than %d characters", maxIdempotencyKey)
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	err = s.store.Update(func(tx *store.Tx) error {
		var scope string
		if key != "" {
			scope = idempotencyScope(r, key)
			rec, err := tx.Idempotency(scope)
			if err == nil {
				if rec.RequestHash != hash {
					return errConflict("Idempotency-Key %q was used with a different request", key)
				}
				id, resource, replayed = rec.ID, rec.Response, true
				return nil
			}
			if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		var err error
		id, resource, err = build(tx)
		if err != nil || key == "" {
			return err
		}
		raw, err := json.Marshal(resource)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", kind, id, err)
		}
		return tx.PutIdempotency(scope, store.IdempotencyRecord{RequestHash: hash, Kind: kind, ID: id, Response: raw})
	})
	return id, resource, replayed, err
}

// query answers a list query on kind: by the name index when q names a
// resource (the common "instance of this node" question needs no scan),
// else by a paged scan; tags returns a resource's tags for the filters.
func query[T any](tx *store.Tx, kind store.Kind, q listQuery, tags func(*T) map[string]string) ([]T, bool, error) {
	if q.name == "" {
		return store.List(tx, kind, q.after, q.pageSize, func(v *T) bool { return q.matchTags(tags(v)) })
	}
	id, err := tx.LookupName(kind, q.name)
	if errors.Is(err, store.ErrNotFound) || (err == nil && id <= q.after) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v, err := store.Get[T](tx, kind, id)
	if err != nil || !q.matchTags(tags(&v)) {
		return nil, false, err
	}
	return []T{v}, false, nil
}

// replay answers a replayed create: the resource as it is now, or as it was
// first returned when it has been deleted since.
func replay(id string, first any, current func(id string) (any, error)) (int, any, error) {
	if cur, err := current(id); err == nil {
		return http.StatusCreated, cur, nil
	}
	return http.StatusCreated, first, nil
}

// storeErr maps store errors to API errors.
func storeErr(err error, kind, id string) error {
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound("%s %q not found", kind, id)
	}
	if errors.Is(err, store.ErrExhausted) {
		return errConflict("%v", err)
	}
	return err
}

// ---- instances

func validateInstanceCreate(in *api.InstanceCreate) error {
	if err := validateName("instance", in.Name); err != nil {
		return err
	}
	if !knownType(in.Type) {
		return errInvalid("unknown instance type %q", in.Type)
	}
	if !knownZone(in.Zone) {
		return errInvalid("unknown zone %q (zones: %v)", in.Zone, Zones)
	}
	if err := validateLabels(in.Labels); err != nil {
		return err
	}
	return validateTags(in.Tags)
}

// validateLabels accepts what the Kubernetes API accepts as a label: a
// qualified-name key and a label value; at most api.MaxLabels of them.
func validateLabels(labels map[string]string) error {
	if len(labels) > api.MaxLabels {
		return errInvalid("%d labels: at most %d labels per instance", len(labels), api.MaxLabels)
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return errInvalid("label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(labels[k]); len(errs) > 0 {
			return errInvalid("label %q: value %q: %s", k, labels[k], strings.Join(errs, "; "))
		}
	}
	return nil
}

func knownType(t string) bool {
	for _, it := range InstanceTypes {
		if it.Name == t {
			return true
		}
	}
	return false
}

func knownZone(z string) bool {
	for _, known := range Zones {
		if z == known {
			return true
		}
	}
	return false
}

func (s *Server) createInstance(r *http.Request) (int, any, error) {
	in, body, err := decodeRequest(r, validateInstanceCreate)
	if err != nil {
		return 0, nil, err
	}
	id, res, replayed, err := s.create(r, body, store.Instances, func(tx *store.Tx) (string, any, error) {
		id, err := tx.NextID(store.Instances, instancePrefix)
		if err != nil {
			return "", nil, err
		}
		if owner, ok, err := tx.ClaimName(store.Instances, in.Name, id); err != nil {
			return "", nil, err
		} else if !ok {
			return "", nil, errConflict("instance name %q is used by %s", in.Name, owner)
		}
		inst := api.Instance{
			ID: id, Name: in.Name, Type: in.Type, Region: Region, Zone: in.Zone,
			State: api.InstanceRunning, Tags: in.Tags, Labels: in.Labels, CreatedAt: time.Now().UTC(),
		}
		ip, err := tx.AllocateIP(poolInstance, s.cfg.InstanceCIDR, id)
		if err != nil {
			return "", nil, storeErr(err, "instance", id)
		}
		inst.PrivateIP = ip.String()
		if in.PublicIP {
			ip, err := tx.AllocateIP(poolPublic, s.cfg.PublicCIDR, id)
			if err != nil {
				return "", nil, storeErr(err, "instance", id)
			}
			inst.PublicIP = ip.String()
		}
		if in.IPv6 {
			ip, err := tx.AllocateIP(poolInstanceIPv6, instanceIPv6CIDR, id)
			if err != nil {
				return "", nil, storeErr(err, "instance", id)
			}
			inst.PrivateIPv6 = ip.String()
		}
		return id, inst, store.Put(tx, store.Instances, id, inst)
	})
	if err != nil {
		return 0, nil, err
	}
	if replayed {
		return replay(id, res, s.instance)
	}
	return http.StatusCreated, res, nil
}

func (s *Server) instance(id string) (any, error) {
	var inst api.Instance
	err := s.store.View(func(tx *store.Tx) error {
		var err error
		inst, err = store.Get[api.Instance](tx, store.Instances, id)
		return err
	})
	return inst, storeErr(err, "instance", id)
}

func (s *Server) getInstance(r *http.Request) (int, any, error) {
	id, err := pathID(r, instancePrefix, "instance")
	if err != nil {
		return 0, nil, err
	}
	inst, err := s.instance(id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, inst, nil
}

func (s *Server) listInstances(r *http.Request) (int, any, error) {
	q, err := parseListQuery(r.URL.Query(), instancePrefix, true)
	if err != nil {
		return 0, nil, err
	}
	var items []api.Instance
	var more bool
	err = s.store.View(func(tx *store.Tx) error {
		items, more, err = query(tx, store.Instances, q, func(i *api.Instance) map[string]string { return i.Tags })
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, page(items, more, func(i api.Instance) string { return i.ID }), nil
}

func (s *Server) setInstanceState(state string) handlerFunc {
	return func(r *http.Request) (int, any, error) {
		id, err := pathID(r, instancePrefix, "instance")
		if err != nil {
			return 0, nil, err
		}
		var inst api.Instance
		changed := false
		err = s.store.Update(func(tx *store.Tx) error {
			inst, err = store.Get[api.Instance](tx, store.Instances, id)
			if err != nil || inst.State == state {
				return err
			}
			inst.State, changed = state, true
			return store.Put(tx, store.Instances, id, inst)
		})
		if err != nil {
			return 0, nil, storeErr(err, "instance", id)
		}
		if changed {
			s.reconcileLBsTargeting(id)
		}
		return http.StatusOK, inst, nil
	}
}

func (s *Server) deleteInstance(r *http.Request) (int, any, error) {
	id, err := pathID(r, instancePrefix, "instance")
	if err != nil {
		return 0, nil, err
	}
	err = s.store.Update(func(tx *store.Tx) error {
		inst, err := store.Get[api.Instance](tx, store.Instances, id)
		if err != nil {
			return err
		}
		if err := tx.Delete(store.Instances, id); err != nil {
			return err
		}
		if err := tx.ReleaseName(store.Instances, inst.Name); err != nil {
			return err
		}
		if err := tx.ReleaseIP(poolInstance, inst.PrivateIP); err != nil {
			return err
		}
		if err := tx.ReleaseIP(poolInstanceIPv6, inst.PrivateIPv6); err != nil {
			return err
		}
		return tx.ReleaseIP(poolPublic, inst.PublicIP)
	})
	if err != nil {
		return 0, nil, storeErr(err, "instance", id)
	}
	s.reconcileLBsTargeting(id)
	return http.StatusNoContent, nil, nil
}

// ---- routes

func (s *Server) createRoute(r *http.Request) (int, any, error) {
	in, body, err := decodeRequest(r, validateRouteCreate)
	if err != nil {
		return 0, nil, err
	}
	id, res, replayed, err := s.create(r, body, store.Routes, func(tx *store.Tx) (string, any, error) {
		if !tx.Exists(store.Instances, in.TargetInstanceID) {
			return "", nil, errInvalid("target instance %q does not exist", in.TargetInstanceID)
		}
		id, err := tx.NextID(store.Routes, routePrefix)
		if err != nil {
			return "", nil, err
		}
		if owner, ok, err := tx.ClaimName(store.Routes, in.DestinationCIDR, id); err != nil {
			return "", nil, err
		} else if !ok {
			return "", nil, errConflict("destination %s is already routed by %s", in.DestinationCIDR, owner)
		}
		rt := api.Route{ID: id, DestinationCIDR: in.DestinationCIDR, TargetInstanceID: in.TargetInstanceID, State: api.RouteActive, Tags: in.Tags, CreatedAt: time.Now().UTC()}
		return id, rt, store.Put(tx, store.Routes, id, rt)
	})
	if err != nil {
		return 0, nil, err
	}
	if replayed {
		return replay(id, res, s.route)
	}
	return http.StatusCreated, res, nil
}

// validateRouteCreate checks in and masks the destination's host bits.
func validateRouteCreate(in *api.RouteCreate) error {
	dst, err := netip.ParsePrefix(in.DestinationCIDR)
	if err != nil {
		return errInvalid("destination_cidr %q: %v", in.DestinationCIDR, err)
	}
	in.DestinationCIDR = dst.Masked().String()
	if in.TargetInstanceID == "" {
		return errInvalid("target_instance_id is required")
	}
	return validateTags(in.Tags)
}

// routeState says whether the route's target still exists.
func routeState(tx *store.Tx, rt *api.Route) {
	rt.State = api.RouteActive
	if !tx.Exists(store.Instances, rt.TargetInstanceID) {
		rt.State = api.RouteBlackhole
	}
}

func (s *Server) route(id string) (any, error) {
	var rt api.Route
	err := s.store.View(func(tx *store.Tx) error {
		var err error
		rt, err = store.Get[api.Route](tx, store.Routes, id)
		if err == nil {
			routeState(tx, &rt)
		}
		return err
	})
	return rt, storeErr(err, "route", id)
}

func (s *Server) getRoute(r *http.Request) (int, any, error) {
	id, err := pathID(r, routePrefix, "route")
	if err != nil {
		return 0, nil, err
	}
	rt, err := s.route(id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, rt, nil
}

func (s *Server) listRoutes(r *http.Request) (int, any, error) {
	q, err := parseListQuery(r.URL.Query(), routePrefix, false)
	if err != nil {
		return 0, nil, err
	}
	var items []api.Route
	var more bool
	err = s.store.View(func(tx *store.Tx) error {
		items, more, err = query(tx, store.Routes, q, func(rt *api.Route) map[string]string { return rt.Tags })
		for i := range items {
			routeState(tx, &items[i])
		}
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, page(items, more, func(rt api.Route) string { return rt.ID }), nil
}

func (s *Server) deleteRoute(r *http.Request) (int, any, error) {
	id, err := pathID(r, routePrefix, "route")
	if err != nil {
		return 0, nil, err
	}
	err = s.store.Update(func(tx *store.Tx) error {
		rt, err := store.Get[api.Route](tx, store.Routes, id)
		if err != nil {
			return err
		}
		if err := tx.Delete(store.Routes, id); err != nil {
			return err
		}
		return tx.ReleaseName(store.Routes, rt.DestinationCIDR)
	})
	if err != nil {
		return 0, nil, storeErr(err, "route", id)
	}
	return http.StatusNoContent, nil, nil
}

// ---- operations

func (s *Server) getStats(r *http.Request) (int, any, error) {
	scope := r.URL.Query().Get("scope")
	if scope != "" && scope != "token" {
		return 0, nil, errInvalid("scope %q: want token or nothing", scope)
	}
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	src := &s.stats
	if scope == "token" {
		token, _ := r.Context().Value(tokenKey{}).(string)
		if src = s.byToken[token]; src == nil {
			src = newStats()
		}
	}
	out := *src
	out.Requests = maps.Clone(src.Requests)
	out.ThrottledByOperation = maps.Clone(src.ThrottledByOperation)
	return http.StatusOK, out, nil
}

func (s *Server) resetStatsHandler(*http.Request) (int, any, error) {
	s.resetStats()
	return http.StatusNoContent, nil, nil
}

func (s *Server) getFaults(*http.Request) (int, any, error) {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	return http.StatusOK, s.faults, nil
}

func (s *Server) validateFaults(f *api.Faults) error {
	for _, op := range f.Operations {
		if !slices.Contains(s.operations, op) {
			return errInvalid("unknown operation %q (operations: %s)", op, strings.Join(s.operations, ", "))
		}
	}
	return validateFaultRates(f)
}

func validateFaultRates(f *api.Faults) error {
	if f.ErrorRate < 0 || f.ErrorRate > 1 || f.ThrottleRate < 0 || f.ThrottleRate > 1 {
		return errInvalid("error_rate and throttle_rate must be between 0 and 1")
	}
	if f.LatencyMS < 0 || f.LatencyMS > 60000 {
		return errInvalid("latency_ms must be between 0 and 60000")
	}
	return nil
}

func (s *Server) putFaults(r *http.Request) (int, any, error) {
	f, _, err := decodeRequest(r, s.validateFaults)
	if err != nil {
		return 0, nil, err
	}
	s.statsMu.Lock()
	s.faults = f
	s.statsMu.Unlock()
	s.log.Info("faults set", "errorRate", f.ErrorRate, "throttleRate", f.ThrottleRate, "latencyMS", f.LatencyMS, "operations", f.Operations)
	return http.StatusOK, f, nil
}
