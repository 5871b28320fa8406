package minicloud

import (
	"net/http"
	"net/netip"
	"time"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/store"
)

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
