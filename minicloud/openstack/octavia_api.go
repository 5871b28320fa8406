package openstack

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/store"
)

var lbSvc = &service{prefix: LoadBalancerPrefix, errorBody: octaviaError}

// octaviaError is Octavia's (WSME's) error body.
func octaviaError(status int, msg string) any {
	code := "Client"
	if status >= 500 {
		code = "Server"
	}
	return map[string]any{"faultcode": code, "faultstring": msg, "debuginfo": nil}
}

// ---- request bodies

type lbCreate struct {
	LoadBalancer struct {
		Name             string            `json:"name"`
		Description      string            `json:"description"`
		Provider         string            `json:"provider"`
		VIPSubnetID      string            `json:"vip_subnet_id"`
		VIPNetworkID     string            `json:"vip_network_id"`
		VIPPortID        string            `json:"vip_port_id"`
		VIPAddress       string            `json:"vip_address"`
		VIPQoSPolicyID   string            `json:"vip_qos_policy_id"`
		FlavorID         string            `json:"flavor_id"`
		AvailabilityZone string            `json:"availability_zone"`
		AdminStateUp     *bool             `json:"admin_state_up"`
		ProjectID        string            `json:"project_id"`
		TenantID         string            `json:"tenant_id"`
		Tags             []string          `json:"tags"`
		Listeners        []listenerCreate  `json:"listeners"`
		Pools            []json.RawMessage `json:"pools"`
		AdditionalVIPs   []json.RawMessage `json:"additional_vips"`
	} `json:"loadbalancer"`
}

type listenerCreate struct {
	LoadBalancerID       string            `json:"loadbalancer_id"`
	Name                 string            `json:"name"`
	Description          string            `json:"description"`
	Protocol             string            `json:"protocol"`
	ProtocolPort         int               `json:"protocol_port"`
	DefaultPoolID        string            `json:"default_pool_id"`
	DefaultPool          *poolCreate       `json:"default_pool"`
	ConnectionLimit      *int              `json:"connection_limit"`
	AllowedCIDRs         []string          `json:"allowed_cidrs"`
	Tags                 []string          `json:"tags"`
	TimeoutClientData    *int              `json:"timeout_client_data"`
	TimeoutMemberConnect *int              `json:"timeout_member_connect"`
	TimeoutMemberData    *int              `json:"timeout_member_data"`
	TimeoutTCPInspect    *int              `json:"timeout_tcp_inspect"`
	InsertHeaders        map[string]string `json:"insert_headers"`
	AdminStateUp         *bool             `json:"admin_state_up"`
	ProjectID            string            `json:"project_id"`
	DefaultTLSContainer  string            `json:"default_tls_container_ref"`
	SNIContainerRefs     []string          `json:"sni_container_refs"`
	L7Policies           []json.RawMessage `json:"l7policies"`
}

type poolCreate struct {
	LoadBalancerID     string          `json:"loadbalancer_id"`
	ListenerID         string          `json:"listener_id"`
	Name               string          `json:"name"`
	Description        string          `json:"description"`
	Protocol           string          `json:"protocol"`
	LBAlgorithm        string          `json:"lb_algorithm"`
	SessionPersistence json.RawMessage `json:"session_persistence"`
	Members            []memberCreate  `json:"members"`
	Monitor            *monitorCreate  `json:"healthmonitor"`
	Tags               []string        `json:"tags"`
	AdminStateUp       *bool           `json:"admin_state_up"`
	ProjectID          string          `json:"project_id"`
	TLSEnabled         bool            `json:"tls_enabled"`
}

type memberCreate struct {
	Name           string   `json:"name"`
	Address        string   `json:"address"`
	ProtocolPort   int      `json:"protocol_port"`
	SubnetID       string   `json:"subnet_id"`
	Weight         *int     `json:"weight"`
	Backup         bool     `json:"backup"`
	MonitorAddress string   `json:"monitor_address"`
	MonitorPort    *int     `json:"monitor_port"`
	Tags           []string `json:"tags"`
	AdminStateUp   *bool    `json:"admin_state_up"`
	ProjectID      string   `json:"project_id"`
}

type monitorCreate struct {
	PoolID         string   `json:"pool_id"`
	Name           string   `json:"name"`
	Type           string   `json:"type"`
	Delay          int      `json:"delay"`
	Timeout        int      `json:"timeout"`
	MaxRetries     int      `json:"max_retries"`
	MaxRetriesDown *int     `json:"max_retries_down"`
	HTTPMethod     string   `json:"http_method"`
	URLPath        string   `json:"url_path"`
	ExpectedCodes  string   `json:"expected_codes"`
	Tags           []string `json:"tags"`
	AdminStateUp   *bool    `json:"admin_state_up"`
	ProjectID      string   `json:"project_id"`
}

// checkCommon rejects what every Octavia object may carry but minicloud
// cannot project: disabled objects and other projects.
func checkCommon(adminUp *bool, projects ...string) error {
	if adminUp != nil && !*adminUp {
		return badRequest("admin_state_up: false cannot be projected; minicloud cannot disable part of a load balancer")
	}
	for _, p := range projects {
		if p != "" && p != projectID() {
			return badRequest("project_id: %s is not this project (%s)", p, projectID())
		}
	}
	return nil
}

func (c *listenerCreate) record() (listener, *poolCreate, error) {
	if err := checkCommon(c.AdminStateUp, c.ProjectID); err != nil {
		return listener{}, nil, err
	}
	if len(c.InsertHeaders) > 0 {
		return listener{}, nil, badRequest("insert_headers: only HTTP listeners insert headers")
	}
	if c.DefaultTLSContainer != "" || len(c.SNIContainerRefs) > 0 {
		return listener{}, nil, badRequest("default_tls_container_ref: minicloud does not terminate TLS")
	}
	if len(c.L7Policies) > 0 {
		return listener{}, nil, badRequest("l7policies: minicloud load balancers are L4")
	}
	if c.DefaultPool != nil && c.DefaultPoolID != "" {
		return listener{}, nil, badRequest("default_pool: give default_pool or default_pool_id, not both")
	}
	l := listener{
		ID: newUUID(), Name: c.Name, Description: c.Description, Protocol: c.Protocol, ProtocolPort: c.ProtocolPort,
		DefaultPoolID: c.DefaultPoolID, ConnectionLimit: orInt(c.ConnectionLimit, -1), AllowedCIDRs: c.AllowedCIDRs,
		Tags: c.Tags, TimeoutClientData: orInt(c.TimeoutClientData, 50000), TimeoutMemberConnect: orInt(c.TimeoutMemberConnect, 5000),
		TimeoutMemberData: orInt(c.TimeoutMemberData, 50000), TimeoutTCPInspect: orInt(c.TimeoutTCPInspect, 0),
	}
	return l, c.DefaultPool, validateListener(&l)
}

func orInt(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

func (c *poolCreate) record(listenerProtocol string) (pool, error) {
	if err := checkCommon(c.AdminStateUp, c.ProjectID); err != nil {
		return pool{}, err
	}
	if len(c.SessionPersistence) > 0 && string(c.SessionPersistence) != "null" {
		return pool{}, badRequest("session_persistence: cannot be projected; minicloud balances round-robin")
	}
	if c.TLSEnabled {
		return pool{}, badRequest("tls_enabled: minicloud does not speak TLS to members")
	}
	p := pool{ID: newUUID(), Name: c.Name, Description: c.Description, Protocol: c.Protocol, LBAlgorithm: c.LBAlgorithm, Tags: c.Tags}
	if err := validatePool(&p, listenerProtocol); err != nil {
		return p, err
	}
	for i := range c.Members {
		m, err := c.Members[i].record()
		if err != nil {
			return p, err
		}
		p.Members = append(p.Members, m)
	}
	if c.Monitor != nil {
		m, err := c.Monitor.record()
		if err != nil {
			return p, err
		}
		p.Monitor = &m
	}
	return p, nil
}

func (c *memberCreate) record() (member, error) {
	if err := checkCommon(c.AdminStateUp, c.ProjectID); err != nil {
		return member{}, err
	}
	if c.Backup {
		return member{}, badRequest("backup: backup members cannot be projected")
	}
	if c.MonitorAddress != "" && c.MonitorAddress != c.Address {
		return member{}, badRequest("monitor_address: minicloud checks members on their own address")
	}
	m := member{ID: newUUID(), Name: c.Name, Address: c.Address, ProtocolPort: c.ProtocolPort, SubnetID: c.SubnetID, Weight: orInt(c.Weight, 1), MonitorPort: orInt(c.MonitorPort, 0), Tags: c.Tags}
	if c.MonitorPort != nil && *c.MonitorPort == 0 {
		return m, badRequest("monitor_port: 0 is not a port (1-65535)")
	}
	return m, validateMember(&m)
}

func (c *monitorCreate) record() (monitor, error) {
	if err := checkCommon(c.AdminStateUp, c.ProjectID); err != nil {
		return monitor{}, err
	}
	m := monitor{
		ID: newUUID(), Name: c.Name, Type: c.Type, Delay: c.Delay, Timeout: c.Timeout, MaxRetries: c.MaxRetries,
		MaxRetriesDown: orInt(c.MaxRetriesDown, 3), HTTPMethod: c.HTTPMethod, URLPath: c.URLPath, ExpectedCodes: c.ExpectedCodes, Tags: c.Tags,
	}
	if m.Type == "HTTP" {
		m.HTTPMethod = cmpOr(m.HTTPMethod, "GET")
		m.URLPath = cmpOr(m.URLPath, "/")
		m.ExpectedCodes = cmpOr(m.ExpectedCodes, "200")
	}
	return m, validateMonitor(&m)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// addListener adds l (and its default pool) to lb, checking uniqueness.
func addListener(lb *lbRecord, l listener, pc *poolCreate) error {
	for _, o := range lb.Listeners {
		if o.ProtocolPort == l.ProtocolPort && (o.Protocol == l.Protocol || (o.Protocol != "UDP") == (l.Protocol != "UDP")) {
			return conflict("Another Listener on this Load Balancer is already using protocol_port %d", l.ProtocolPort)
		}
	}
	if l.DefaultPoolID != "" {
		p := lb.pool(l.DefaultPoolID)
		if p == nil {
			return notFound("Pool %s could not be found.", l.DefaultPoolID)
		}
		if p.ListenerID != "" {
			return conflict("Pool %s is already used by listener %s", p.ID, p.ListenerID)
		}
		if p.Protocol != l.Protocol {
			return badRequest("default_pool_id: pool protocol %s does not match listener protocol %s", p.Protocol, l.Protocol)
		}
		p.ListenerID = l.ID
	}
	if pc != nil {
		p, err := pc.record(l.Protocol)
		if err != nil {
			return err
		}
		p.ListenerID, p.CreatedAt = l.ID, nowUTC()
		lb.Pools = append(lb.Pools, p)
		l.DefaultPoolID = p.ID
	}
	lb.Listeners = append(lb.Listeners, l)
	return nil
}

// ---- routes

func (d *Dialect) octaviaRoutes() {
	d.handle(lbSvc, "GET /load-balancer/{$}", true, func(r *request) (int, any, error) {
		return http.StatusOK, map[string]any{"versions": octaviaVersions(r)}, nil
	})
	for _, v := range []string{"v2.0", "v2"} {
		b := "/load-balancer/" + v + "/lbaas/"
		d.handle(lbSvc, "GET "+b+"loadbalancers", false, d.octaviaList("loadbalancers", nil, lbObjects))
		d.handle(lbSvc, "POST "+b+"loadbalancers", false, d.createLB)
		d.handle(lbSvc, "GET "+b+"loadbalancers/{id}", false, d.octaviaGet("loadbalancer", lbObjects))
		d.handle(lbSvc, "PUT "+b+"loadbalancers/{id}", false, d.updateLB)
		d.handle(lbSvc, "DELETE "+b+"loadbalancers/{id}", false, d.deleteLB)
		d.handle(lbSvc, "GET "+b+"loadbalancers/{id}/status", false, d.lbStatusTree)
		d.handle(lbSvc, "GET "+b+"providers", false, octaviaProviders)
		// There are no load-balancer flavors or availability zones: empty
		// lists, as on a cloud whose operator defined none.
		d.handle(lbSvc, "GET "+b+"flavors", false, d.emptyOctaviaList("flavors"))
		d.handle(lbSvc, "GET "+b+"flavors/{id}", false, func(r *request) (int, any, error) {
			return 0, nil, notFound("Flavor %s could not be found.", r.PathValue("id"))
		})
		d.handle(lbSvc, "GET "+b+"availabilityzones", false, d.emptyOctaviaList("availability_zones"))
		d.handle(lbSvc, "GET "+b+"availabilityzones/{name}", false, func(r *request) (int, any, error) {
			return 0, nil, notFound("Availability Zone %s could not be found.", r.PathValue("name"))
		})

		d.handle(lbSvc, "GET "+b+"listeners", false, d.octaviaList("listeners", special{"loadbalancer_id": refFilter("loadbalancers")}, listenerObjects))
		d.handle(lbSvc, "POST "+b+"listeners", false, d.createListener)
		d.handle(lbSvc, "GET "+b+"listeners/{id}", false, d.octaviaGet("listener", listenerObjects))
		d.handle(lbSvc, "PUT "+b+"listeners/{id}", false, d.updateListener)
		d.handle(lbSvc, "DELETE "+b+"listeners/{id}", false, d.deleteListener)

		d.handle(lbSvc, "GET "+b+"pools", false, d.octaviaList("pools", special{"loadbalancer_id": refFilter("loadbalancers"), "listener_id": refFilter("listeners")}, poolObjects))
		d.handle(lbSvc, "POST "+b+"pools", false, d.createPool)
		d.handle(lbSvc, "GET "+b+"pools/{id}", false, d.octaviaGet("pool", poolObjects))
		d.handle(lbSvc, "PUT "+b+"pools/{id}", false, d.updatePool)
		d.handle(lbSvc, "DELETE "+b+"pools/{id}", false, d.deletePool)

		d.handle(lbSvc, "GET "+b+"pools/{pool}/members", false, d.listMembers)
		d.handle(lbSvc, "POST "+b+"pools/{pool}/members", false, d.createMember)
		d.handle(lbSvc, "PUT "+b+"pools/{pool}/members", false, d.batchMembers)
		d.handle(lbSvc, "GET "+b+"pools/{pool}/members/{id}", false, d.getMember)
		d.handle(lbSvc, "PUT "+b+"pools/{pool}/members/{id}", false, d.updateMember)
		d.handle(lbSvc, "DELETE "+b+"pools/{pool}/members/{id}", false, d.deleteMember)

		d.handle(lbSvc, "GET "+b+"healthmonitors", false, d.octaviaList("healthmonitors", special{"pool_id": refFilter("pools")}, monitorObjects))
		d.handle(lbSvc, "POST "+b+"healthmonitors", false, d.createMonitor)
		d.handle(lbSvc, "GET "+b+"healthmonitors/{id}", false, d.octaviaGet("healthmonitor", monitorObjects))
		d.handle(lbSvc, "PUT "+b+"healthmonitors/{id}", false, d.updateMonitor)
		d.handle(lbSvc, "DELETE "+b+"healthmonitors/{id}", false, d.deleteMonitor)
	}
	d.mux.HandleFunc("PUT "+OpsPrefix+"/loadbalancers/{id}/provisioning_status", d.opsSetStatus)
}

// refFilter filters by the ID of a referenced object ("loadbalancers":
// [{"id": ...}]).
func refFilter(field string) func(o object, vals []string) (bool, error) {
	return func(o object, vals []string) (bool, error) {
		refs, _ := o[field].([]any)
		for _, ref := range refs {
			if m, ok := ref.(map[string]any); ok && slices.Contains(vals, fmt.Sprint(m["id"])) {
				return true, nil
			}
		}
		return false, nil
	}
}

func lbObjects(d *Dialect, r *request, lbs []lbRecord) ([]object, error) {
	var out []object
	for i := range lbs {
		out = append(out, toObject(lbBody(&lbs[i])))
	}
	return out, nil
}

func listenerObjects(d *Dialect, r *request, lbs []lbRecord) ([]object, error) {
	var out []object
	for i := range lbs {
		for j := range lbs[i].Listeners {
			out = append(out, toObject(listenerBody(&lbs[i], &lbs[i].Listeners[j])))
		}
	}
	return out, nil
}

func poolObjects(d *Dialect, r *request, lbs []lbRecord) ([]object, error) {
	var out []object
	for i := range lbs {
		for j := range lbs[i].Pools {
			out = append(out, toObject(poolBody(&lbs[i], &lbs[i].Pools[j])))
		}
	}
	return out, nil
}

func monitorObjects(d *Dialect, r *request, lbs []lbRecord) ([]object, error) {
	var out []object
	for i := range lbs {
		for j := range lbs[i].Pools {
			if p := &lbs[i].Pools[j]; p.Monitor != nil {
				out = append(out, toObject(monitorBody(&lbs[i], p, p.Monitor)))
			}
		}
	}
	return out, nil
}

// samples build an object of each collection that can be empty, to check
// filter names against.
var samples = map[string]func() object{
	"loadbalancers": func() object { return toObject(lbBody(&lbRecord{})) },
	"listeners":     func() object { return toObject(listenerBody(&lbRecord{}, &listener{})) },
	"pools":         func() object { return toObject(poolBody(&lbRecord{}, &pool{})) },
	"members":       func() object { return toObject(memberBody(&lbRecord{}, &pool{}, &member{}, nil)) },
	"healthmonitors": func() object {
		return toObject(monitorBody(&lbRecord{}, &pool{}, &monitor{Type: "HTTP"}))
	},
	"floatingips": func() object { return toObject((&Dialect{}).fipBody(fipRecord{}, nil)) },
	"flavors": func() object {
		return object{"id": "", "name": "", "description": "", "enabled": true, "flavor_profile_id": ""}
	},
	"availability_zones": func() object {
		return object{"name": "", "description": "", "enabled": true, "availability_zone_profile_id": ""}
	},
}

// emptyOctaviaList answers a collection the dialect has nothing in: its
// filters and paging are checked as for any collection.
func (d *Dialect) emptyOctaviaList(coll string) handler {
	return func(r *request) (int, any, error) {
		q := r.URL.Query()
		p, err := d.parsePage(q)
		if err != nil {
			return 0, nil, err
		}
		return listAnswer(r, coll, nil, q, nil, p, octaviaAttrErr, func(m string) error {
			return badRequest("Invalid marker: %s is not in this collection", m)
		})
	}
}

// octaviaProviders answers GET /providers: the amphora driver, which is
// what minicloud's data plane stands in for, and its deprecated alias.
func octaviaProviders(r *request) (int, any, error) {
	if len(r.URL.Query()) > 0 {
		return 0, nil, badRequest("providers: unexpected query parameters")
	}
	return http.StatusOK, map[string]any{"providers": []any{
		map[string]string{"name": "amphora", "description": "The Octavia Amphora driver."},
		map[string]string{"name": "octavia", "description": "Deprecated alias of the Octavia Amphora driver."},
	}}, nil
}

func clone(q map[string][]string) map[string][]string {
	out := make(map[string][]string, len(q))
	for k, v := range q {
		out[k] = v
	}
	return out
}

type objectsFunc func(d *Dialect, r *request, lbs []lbRecord) ([]object, error)

func octaviaAttrErr(k string) error {
	return badRequest("Invalid filter argument: %s is not a filterable attribute", k)
}

// octaviaList answers a collection: filtered exactly, paged with limit
// and marker, "<coll>_links" holding rel=next.
func (d *Dialect) octaviaList(coll string, sp special, objs objectsFunc) handler {
	return func(r *request) (int, any, error) {
		q := r.URL.Query()
		p, err := d.parsePage(q)
		if err != nil {
			return 0, nil, err
		}
		lbs, err := d.loadLBs(r)
		if err != nil {
			return 0, nil, err
		}
		all, err := objs(d, r, lbs)
		if err != nil {
			return 0, nil, err
		}
		return listAnswer(r, coll, all, q, sp, p, octaviaAttrErr, func(m string) error {
			return badRequest("Invalid marker: %s is not in this collection", m)
		})
	}
}

// listAnswer filters, sorts by ID and pages objects into a list body.
func listAnswer(r *request, coll string, all []object, q map[string][]string, sp special, p pageParams, attrErr, markerErr func(string) error) (int, any, error) {
	if len(all) == 0 {
		// An empty collection still refuses filters it does not have.
		if sample := samples[coll]; sample != nil {
			all = []object{sample()}
			if _, err := filterObjects(all, clone(q), sp, attrErr); err != nil {
				return 0, nil, err
			}
			all = nil
		}
	}
	slices.SortFunc(all, func(a, b object) int { return strings.Compare(fmt.Sprint(a["id"]), fmt.Sprint(b["id"])) })
	if fs, ok := q["fields"]; ok && !slices.Contains(fs, "id") {
		// Paging needs the ID.
		q["fields"] = append(fs, "id")
	}
	sel, err := filterObjects(all, q, sp, attrErr)
	if err != nil {
		return 0, nil, err
	}
	pg, more, err := paginate(sel, func(o object) string { return fmt.Sprint(o["id"]) }, p, markerErr)
	if err != nil {
		return 0, nil, err
	}
	if pg == nil {
		pg = []object{}
	}
	last := ""
	if len(pg) > 0 {
		last = fmt.Sprint(pg[len(pg)-1]["id"])
	}
	// The body's key is the collection's name with underscores, as in
	// Neutron's security_groups served at /security-groups.
	key := strings.ReplaceAll(coll, "-", "_")
	return http.StatusOK, map[string]any{key: pg, key + "_links": nextLinks(r, more, last, p.limit)}, nil
}

// octaviaGet answers one object of a collection by ID.
func (d *Dialect) octaviaGet(singular string, objs objectsFunc) handler {
	return func(r *request) (int, any, error) {
		id := r.PathValue("id")
		if len(r.URL.Query()) > 0 {
			return 0, nil, badRequest("unexpected query parameters")
		}
		lbs, err := d.loadLBs(r)
		if err != nil {
			return 0, nil, err
		}
		all, err := objs(d, r, lbs)
		if err != nil {
			return 0, nil, err
		}
		for _, o := range all {
			if o["id"] == id {
				return http.StatusOK, map[string]any{singular: o}, nil
			}
		}
		return 0, nil, notFound("%s %s could not be found.", displayName(singular), id)
	}
}

func displayName(singular string) string {
	return map[string]string{"loadbalancer": "Load Balancer", "listener": "Listener", "pool": "Pool", "healthmonitor": "Health Monitor", "member": "Member"}[singular]
}

// ---- load balancers

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

func (d *Dialect) updateLB(r *request) (int, any, error) {
	var in struct {
		LoadBalancer struct {
			Name         *string   `json:"name"`
			Description  *string   `json:"description"`
			Tags         *[]string `json:"tags"`
			AdminStateUp *bool     `json:"admin_state_up"`
		} `json:"loadbalancer"`
	}
	if err := decodeBody(r, &in); err != nil {
		return 0, nil, err
	}
	u := in.LoadBalancer
	if err := checkCommon(u.AdminStateUp); err != nil {
		return 0, nil, err
	}
	if u.Tags != nil {
		if err := validateTags(*u.Tags); err != nil {
			return 0, nil, err
		}
	}
	lb, err := d.lockLB(r, &lbRecord{ID: r.PathValue("id")})
	if err != nil {
		return 0, nil, err
	}
	defer d.octMu.Unlock()
	setIf(&lb.Name, u.Name)
	setIf(&lb.Description, u.Description)
	setIf(&lb.Tags, u.Tags)
	if err := d.commit(r, lb, "", ""); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"loadbalancer": lbBody(lb)}, nil
}

func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

func (d *Dialect) deleteLB(r *request) (int, any, error) {
	cascade := false
	for k, vs := range r.URL.Query() {
		if k != "cascade" {
			return 0, nil, badRequest("unexpected query parameter %s", k)
		}
		b, err := strconv.ParseBool(vs[0])
		if err != nil {
			return 0, nil, badRequest("cascade: %q is not a boolean", vs[0])
		}
		cascade = b
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

// ---- listeners

func (d *Dialect) createListener(r *request) (int, any, error) {
	var in struct {
		Listener listenerCreate `json:"listener"`
	}
	if err := decodeBody(r, &in); err != nil {
		return 0, nil, err
	}
	l, pc, err := in.Listener.record()
	if err != nil {
		return 0, nil, err
	}
	if in.Listener.LoadBalancerID == "" {
		return 0, nil, badRequest("loadbalancer_id: a listener needs its load balancer")
	}
	lb, err := d.lockLB(r, &lbRecord{ID: in.Listener.LoadBalancerID})
	if err != nil {
		return 0, nil, err
	}
	defer d.octMu.Unlock()
	if err := addListener(lb, l, pc); err != nil {
		return 0, nil, err
	}
	if err := d.commit(r, lb, l.ID, statusPendingCreate); err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, map[string]any{"listener": listenerBody(lb, lb.listener(l.ID))}, nil
}

// childLB finds and locks the load balancer holding a child.
func (d *Dialect) childLB(r *request, kind, id string, has func(*lbRecord) bool) (*lbRecord, error) {
	lb, err := d.findChild(r, kind, id, has)
	if err != nil {
		return nil, err
	}
	return d.lockLB(r, lb)
}

func hasListener(id string) func(*lbRecord) bool {
	return func(lb *lbRecord) bool { return lb.listener(id) != nil }
}

func hasPool(id string) func(*lbRecord) bool {
	return func(lb *lbRecord) bool { return lb.pool(id) != nil }
}

func (d *Dialect) updateListener(r *request) (int, any, error) {
	var in struct {
		Listener struct {
			Name                 *string            `json:"name"`
			Description          *string            `json:"description"`
			DefaultPoolID        *string            `json:"default_pool_id"`
			ConnectionLimit      *int               `json:"connection_limit"`
			AllowedCIDRs         *[]string          `json:"allowed_cidrs"`
			Tags                 *[]string          `json:"tags"`
			TimeoutClientData    *int               `json:"timeout_client_data"`
			TimeoutMemberConnect *int               `json:"timeout_member_connect"`
			TimeoutMemberData    *int               `json:"timeout_member_data"`
			TimeoutTCPInspect    *int               `json:"timeout_tcp_inspect"`
			AdminStateUp         *bool              `json:"admin_state_up"`
			InsertHeaders        *map[string]string `json:"insert_headers"`
		} `json:"listener"`
	}
	if err := decodeBody(r, &in); err != nil {
		return 0, nil, err
	}
	u := in.Listener
	if err := checkCommon(u.AdminStateUp); err != nil {
		return 0, nil, err
	}
	if u.InsertHeaders != nil && len(*u.InsertHeaders) > 0 {
		return 0, nil, badRequest("insert_headers: only HTTP listeners insert headers")
	}
	id := r.PathValue("id")
	lb, err := d.childLB(r, "Listener", id, hasListener(id))
	if err != nil {
		return 0, nil, err
	}
	defer d.octMu.Unlock()
	l := lb.listener(id)
	setIf(&l.Name, u.Name)
	setIf(&l.Description, u.Description)
	setIf(&l.ConnectionLimit, u.ConnectionLimit)
	setIf(&l.AllowedCIDRs, u.AllowedCIDRs)
	setIf(&l.Tags, u.Tags)
	setIf(&l.TimeoutClientData, u.TimeoutClientData)
	setIf(&l.TimeoutMemberConnect, u.TimeoutMemberConnect)
	setIf(&l.TimeoutMemberData, u.TimeoutMemberData)
	setIf(&l.TimeoutTCPInspect, u.TimeoutTCPInspect)
	if u.DefaultPoolID != nil && *u.DefaultPoolID != l.DefaultPoolID {
		if old := lb.pool(l.DefaultPoolID); old != nil {
			old.ListenerID = ""
		}
		l.DefaultPoolID = ""
		if *u.DefaultPoolID != "" {
			p := lb.pool(*u.DefaultPoolID)
			switch {
			case p == nil:
				return 0, nil, notFound("Pool %s could not be found.", *u.DefaultPoolID)
			case p.ListenerID != "":
				return 0, nil, conflict("Pool %s is already used by listener %s", p.ID, p.ListenerID)
			case p.Protocol != l.Protocol:
				return 0, nil, badRequest("default_pool_id: pool protocol %s does not match listener protocol %s", p.Protocol, l.Protocol)
			}
			p.ListenerID, l.DefaultPoolID = l.ID, p.ID
		}
	}
	if err := validateListener(l); err != nil {
		return 0, nil, err
	}
	if err := d.commit(r, lb, id, statusPendingUpdate); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"listener": listenerBody(lb, lb.listener(id))}, nil
}

func (d *Dialect) deleteListener(r *request) (int, any, error) {
	id := r.PathValue("id")
	lb, err := d.childLB(r, "Listener", id, hasListener(id))
	if err != nil {
		return 0, nil, err
	}
	defer d.octMu.Unlock()
	for i := range lb.Pools {
		if lb.Pools[i].ListenerID == id {
			lb.Pools[i].ListenerID = ""
		}
	}
	lb.Listeners = slices.DeleteFunc(lb.Listeners, func(l listener) bool { return l.ID == id })
	if err := d.commit(r, lb, "", ""); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}

// ---- pools

func (d *Dialect) createPool(r *request) (int, any, error) {
	var in struct {
		Pool poolCreate `json:"pool"`
	}
	if err := decodeBody(r, &in); err != nil {
		return 0, nil, err
	}
	c := in.Pool
	var lb *lbRecord
	var err error
	switch {
	case c.ListenerID != "":
		lb, err = d.childLB(r, "Listener", c.ListenerID, hasListener(c.ListenerID))
	case c.LoadBalancerID != "":
		lb, err = d.lockLB(r, &lbRecord{ID: c.LoadBalancerID})
	default:
		return 0, nil, badRequest("loadbalancer_id: a pool needs loadbalancer_id or listener_id")
	}
	if err != nil {
		return 0, nil, err
	}
	defer d.octMu.Unlock()
	if c.LoadBalancerID != "" && c.LoadBalancerID != lb.ID {
		return 0, nil, badRequest("loadbalancer_id: listener %s belongs to load balancer %s", c.ListenerID, lb.ID)
	}
	proto := ""
	var l *listener
	if c.ListenerID != "" {
		l = lb.listener(c.ListenerID)
		if l.DefaultPoolID != "" {
			return 0, nil, conflict("Listener %s already has default pool %s", l.ID, l.DefaultPoolID)
		}
		proto = l.Protocol
	}
	p, err := c.record(proto)
	if err != nil {
		return 0, nil, err
	}
	p.CreatedAt = nowUTC()
	if l != nil {
		p.ListenerID, l.DefaultPoolID = l.ID, p.ID
	}
	lb.Pools = append(lb.Pools, p)
	if err := d.commit(r, lb, p.ID, statusPendingCreate); err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, map[string]any{"pool": poolBody(lb, lb.pool(p.ID))}, nil
}

func (d *Dialect) updatePool(r *request) (int, any, error) {
	var in struct {
		Pool struct {
			Name               *string         `json:"name"`
			Description        *string         `json:"description"`
			LBAlgorithm        *string         `json:"lb_algorithm"`
			Tags               *[]string       `json:"tags"`
			AdminStateUp       *bool           `json:"admin_state_up"`
			SessionPersistence json.RawMessage `json:"session_persistence"`
		} `json:"pool"`
	}
	if err := decodeBody(r, &in); err != nil {
		return 0, nil, err
	}
	u := in.Pool
	if err := checkCommon(u.AdminStateUp); err != nil {
		return 0, nil, err
	}
	if len(u.SessionPersistence) > 0 && string(u.SessionPersistence) != "null" {
		return 0, nil, badRequest("session_persistence: cannot be projected; minicloud balances round-robin")
	}
	id := r.PathValue("id")
	lb, err := d.childLB(r, "Pool", id, hasPool(id))
	if err != nil {
		return 0, nil, err
	}
	defer d.octMu.Unlock()
	p := lb.pool(id)
	setIf(&p.Name, u.Name)
	setIf(&p.Description, u.Description)
	setIf(&p.LBAlgorithm, u.LBAlgorithm)
	setIf(&p.Tags, u.Tags)
	if err := validatePool(p, ""); err != nil {
		return 0, nil, err
	}
	if err := d.commit(r, lb, id, statusPendingUpdate); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"pool": poolBody(lb, lb.pool(id))}, nil
}

func (d *Dialect) deletePool(r *request) (int, any, error) {
	id := r.PathValue("id")
	lb, err := d.childLB(r, "Pool", id, hasPool(id))
	if err != nil {
		return 0, nil, err
	}
	defer d.octMu.Unlock()
	for i := range lb.Listeners {
		if lb.Listeners[i].DefaultPoolID == id {
			lb.Listeners[i].DefaultPoolID = ""
		}
	}
	lb.Pools = slices.DeleteFunc(lb.Pools, func(p pool) bool { return p.ID == id })
	if err := d.commit(r, lb, "", ""); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}

// ---- members

// poolOf finds the load balancer and pool of the path's {pool}.
func (d *Dialect) poolOf(r *request, lock bool) (*lbRecord, *pool, error) {
	pid := r.PathValue("pool")
	var lb *lbRecord
	var err error
	if lock {
		lb, err = d.childLB(r, "Pool", pid, hasPool(pid))
	} else {
		lb, err = d.findChild(r, "Pool", pid, hasPool(pid))
	}
	if err != nil {
		return nil, nil, err
	}
	return lb, lb.pool(pid), nil
}

// memberHealth returns the observed health of the targets of lb's
// minicloud load balancer by address.
func memberHealth(r *request, lb *lbRecord) map[string]string {
	out := map[string]string{}
	if nlb, err := r.mc.GetLoadBalancer(r.Context(), lb.NativeID); err == nil {
		for _, th := range nlb.TargetHealth {
			out[th.IP] = th.State
		}
	}
	return out
}

func (d *Dialect) listMembers(r *request) (int, any, error) {
	q := r.URL.Query()
	p, err := d.parsePage(q)
	if err != nil {
		return 0, nil, err
	}
	lb, pl, err := d.poolOf(r, false)
	if err != nil {
		return 0, nil, err
	}
	health := memberHealth(r, lb)
	var all []object
	for i := range pl.Members {
		all = append(all, toObject(memberBody(lb, pl, &pl.Members[i], health)))
	}
	return listAnswer(r, "members", all, q, nil, p, octaviaAttrErr, func(m string) error {
		return badRequest("Invalid marker: %s is not in this collection", m)
	})
}

func (d *Dialect) getMember(r *request) (int, any, error) {
	lb, pl, err := d.poolOf(r, false)
	if err != nil {
		return 0, nil, err
	}
	for i := range pl.Members {
		if m := &pl.Members[i]; m.ID == r.PathValue("id") {
			return http.StatusOK, map[string]any{"member": memberBody(lb, pl, m, memberHealth(r, lb))}, nil
		}
	}
	return 0, nil, notFound("Member %s could not be found.", r.PathValue("id"))
}

func duplicateMember(ms []member, m member) bool {
	for _, o := range ms {
		if o.ID != m.ID && o.Address == m.Address && o.ProtocolPort == m.ProtocolPort {
			return true
		}
	}
	return false
}

func (d *Dialect) createMember(r *request) (int, any, error) {
	var in struct {
		Member memberCreate `json:"member"`
	}
	if err := decodeBody(r, &in); err != nil {
		return 0, nil, err
	}
	m, err := in.Member.record()
	if err != nil {
		return 0, nil, err
	}
	lb, pl, err := d.poolOf(r, true)
	if err != nil {
		return 0, nil, err
	}
	defer d.octMu.Unlock()
	if duplicateMember(pl.Members, m) {
		return 0, nil, conflict("Another member on this pool is already using ip %s on protocol_port %d", m.Address, m.ProtocolPort)
	}
	pl.Members = append(pl.Members, m)
	if err := d.commit(r, lb, m.ID, statusPendingCreate); err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, map[string]any{"member": memberBody(lb, pl, &m, nil)}, nil
}

// batchMembers answers PUT /pools/{id}/members: the pool's members become
// the list (members with the same address and port keep their ID), or,
// with additive_only=true, the list is added.
func (d *Dialect) batchMembers(r *request) (int, any, error) {
	additive := false
	for k, vs := range r.URL.Query() {
		if k != "additive_only" {
			return 0, nil, badRequest("unexpected query parameter %s", k)
		}
		b, err := strconv.ParseBool(vs[0])
		if err != nil {
			return 0, nil, badRequest("additive_only: %q is not a boolean", vs[0])
		}
		additive = b
	}
	var in struct {
		Members []memberCreate `json:"members"`
	}
	if err := decodeBody(r, &in); err != nil {
		return 0, nil, err
	}
	var want []member
	for i := range in.Members {
		m, err := in.Members[i].record()
		if err != nil {
			return 0, nil, fmt.Errorf("members[%d]: %w", i, err)
		}
		if duplicateMember(want, m) {
			return 0, nil, badRequest("members[%d]: %s:%d is listed twice", i, m.Address, m.ProtocolPort)
		}
		want = append(want, m)
	}
	lb, pl, err := d.poolOf(r, true)
	if err != nil {
		return 0, nil, err
	}
	defer d.octMu.Unlock()
	for i, m := range want {
		for _, old := range pl.Members {
			if old.Address == m.Address && old.ProtocolPort == m.ProtocolPort {
				want[i].ID = old.ID
			}
		}
	}
	if additive {
		for _, old := range pl.Members {
			if !slices.ContainsFunc(want, func(m member) bool { return m.ID == old.ID }) {
				want = append(want, old)
			}
		}
	}
	pl.Members = want
	if err := d.commit(r, lb, pl.ID, statusPendingUpdate); err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, nil, nil
}

func (d *Dialect) updateMember(r *request) (int, any, error) {
	var in struct {
		Member struct {
			Name         *string   `json:"name"`
			Weight       *int      `json:"weight"`
			Tags         *[]string `json:"tags"`
			AdminStateUp *bool     `json:"admin_state_up"`
			Backup       *bool     `json:"backup"`
		} `json:"member"`
	}
	if err := decodeBody(r, &in); err != nil {
		return 0, nil, err
	}
	u := in.Member
	if err := checkCommon(u.AdminStateUp); err != nil {
		return 0, nil, err
	}
	if u.Backup != nil && *u.Backup {
		return 0, nil, badRequest("backup: backup members cannot be projected")
	}
	lb, pl, err := d.poolOf(r, true)
	if err != nil {
		return 0, nil, err
	}
	defer d.octMu.Unlock()
	i := slices.IndexFunc(pl.Members, func(m member) bool { return m.ID == r.PathValue("id") })
	if i < 0 {
		return 0, nil, notFound("Member %s could not be found.", r.PathValue("id"))
	}
	m := &pl.Members[i]
	setIf(&m.Name, u.Name)
	setIf(&m.Weight, u.Weight)
	setIf(&m.Tags, u.Tags)
	if err := validateMember(m); err != nil {
		return 0, nil, err
	}
	if err := d.commit(r, lb, m.ID, statusPendingUpdate); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"member": memberBody(lb, pl, m, nil)}, nil
}

func (d *Dialect) deleteMember(r *request) (int, any, error) {
	lb, pl, err := d.poolOf(r, true)
	if err != nil {
		return 0, nil, err
	}
	defer d.octMu.Unlock()
	n := len(pl.Members)
	pl.Members = slices.DeleteFunc(pl.Members, func(m member) bool { return m.ID == r.PathValue("id") })
	if len(pl.Members) == n {
		return 0, nil, notFound("Member %s could not be found.", r.PathValue("id"))
	}
	if err := d.commit(r, lb, "", ""); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}

// ---- health monitors

func hasMonitor(id string) func(*lbRecord) bool {
	return func(lb *lbRecord) bool { return lb.monitorPool(id) != nil }
}

func (lb *lbRecord) monitorPool(id string) *pool {
	for i := range lb.Pools {
		if m := lb.Pools[i].Monitor; m != nil && m.ID == id {
			return &lb.Pools[i]
		}
	}
	return nil
}

func (d *Dialect) createMonitor(r *request) (int, any, error) {
	var in struct {
		Monitor monitorCreate `json:"healthmonitor"`
	}
	if err := decodeBody(r, &in); err != nil {
		return 0, nil, err
	}
	m, err := in.Monitor.record()
	if err != nil {
		return 0, nil, err
	}
	pid := in.Monitor.PoolID
	if pid == "" {
		return 0, nil, badRequest("pool_id: a health monitor needs its pool")
	}
	lb, err := d.childLB(r, "Pool", pid, hasPool(pid))
	if err != nil {
		return 0, nil, err
	}
	defer d.octMu.Unlock()
	p := lb.pool(pid)
	if p.Monitor != nil {
		return 0, nil, conflict("Pool %s already has a health monitor", pid)
	}
	p.Monitor = &m
	if err := d.commit(r, lb, p.Monitor.ID, statusPendingCreate); err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, map[string]any{"healthmonitor": monitorBody(lb, p, p.Monitor)}, nil
}

func (d *Dialect) updateMonitor(r *request) (int, any, error) {
	var in struct {
		Monitor struct {
			Name           *string   `json:"name"`
			Delay          *int      `json:"delay"`
			Timeout        *int      `json:"timeout"`
			MaxRetries     *int      `json:"max_retries"`
			MaxRetriesDown *int      `json:"max_retries_down"`
			HTTPMethod     *string   `json:"http_method"`
			URLPath        *string   `json:"url_path"`
			ExpectedCodes  *string   `json:"expected_codes"`
			Tags           *[]string `json:"tags"`
			AdminStateUp   *bool     `json:"admin_state_up"`
		} `json:"healthmonitor"`
	}
	if err := decodeBody(r, &in); err != nil {
		return 0, nil, err
	}
	u := in.Monitor
	if err := checkCommon(u.AdminStateUp); err != nil {
		return 0, nil, err
	}
	id := r.PathValue("id")
	lb, err := d.childLB(r, "Health Monitor", id, hasMonitor(id))
	if err != nil {
		return 0, nil, err
	}
	defer d.octMu.Unlock()
	p := lb.monitorPool(id)
	m := p.Monitor
	setIf(&m.Name, u.Name)
	setIf(&m.Delay, u.Delay)
	setIf(&m.Timeout, u.Timeout)
	setIf(&m.MaxRetries, u.MaxRetries)
	setIf(&m.MaxRetriesDown, u.MaxRetriesDown)
	setIf(&m.HTTPMethod, u.HTTPMethod)
	setIf(&m.URLPath, u.URLPath)
	setIf(&m.ExpectedCodes, u.ExpectedCodes)
	setIf(&m.Tags, u.Tags)
	if err := validateMonitor(m); err != nil {
		return 0, nil, err
	}
	if err := d.commit(r, lb, m.ID, statusPendingUpdate); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]any{"healthmonitor": monitorBody(lb, p, m)}, nil
}

func (d *Dialect) deleteMonitor(r *request) (int, any, error) {
	id := r.PathValue("id")
	lb, err := d.childLB(r, "Health Monitor", id, hasMonitor(id))
	if err != nil {
		return 0, nil, err
	}
	defer d.octMu.Unlock()
	lb.monitorPool(id).Monitor = nil
	if err := d.commit(r, lb, "", ""); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
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
