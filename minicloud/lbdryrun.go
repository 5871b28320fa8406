package minicloud

import (
	"errors"
	"net/http"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/store"
)

// errDryRun ends a dry run's transaction so that nothing it did is kept.
var errDryRun = errors.New("dry run")

// validateLB is the dry run of a load balancer create: 200 with the spec as
// it would be stored when minicloud would accept it, else the error the
// create would answer (400 for an invalid spec, a missing target
// instance or backend pool, 409 when the VIP pool has no free address). A spec whose name an
// existing load balancer holds is checked as that load balancer's update,
// which keeps its VIP. Nothing is stored.
func (s *Server) validateLB(r *http.Request) (int, any, error) {
	spec, _, err := decodeRequest(r, func(v *api.LoadBalancerSpec) error { return validateLBSpec(v, true) })
	if err != nil {
		return 0, nil, err
	}
	var verdict error
	err = s.store.Update(func(tx *store.Tx) error {
		if err := checkRefs(tx, spec); err != nil {
			verdict = err
			return errDryRun
		}
		if _, err := tx.LookupName(store.LoadBalancers, spec.Name); err == nil {
			return errDryRun // an update: the load balancer keeps its address
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		// Allocating, then rolling back, is exactly the create's test of
		// the pool.
		if _, err := tx.AllocateIP(poolVIP, s.cfg.VIPCIDR, "dry-run"); err != nil {
			verdict = storeErr(err, "load balancer", spec.Name)
		}
		return errDryRun
	})
	switch {
	case verdict != nil:
		return 0, nil, verdict
	case err != nil && !errors.Is(err, errDryRun):
		return 0, nil, err
	}
	return http.StatusOK, spec, nil
}
