package minicloud

import (
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
