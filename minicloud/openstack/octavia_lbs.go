package openstack

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/store"
)

// Octavia load balancers.

func (d *Dialect) loadBalancerRoutes(b string) {
	d.handle(lbSvc, "GET "+b+"loadbalancers", false, d.octaviaList("loadbalancers", nil, lbObjects))
	d.handle(lbSvc, "POST "+b+"loadbalancers", false, d.createLB)
	d.handle(lbSvc, "GET "+b+"loadbalancers/{id}", false, d.octaviaGet("loadbalancer", lbObjects))
	d.handle(lbSvc, "PUT "+b+"loadbalancers/{id}", false, writeTree[lbPut](http.StatusOK))
	d.handle(lbSvc, "DELETE "+b+"loadbalancers/{id}", false, d.deleteLB)
	d.handle(lbSvc, "GET "+b+"loadbalancers/{id}/status", false, d.lbStatusTree)
}

func (d *Dialect) createLB(r *request) (int, any, error) {
	var in lbCreate
	if err := decodeBody(r, &in); err != nil {
		return 0, nil, err
	}
	c := in.LoadBalancer
	if err := checkCommon(c.AdminStateUp, c.ProjectID, c.TenantID); err != nil {
		return 0, nil, err
	}
	switch {
	case c.Provider != "" && c.Provider != "amphora" && c.Provider != "octavia":
		return 0, nil, badRequest("provider: %s is not a provider here (amphora)", c.Provider)
	case c.VIPPortID != "":
		return 0, nil, badRequest("vip_port_id: minicloud allocates the VIP port; give vip_subnet_id or vip_network_id")
	case c.VIPAddress != "":
		return 0, nil, badRequest("vip_address: minicloud allocates VIP addresses itself")
	case c.FlavorID != "":
		return 0, nil, badRequest("flavor_id: there are no load-balancer flavors")
	case c.AvailabilityZone != "":
		return 0, nil, badRequest("availability_zone: there are no load-balancer availability zones")
	case c.VIPQoSPolicyID != "":
		return 0, nil, badRequest("vip_qos_policy_id: there are no QoS policies")
	case len(c.Pools) > 0:
		return 0, nil, badRequest("pools: give pools as the listeners' default_pool")
	case len(c.AdditionalVIPs) > 0:
		return 0, nil, badRequest("additional_vips: a load balancer has one VIP")
	case c.VIPSubnetID == "" && c.VIPNetworkID == "":
		return 0, nil, badRequest("vip_subnet_id: give vip_subnet_id or vip_network_id")
	case c.VIPSubnetID != "" && c.VIPSubnetID != vipSubnetID():
		if c.VIPSubnetID == instanceSubnetID() || c.VIPSubnetID == publicSubnetID() || c.VIPSubnetID == instanceSubnetV6ID() {
			return 0, nil, badRequest("vip_subnet_id: minicloud allocates VIPs in subnet %s only", vipSubnetID())
		}
		return 0, nil, badRequest("vip_subnet_id: Subnet %s could not be found", c.VIPSubnetID)
	case c.VIPNetworkID != "" && c.VIPNetworkID != privateNetworkID():
		return 0, nil, badRequest("vip_network_id: minicloud allocates VIPs in network %s only", privateNetworkID())
	}
	if err := validateTags(c.Tags); err != nil {
		return 0, nil, err
	}
	now := nowUTC()
	lb := lbRecord{ID: newUUID(), Name: c.Name, Description: c.Description, Provider: cmpOr(c.Provider, "amphora"),
		VIPSubnetID: vipSubnetID(), Tags: c.Tags, Status: statusPendingCreate, CreatedAt: now, UpdatedAt: now}
	for i := range c.Listeners {
		l, pc, err := c.Listeners[i].record()
		if err != nil {
			return 0, nil, err
		}
		if l.DefaultPoolID != "" {
			return 0, nil, badRequest("default_pool_id: in a create, give the default_pool")
		}
		if err := addListener(&lb, l, pc); err != nil {
			return 0, nil, err
		}
	}
	d.octMu.Lock()
	defer d.octMu.Unlock()
	spec, err := d.projectFor(r, &lb)
	if err != nil {
		return 0, nil, err
	}
	spec.Name = "octavia-" + lb.ID
	nlb, err := r.mc.CreateLoadBalancer(r.Context(), spec)
	if err != nil {
		return 0, nil, fmt.Errorf("create minicloud load balancer for %s: %w", lb.ID, err)
	}
	lb.NativeID, lb.VIPAddress = nlb.ID, nlb.VIP
	lb.PendingUntil = d.now().Add(d.opts.PendingDelay)
	if err := d.st.Update(func(tx *store.Tx) error { return store.Put(tx, kindLoadBalancers, lb.ID, lb) }); err != nil {
		r.mc.DeleteLoadBalancer(r.Context(), nlb.ID)
		return 0, nil, err
	}
	body := lbBody(&lb)
	// A fully populated create answers with the whole tree.
	var ls []any
	for i := range lb.Listeners {
		lo := listenerBody(&lb, &lb.Listeners[i])
		if p := lb.pool(lb.Listeners[i].DefaultPoolID); p != nil {
			po := poolBody(&lb, p)
			var ms []any
			for j := range p.Members {
				ms = append(ms, memberBody(&lb, p, &p.Members[j], nil))
			}
			if ms != nil {
				po["members"] = ms
			}
			if p.Monitor != nil {
				po["healthmonitor"] = monitorBody(&lb, p, p.Monitor)
			}
			lo["default_pool"] = po
		}
		ls = append(ls, lo)
	}
	if ls != nil {
		body["listeners"] = ls
	}
	return http.StatusCreated, map[string]any{"loadbalancer": body}, nil
}

// lockLB reads a load balancer for a write under octMu (the caller
// unlocks), refusing pending ones.
func (d *Dialect) lockLB(r *request, lb *lbRecord) (*lbRecord, error) {
	d.octMu.Lock()
	cur, err := d.getLB(r, lb.ID)
	if err == nil {
		err = mutable(cur)
	}
	if err != nil {
		d.octMu.Unlock()
		return nil, err
	}
	return cur, nil
}

// lbPut is PUT /loadbalancers/{id}.
type lbPut struct {
	atLB
	LoadBalancer struct {
		Name         *string   `json:"name"`
		Description  *string   `json:"description"`
		Tags         *[]string `json:"tags"`
		AdminStateUp *bool     `json:"admin_state_up"`
	} `json:"loadbalancer"`
}

func (w *lbPut) check(*request) error {
	u := &w.LoadBalancer
	if err := checkCommon(u.AdminStateUp); err != nil {
		return err
	}
	if u.Tags != nil {
		return validateTags(*u.Tags)
	}
	return nil
}

func (w *lbPut) apply(r *request, lb *lbRecord) (written, error) {
	u := &w.LoadBalancer
	setIf(&lb.Name, u.Name)
	setIf(&lb.Description, u.Description)
	setIf(&lb.Tags, u.Tags)
	return written{key: "loadbalancer", body: func() any { return lbBody(lb) }}, nil
}

func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// deleteLB answers DELETE /loadbalancers/{id}: the minicloud load balancer
// goes at once, the Octavia record stays PENDING_DELETE for a while.
func (d *Dialect) deleteLB(r *request) (int, any, error) {
	cascade, err := boolQuery(r.URL.Query(), "cascade")
	if err != nil {
		return 0, nil, err
	}
	lb, err := d.lockLB(r, &lbRecord{ID: r.PathValue("id")})
	if err != nil {
		return 0, nil, err
	}
	defer d.octMu.Unlock()
	if !cascade && (len(lb.Listeners) > 0 || len(lb.Pools) > 0) {
		return 0, nil, badRequest("Cannot delete Load Balancer %s - it has children", lb.ID)
	}
	if err := r.mc.DeleteLoadBalancer(r.Context(), lb.NativeID); err != nil && !isNotFound(err) {
		return 0, nil, fmt.Errorf("delete minicloud load balancer %s of %s: %w", lb.NativeID, lb.ID, err)
	}
	// Its VIP port goes with it: floating IPs on it are disassociated.
	if err := d.disassociatePort(vipPortID(lb.ID)); err != nil {
		return 0, nil, err
	}
	d.srv.SetAliases(lb.NativeID, nil)
	lb.Status, lb.PendingUntil, lb.UpdatedAt = statusPendingDelete, d.now().Add(d.opts.PendingDelay), nowUTC()
	if err := d.st.Update(func(tx *store.Tx) error { return store.Put(tx, kindLoadBalancers, lb.ID, lb) }); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}

func isNotFound(err error) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.StatusCode == http.StatusNotFound
}

// opsSetStatus answers PUT /v1/_openstack/loadbalancers/{id}/provisioning_status
// (native bearer token): it puts a load balancer in ERROR, as a failed
// amphora would.
func (d *Dialect) opsSetStatus(w http.ResponseWriter, hr *http.Request) {
	r := &request{Request: hr, d: d, base: baseURL(hr), header: http.Header{}}
	const op = "PUT /v1/_openstack/loadbalancers/{id}/provisioning_status"
	tok, ok := bearer(hr.Header.Get("Authorization"))
	if !ok || !d.srv.Authenticate(tok) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="minicloud"`)
		writeJSON(w, http.StatusUnauthorized, api.ErrorBody{Error: api.ErrorDetail{Code: api.CodeUnauthorized, Message: "missing or invalid bearer token"}})
		return
	}
	var in struct {
		ProvisioningStatus string `json:"provisioning_status"`
	}
	err := decodeBody(r, &in)
	if err == nil && in.ProvisioningStatus != statusError {
		err = badRequest("provisioning_status: only %s can be forced", statusError)
	}
	if err == nil {
		err = d.SetError(hr.PathValue("id"))
	}
	if err != nil {
		var oe *osError
		if !errors.As(err, &oe) {
			oe = &osError{status: http.StatusInternalServerError, msg: err.Error()}
		}
		writeJSON(w, oe.status, api.ErrorBody{Error: api.ErrorDetail{Code: map[int]string{400: api.CodeInvalid, 404: api.CodeNotFound}[oe.status], Message: oe.msg}})
		d.log.V(1).Info("request", "operation", op, "status", oe.status)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	return strings.TrimSpace(tok), ok && strings.EqualFold(scheme, "Bearer")
}

// SetError puts Octavia load balancer id in provisioning status ERROR.
func (d *Dialect) SetError(id string) error {
	d.octMu.Lock()
	defer d.octMu.Unlock()
	return d.st.Update(func(tx *store.Tx) error {
		lb, err := store.Get[lbRecord](tx, kindLoadBalancers, id)
		if errors.Is(err, store.ErrNotFound) {
			return notFound("Load Balancer %s could not be found.", id)
		}
		if err != nil {
			return err
		}
		if lb.Status == statusPendingDelete {
			return notFound("Load Balancer %s is being deleted.", id)
		}
		lb.Status, lb.UpdatedAt = statusError, nowUTC()
		return store.Put(tx, kindLoadBalancers, id, lb)
	})
}

// lbStatusTree answers GET /loadbalancers/{id}/status: the provisioning
// and operating status of the load balancer, its listeners, their default
// pools, the pools' members (their observed health) and monitors.
func (d *Dialect) lbStatusTree(r *request) (int, any, error) {
	lb, err := d.getLB(r, r.PathValue("id"))
	if err != nil {
		return 0, nil, err
	}
	health := memberHealth(r, lb)
	status := func(id, name string) map[string]any {
		return map[string]any{"id": id, "name": name, "provisioning_status": childStatus(lb, id), "operating_status": childOperating(lb, id)}
	}
	listenersOut := []any{}
	for i := range lb.Listeners {
		l := &lb.Listeners[i]
		lo := status(l.ID, l.Name)
		pools := []any{}
		if p := lb.pool(l.DefaultPoolID); p != nil {
			po := status(p.ID, p.Name)
			members := []any{}
			for j := range p.Members {
				mb := memberBody(lb, p, &p.Members[j], health)
				members = append(members, map[string]any{
					"id": mb["id"], "name": mb["name"], "address": mb["address"], "protocol_port": mb["protocol_port"],
					"provisioning_status": mb["provisioning_status"], "operating_status": mb["operating_status"],
				})
			}
			po["members"] = members
			if p.Monitor != nil {
				mo := status(p.Monitor.ID, p.Monitor.Name)
				mo["type"] = p.Monitor.Type
				po["health_monitor"] = mo
			}
			pools = append(pools, po)
		}
		lo["pools"] = pools
		listenersOut = append(listenersOut, lo)
	}
	tree := map[string]any{
		"id": lb.ID, "name": lb.Name, "provisioning_status": lb.Status, "operating_status": operating(lb),
		"listeners": listenersOut,
	}
	return http.StatusOK, map[string]any{"statuses": map[string]any{"loadbalancer": tree}}, nil
}
