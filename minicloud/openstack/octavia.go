package openstack

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/store"
)

// Dialect kinds in minicloud's store.
const (
	kindLoadBalancers store.Kind = "openstack-loadbalancers"
	kindFloatingIPs   store.Kind = "openstack-floatingips"
	// kindPorts holds the allowed address pairs of instance ports.
	kindPorts store.Kind = "openstack-ports"
)

// Provisioning statuses.
const (
	statusActive        = "ACTIVE"
	statusPendingCreate = "PENDING_CREATE"
	statusPendingUpdate = "PENDING_UPDATE"
	statusPendingDelete = "PENDING_DELETE"
	statusError         = "ERROR"
)

// nativeTag marks a minicloud load balancer with the Octavia load balancer
// it projects.
const nativeTag = "openstack-loadbalancer"

// lbRecord is an Octavia load balancer with its whole tree, as stored.
type lbRecord struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Description  string    `json:"description"`
	Provider     string    `json:"provider"`
	NativeID     string    `json:"native_id"`
	VIPAddress   string    `json:"vip_address"`
	VIPSubnetID  string    `json:"vip_subnet_id"`
	Tags         []string  `json:"tags"`
	Status       string    `json:"status"`
	PendingUntil time.Time `json:"pending_until"`
	// Changing is the child the pending write creates or updates, shown in
	// ChangingStatus while the load balancer is PENDING_UPDATE.
	Changing       string     `json:"changing,omitempty"`
	ChangingStatus string     `json:"changing_status,omitempty"`
	Listeners      []listener `json:"listeners"`
	Pools          []pool     `json:"pools"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

type listener struct {
	ID                   string   `json:"id"`
	Name                 string   `json:"name"`
	Description          string   `json:"description"`
	Protocol             string   `json:"protocol"`
	ProtocolPort         int      `json:"protocol_port"`
	DefaultPoolID        string   `json:"default_pool_id"`
	ConnectionLimit      int      `json:"connection_limit"`
	AllowedCIDRs         []string `json:"allowed_cidrs"`
	Tags                 []string `json:"tags"`
	TimeoutClientData    int      `json:"timeout_client_data"`
	TimeoutMemberConnect int      `json:"timeout_member_connect"`
	TimeoutMemberData    int      `json:"timeout_member_data"`
	TimeoutTCPInspect    int      `json:"timeout_tcp_inspect"`
}

type pool struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Protocol    string    `json:"protocol"`
	LBAlgorithm string    `json:"lb_algorithm"`
	ListenerID  string    `json:"listener_id"`
	Members     []member  `json:"members"`
	Monitor     *monitor  `json:"monitor"`
	Tags        []string  `json:"tags"`
	CreatedAt   time.Time `json:"created_at"`
}

type member struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	Address      string `json:"address"`
	ProtocolPort int    `json:"protocol_port"`
	SubnetID     string `json:"subnet_id"`
	Weight       int    `json:"weight"`
	// MonitorPort is where the pool's health monitor checks the member
	// (0: its protocol_port).
	MonitorPort int      `json:"monitor_port"`
	Tags        []string `json:"tags"`
}

type monitor struct {
	ID             string   `json:"id"`
	Name           string   `json:"name"`
	Type           string   `json:"type"`
	Delay          int      `json:"delay"`
	Timeout        int      `json:"timeout"`
	MaxRetries     int      `json:"max_retries"`
	MaxRetriesDown int      `json:"max_retries_down"`
	HTTPMethod     string   `json:"http_method"`
	URLPath        string   `json:"url_path"`
	ExpectedCodes  string   `json:"expected_codes"`
	Tags           []string `json:"tags"`
}

func newUUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b)
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

func vipPortID(lbID string) string { return uuidOf("vip-port", lbID) }

// ---- projection onto one minicloud load balancer

// project translates an Octavia tree into the minicloud load balancer that
// carries its traffic. Each listener whose default pool has members is a
// minicloud listener with that pool's members as its own targets (target
// port: the members' protocol_port) and its allowed_cidrs as its own source
// ranges, as Octavia keeps them per listener; a member address is an
// instance target when it is an instance's, else a raw IP. The load
// balancer's targets are every pool's members, and the pools' health
// monitors are its one health check. A tree with no such listener (a bare
// load balancer, or one whose pools are still empty) projects to a
// minicloud load balancer without listeners: it has its VIP and carries no
// traffic, as in Octavia. What minicloud cannot express is a 400 naming
// the field.
func project(lb *lbRecord, instByIP map[string]string) (api.LoadBalancerSpec, error) {
	spec := api.LoadBalancerSpec{Tags: map[string]string{nativeTag: lb.ID}, Listeners: []api.Listener{}}
	target := func(addr string) api.Target {
		if id := instByIP[addr]; id != "" {
			return api.Target{InstanceID: id}
		}
		return api.Target{IP: addr}
	}
	all := map[string]bool{}
	for _, l := range lb.Listeners {
		p := lb.pool(l.DefaultPoolID)
		if p == nil || len(p.Members) == 0 {
			continue
		}
		port, monPort := p.Members[0].ProtocolPort, p.Members[0].MonitorPort
		var addrs []string
		for _, m := range p.Members {
			if m.ProtocolPort != port {
				return spec, badRequest("members.protocol_port: the members of pool %s use ports %d and %d; minicloud sends a listener's traffic to one target port", p.ID, port, m.ProtocolPort)
			}
			if m.MonitorPort != monPort {
				return spec, badRequest("members.monitor_port: the members of pool %s are monitored on ports %d and %d; minicloud checks every target on one port", p.ID, monPort, m.MonitorPort)
			}
			if !slices.Contains(addrs, m.Address) {
				addrs = append(addrs, m.Address)
			}
			all[m.Address] = true
		}
		slices.Sort(addrs)
		ml := api.Listener{Protocol: l.Protocol, Port: l.ProtocolPort, TargetPort: port, SourceRanges: slices.Clone(l.AllowedCIDRs)}
		for _, a := range addrs {
			ml.Targets = append(ml.Targets, target(a))
		}
		spec.Listeners = append(spec.Listeners, ml)
		if p.Monitor != nil {
			hc, err := healthCheck(p.Monitor, cmp.Or(monPort, port))
			if err != nil {
				return spec, err
			}
			// The first pool's port is probed: one check per target.
			if spec.HealthCheck != nil && (spec.HealthCheck.Protocol != hc.Protocol || spec.HealthCheck.Path != hc.Path || spec.HealthCheck.IntervalSeconds != hc.IntervalSeconds) {
				return spec, badRequest("healthmonitor: pool %s's differs from another pool's; minicloud checks every target of a load balancer one way", p.ID)
			}
			if spec.HealthCheck == nil {
				spec.HealthCheck = hc
			}
		}
	}
	addrs := slices.Sorted(maps.Keys(all))
	for _, a := range addrs {
		spec.Targets = append(spec.Targets, target(a))
	}
	return spec, nil
}

func healthCheck(m *monitor, port int) (*api.HealthCheck, error) {
	hc := &api.HealthCheck{Port: port, IntervalSeconds: m.Delay}
	switch m.Type {
	case "TCP":
		hc.Protocol = api.ProtocolTCP
	case "HTTP":
		hc.Protocol, hc.Path = api.ProtocolHTTP, m.URLPath
		if hc.Path == "" {
			hc.Path = "/"
		}
	default:
		return nil, badRequest("type: health monitor type %s cannot be projected; minicloud checks with TCP or HTTP", m.Type)
	}
	return hc, nil
}

func (lb *lbRecord) pool(id string) *pool {
	for i := range lb.Pools {
		if lb.Pools[i].ID == id && id != "" {
			return &lb.Pools[i]
		}
	}
	return nil
}

func (lb *lbRecord) listener(id string) *listener {
	for i := range lb.Listeners {
		if lb.Listeners[i].ID == id {
			return &lb.Listeners[i]
		}
	}
	return nil
}

// ---- validation of Octavia objects

func validateListener(l *listener) error {
	switch l.Protocol {
	case "TCP", "UDP":
	case "":
		return badRequest("protocol: a listener needs a protocol")
	default:
		return badRequest("protocol: listener protocol %s cannot be projected; minicloud load balancers are L4 (TCP, UDP)", l.Protocol)
	}
	if l.ProtocolPort < 1 || l.ProtocolPort > 65535 {
		return badRequest("protocol_port: %d is not a port (1-65535)", l.ProtocolPort)
	}
	if l.ConnectionLimit < -1 {
		return badRequest("connection_limit: %d; give -1 or more", l.ConnectionLimit)
	}
	for i, c := range l.AllowedCIDRs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return badRequest("allowed_cidrs: %q is not a CIDR", c)
		}
		l.AllowedCIDRs[i] = p.Masked().String()
	}
	return validateTags(l.Tags)
}

func validatePool(p *pool, listenerProtocol string) error {
	switch p.Protocol {
	case "TCP", "UDP":
	case "":
		return badRequest("protocol: a pool needs a protocol")
	default:
		return badRequest("protocol: pool protocol %s cannot be projected; minicloud load balancers are L4 (TCP, UDP)", p.Protocol)
	}
	if listenerProtocol != "" && p.Protocol != listenerProtocol {
		return badRequest("protocol: pool protocol %s does not match listener protocol %s", p.Protocol, listenerProtocol)
	}
	switch p.LBAlgorithm {
	case "ROUND_ROBIN":
	case "":
		return badRequest("lb_algorithm: a pool needs lb_algorithm")
	default:
		return badRequest("lb_algorithm: %s cannot be projected; minicloud balances ROUND_ROBIN only", p.LBAlgorithm)
	}
	return validateTags(p.Tags)
}

func validateMember(m *member) error {
	a, err := netip.ParseAddr(m.Address)
	if err != nil || a.Zone() != "" {
		return badRequest("address: %q is not an IP address", m.Address)
	}
	if m.ProtocolPort < 1 || m.ProtocolPort > 65535 {
		return badRequest("protocol_port: %d is not a port (1-65535)", m.ProtocolPort)
	}
	if m.MonitorPort < 0 || m.MonitorPort > 65535 {
		return badRequest("monitor_port: %d is not a port (1-65535)", m.MonitorPort)
	}
	if m.Weight < 0 || m.Weight > 256 {
		return badRequest("weight: %d out of range 0-256", m.Weight)
	}
	return validateTags(m.Tags)
}

func validateMonitor(m *monitor) error {
	switch m.Type {
	case "TCP", "HTTP":
	case "":
		return badRequest("type: a health monitor needs a type")
	default:
		return badRequest("type: health monitor type %s cannot be projected; minicloud checks with TCP or HTTP", m.Type)
	}
	if m.Delay < 1 || m.Delay > 300 {
		return badRequest("delay: %d out of range 1-300 seconds", m.Delay)
	}
	if m.Timeout < 1 {
		return badRequest("timeout: %d; give at least 1", m.Timeout)
	}
	if m.MaxRetries < 1 || m.MaxRetries > 10 {
		return badRequest("max_retries: %d out of range 1-10", m.MaxRetries)
	}
	if m.MaxRetriesDown < 1 || m.MaxRetriesDown > 10 {
		return badRequest("max_retries_down: %d out of range 1-10", m.MaxRetriesDown)
	}
	if m.Type == "HTTP" {
		if m.HTTPMethod != "GET" {
			return badRequest("http_method: %s cannot be projected; minicloud checks with GET", m.HTTPMethod)
		}
		if m.ExpectedCodes != "200" {
			return badRequest("expected_codes: %s cannot be projected; minicloud expects 200", m.ExpectedCodes)
		}
		if !strings.HasPrefix(m.URLPath, "/") || strings.ContainsAny(m.URLPath, " \t\r\n#") {
			return badRequest("url_path: %q is not an HTTP path", m.URLPath)
		}
	} else if m.URLPath != "" || m.ExpectedCodes != "" || m.HTTPMethod != "" {
		return badRequest("url_path: only HTTP monitors have url_path, http_method and expected_codes")
	}
	return validateTags(m.Tags)
}

func validateTags(tags []string) error {
	if len(tags) > 50 {
		return badRequest("tags: %d tags, at most 50", len(tags))
	}
	for _, t := range tags {
		if t == "" || len(t) > 255 || strings.Contains(t, ",") {
			return badRequest("tags: %q must be 1-255 characters without commas", t)
		}
	}
	return nil
}

// ---- status cycle

// effective returns lb as a reader sees it now: a pending write whose delay
// has passed is ACTIVE (a create only once minicloud's load balancer is
// active), and a finished delete is gone (nil).
func (d *Dialect) effective(lb lbRecord, nativeActive func(id string) bool) *lbRecord {
	now := d.now()
	switch lb.Status {
	case statusPendingUpdate:
		if !now.Before(lb.PendingUntil) {
			lb.Status = statusActive
		}
	case statusPendingCreate:
		if !now.Before(lb.PendingUntil) && nativeActive(lb.NativeID) {
			lb.Status = statusActive
		}
	case statusPendingDelete:
		if !now.Before(lb.PendingUntil) {
			return nil
		}
	}
	return &lb
}

// loadLBs reads every Octavia load balancer as it is now.
func (d *Dialect) loadLBs(r *request) ([]lbRecord, error) {
	var recs []lbRecord
	err := d.st.View(func(tx *store.Tx) error {
		var err error
		recs, _, err = store.List[lbRecord](tx, kindLoadBalancers, "", 0, nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	return d.settle(r, recs)
}

// settle applies the status cycle to recs as read now, and records the
// transitions it sees (a pending write that has ended becomes ACTIVE, a
// finished delete disappears), so the status never depends on the clock
// again, after a restart say.
func (d *Dialect) settle(r *request, recs []lbRecord) ([]lbRecord, error) {
	native, err := d.nativeStates(r, recs)
	if err != nil {
		return nil, err
	}
	var out, changed []lbRecord
	var gone []string
	for _, rec := range recs {
		e := d.effective(rec, func(id string) bool { return native[id] == api.LBActive })
		switch {
		case e == nil:
			gone = append(gone, rec.ID)
			continue
		case e.Status != rec.Status:
			changed = append(changed, *e)
		}
		out = append(out, *e)
	}
	if len(gone)+len(changed) == 0 {
		return out, nil
	}
	err = d.st.Update(func(tx *store.Tx) error {
		for _, id := range gone {
			if err := tx.Delete(kindLoadBalancers, id); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		for _, e := range changed {
			// Only a record still in the state it was read in: a
			// concurrent write (under octMu) wins.
			cur, err := store.Get[lbRecord](tx, kindLoadBalancers, e.ID)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if cur.Status == statusPendingCreate || cur.Status == statusPendingUpdate {
				if !cur.PendingUntil.After(e.PendingUntil) {
					cur.Status = e.Status
					if err := store.Put(tx, kindLoadBalancers, e.ID, cur); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	return out, err
}

// nativeStates returns the states of the minicloud load balancers of the
// records still being created.
func (d *Dialect) nativeStates(r *request, recs []lbRecord) (map[string]string, error) {
	states := map[string]string{}
	for _, rec := range recs {
		if rec.Status != statusPendingCreate {
			continue
		}
		lb, err := r.mc.GetLoadBalancer(r.Context(), rec.NativeID)
		var ce *client.Error
		if errors.As(err, &ce) && ce.StatusCode == http.StatusNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		states[rec.NativeID] = lb.State
	}
	return states, nil
}

// getLB returns the Octavia load balancer id as it is now (404 when gone).
func (d *Dialect) getLB(r *request, id string) (*lbRecord, error) {
	var rec lbRecord
	err := d.st.View(func(tx *store.Tx) error {
		var err error
		rec, err = store.Get[lbRecord](tx, kindLoadBalancers, id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("Load Balancer %s could not be found.", id)
	}
	if err != nil {
		return nil, err
	}
	recs, err := d.settle(r, []lbRecord{rec})
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, notFound("Load Balancer %s could not be found.", id)
	}
	return &recs[0], nil
}

// findChild returns the load balancer holding the child (listener, pool,
// member or monitor) that has matches.
func (d *Dialect) findChild(r *request, kind, id string, has func(*lbRecord) bool) (*lbRecord, error) {
	lbs, err := d.loadLBs(r)
	if err != nil {
		return nil, err
	}
	for i := range lbs {
		if has(&lbs[i]) {
			return &lbs[i], nil
		}
	}
	return nil, notFound("%s %s could not be found.", kind, id)
}

// mutable refuses writes to a load balancer that is PENDING_*: Octavia's
// 409 "immutable".
func mutable(lb *lbRecord) error {
	if strings.HasPrefix(lb.Status, "PENDING_") {
		return conflict("Load Balancer %s is immutable and cannot be updated.", lb.ID)
	}
	return nil
}

// commit applies a changed tree: it projects it (400 when it cannot be),
// updates minicloud's load balancer, and stores the tree PENDING_UPDATE,
// with child (the object written, "" for a delete or the load balancer
// itself) in childStatus meanwhile (PENDING_CREATE or PENDING_UPDATE) and
// the other children ACTIVE, as Octavia shows them.
func (d *Dialect) commit(r *request, lb *lbRecord, child, childStatus string) error {
	lb.Changing, lb.ChangingStatus = child, childStatus
	spec, err := d.projectFor(r, lb)
	if err != nil {
		return err
	}
	if _, err := r.mc.UpdateLoadBalancer(r.Context(), lb.NativeID, spec); err != nil {
		return fmt.Errorf("update minicloud load balancer %s of %s: %w", lb.NativeID, lb.ID, err)
	}
	lb.Status, lb.PendingUntil, lb.UpdatedAt = statusPendingUpdate, d.now().Add(d.opts.PendingDelay), d.now().UTC()
	return d.st.Update(func(tx *store.Tx) error { return store.Put(tx, kindLoadBalancers, lb.ID, lb) })
}

// projectFor projects lb, resolving member addresses to instances.
func (d *Dialect) projectFor(r *request, lb *lbRecord) (api.LoadBalancerSpec, error) {
	insts, err := r.mc.ListInstances(r.Context(), client.ListOptions{})
	if err != nil {
		return api.LoadBalancerSpec{}, err
	}
	byIP := map[string]string{}
	for _, in := range insts {
		byIP[in.PrivateIP] = in.ID
	}
	return project(lb, byIP)
}

// ---- wire formats

func idRefs[T any](items []T, id func(T) string) []map[string]string {
	out := []map[string]string{}
	for _, it := range items {
		out = append(out, map[string]string{"id": id(it)})
	}
	return out
}

func orEmpty(tags []string) []string {
	if tags == nil {
		return []string{}
	}
	return tags
}

func operating(lb *lbRecord) string {
	if lb.Status == statusActive {
		return "ONLINE"
	}
	return "OFFLINE"
}

// childStatus is the provisioning status of child id: while the load
// balancer is PENDING_UPDATE the child being written is PENDING_CREATE or
// PENDING_UPDATE and the others ACTIVE; otherwise the load balancer's.
func childStatus(lb *lbRecord, id string) string {
	if lb.Status != statusPendingUpdate {
		return lb.Status
	}
	if id != "" && id == lb.Changing {
		return lb.ChangingStatus
	}
	return statusActive
}

// childOperating is a child's operating status: ONLINE once it is ACTIVE.
func childOperating(lb *lbRecord, id string) string {
	if childStatus(lb, id) == statusActive {
		return "ONLINE"
	}
	return "OFFLINE"
}

func lbBody(lb *lbRecord) map[string]any {
	return map[string]any{
		"id": lb.ID, "name": lb.Name, "description": lb.Description, "provider": lb.Provider,
		"project_id": projectID(), "tenant_id": projectID(), "admin_state_up": true,
		"provisioning_status": lb.Status, "operating_status": operating(lb),
		"vip_address": lb.VIPAddress, "vip_port_id": vipPortID(lb.ID), "vip_subnet_id": lb.VIPSubnetID,
		"vip_network_id": privateNetworkID(), "vip_qos_policy_id": nil, "flavor_id": nil, "availability_zone": nil,
		"listeners": idRefs(lb.Listeners, func(l listener) string { return l.ID }),
		"pools":     idRefs(lb.Pools, func(p pool) string { return p.ID }),
		"tags":      orEmpty(lb.Tags), "created_at": timeString(lb.CreatedAt), "updated_at": timeString(lb.UpdatedAt),
		"additional_vips": []any{}, "vip_vnic_type": "normal",
	}
}

func listenerBody(lb *lbRecord, l *listener) map[string]any {
	var defPool any
	if l.DefaultPoolID != "" {
		defPool = l.DefaultPoolID
	}
	return map[string]any{
		"id": l.ID, "name": l.Name, "description": l.Description, "protocol": l.Protocol, "protocol_port": l.ProtocolPort,
		"default_pool_id": defPool, "connection_limit": l.ConnectionLimit, "allowed_cidrs": nilIfEmpty(l.AllowedCIDRs),
		"tags": orEmpty(l.Tags), "admin_state_up": true, "project_id": projectID(), "tenant_id": projectID(),
		"loadbalancers":       []map[string]string{{"id": lb.ID}},
		"provisioning_status": childStatus(lb, l.ID), "operating_status": childOperating(lb, l.ID),
		"timeout_client_data": l.TimeoutClientData, "timeout_member_connect": l.TimeoutMemberConnect,
		"timeout_member_data": l.TimeoutMemberData, "timeout_tcp_inspect": l.TimeoutTCPInspect,
		"insert_headers": map[string]string{}, "l7policies": []any{}, "sni_container_refs": []string{},
		"default_tls_container_ref": nil, "client_ca_tls_container_ref": nil,
		"created_at": timeString(lb.CreatedAt), "updated_at": timeString(lb.UpdatedAt),
	}
}

func nilIfEmpty(s []string) any {
	if len(s) == 0 {
		return nil
	}
	return s
}

func poolBody(lb *lbRecord, p *pool) map[string]any {
	listeners := []map[string]string{}
	if p.ListenerID != "" {
		listeners = append(listeners, map[string]string{"id": p.ListenerID})
	}
	var hm any
	if p.Monitor != nil {
		hm = p.Monitor.ID
	}
	return map[string]any{
		"id": p.ID, "name": p.Name, "description": p.Description, "protocol": p.Protocol, "lb_algorithm": p.LBAlgorithm,
		"listeners": listeners, "loadbalancers": []map[string]string{{"id": lb.ID}},
		"members":          idRefs(p.Members, func(m member) string { return m.ID }),
		"healthmonitor_id": hm, "session_persistence": nil, "admin_state_up": true, "tags": orEmpty(p.Tags),
		"project_id": projectID(), "tenant_id": projectID(),
		"provisioning_status": childStatus(lb, p.ID), "operating_status": childOperating(lb, p.ID),
		"created_at": timeString(p.CreatedAt), "updated_at": timeString(lb.UpdatedAt),
		"tls_enabled": false, "tls_container_ref": nil, "ca_tls_container_ref": nil, "crl_container_ref": nil,
	}
}

func memberBody(lb *lbRecord, p *pool, m *member, health map[string]string) map[string]any {
	op := "NO_MONITOR"
	if p.Monitor != nil {
		switch health[m.Address] {
		case api.HealthHealthy:
			op = "ONLINE"
		case api.HealthUnhealthy:
			op = "ERROR"
		default:
			op = "OFFLINE"
		}
	}
	var subnet, monitorPort any
	if m.SubnetID != "" {
		subnet = m.SubnetID
	}
	if m.MonitorPort != 0 {
		monitorPort = m.MonitorPort
	}
	return map[string]any{
		"id": m.ID, "name": m.Name, "address": m.Address, "protocol_port": m.ProtocolPort, "subnet_id": subnet,
		"weight": m.Weight, "backup": false, "admin_state_up": true, "tags": orEmpty(m.Tags),
		"monitor_address": nil, "monitor_port": monitorPort, "project_id": projectID(), "tenant_id": projectID(),
		"provisioning_status": childStatus(lb, m.ID), "operating_status": op,
		"created_at": timeString(lb.CreatedAt), "updated_at": timeString(lb.UpdatedAt),
	}
}

func monitorBody(lb *lbRecord, p *pool, m *monitor) map[string]any {
	body := map[string]any{
		"id": m.ID, "name": m.Name, "type": m.Type, "delay": m.Delay, "timeout": m.Timeout,
		"max_retries": m.MaxRetries, "max_retries_down": m.MaxRetriesDown, "admin_state_up": true,
		"pools": []map[string]string{{"id": p.ID}}, "tags": orEmpty(m.Tags),
		"project_id": projectID(), "tenant_id": projectID(),
		"provisioning_status": childStatus(lb, m.ID), "operating_status": childOperating(lb, m.ID),
		"created_at": timeString(lb.CreatedAt), "updated_at": timeString(lb.UpdatedAt),
	}
	if m.Type == "HTTP" {
		body["http_method"], body["url_path"], body["expected_codes"] = m.HTTPMethod, m.URLPath, m.ExpectedCodes
	}
	return body
}

// octaviaVersions are the API versions listed; the upstream provider reads
// the last to choose features (tags from 2.5, VIP ACLs from 2.12).
func octaviaVersions(r *request) []any {
	var out []any
	for minor := 0; minor <= 27; minor++ {
		status := "SUPPORTED"
		if minor == 27 {
			status = "CURRENT"
		}
		out = append(out, map[string]any{
			"id": "v2." + strconv.Itoa(minor), "status": status, "updated": "2023-01-01T00:00:00Z",
			"links": []link{{Href: r.base + LoadBalancerPrefix + "/v2", Rel: "self"}},
		})
	}
	return out
}
