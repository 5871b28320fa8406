package minicloud

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

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
	s.handle("POST /v1/load-balancers/validate", s.validateLB)
	s.handle("GET /v1/load-balancers", s.listLBs)
	s.handle("GET /v1/load-balancers/{id}", s.getLB)
	s.handle("PUT /v1/load-balancers/{id}", s.updateLB)
	s.handle("DELETE /v1/load-balancers/{id}", s.deleteLB)

	s.handle("POST /v1/backend-pools", s.createPool)
	s.handle("GET /v1/backend-pools", s.listPools)
	s.handle("GET /v1/backend-pools/{id}", s.getPool)
	s.handle("PUT /v1/backend-pools/{id}", s.updatePool)
	s.handle("DELETE /v1/backend-pools/{id}", s.deletePool)

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

// ---- routes

// ---- operations
