package openstack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
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
	if pid := l.DefaultPoolID; pid != "" {
		l.DefaultPoolID = ""
		if err := setDefaultPool(lb, &l, pid); err != nil {
			return err
		}
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
		d.loadBalancerRoutes(b)
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
		d.listenerRoutes(b)
		d.poolRoutes(b)
		d.monitorRoutes(b)
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

// childObjects is the objectsFunc of a kind of child: the object body
// makes of each child that children lists, in each load balancer; body
// leaves a child out by returning nil.
func childObjects[T any](children func(*lbRecord) []T, body func(*lbRecord, *T) map[string]any) objectsFunc {
	return func(d *Dialect, r *request, lbs []lbRecord) ([]object, error) {
		var out []object
		for i := range lbs {
			cs := children(&lbs[i])
			for j := range cs {
				if b := body(&lbs[i], &cs[j]); b != nil {
					out = append(out, toObject(b))
				}
			}
		}
		return out, nil
	}
}

var (
	listenerObjects = childObjects(func(lb *lbRecord) []listener { return lb.Listeners }, listenerBody)
	poolObjects     = childObjects(func(lb *lbRecord) []pool { return lb.Pools }, poolBody)
	monitorObjects  = childObjects(func(lb *lbRecord) []pool { return lb.Pools }, func(lb *lbRecord, p *pool) map[string]any {
		if p.Monitor == nil {
			return nil
		}
		return monitorBody(lb, p, p.Monitor)
	})
)

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
		return listAnswer(r, coll, nil, q, nil, p, octaviaAttrErr, octaviaMarkerErr)
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

func octaviaMarkerErr(m string) error {
	return badRequest("Invalid marker: %s is not in this collection", m)
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
		return listAnswer(r, coll, all, q, sp, p, octaviaAttrErr, octaviaMarkerErr)
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

// ---- writes

// treeWrite is a write to a load balancer's tree (its listeners, pools,
// members, monitors), as the request that asks for it: its body decoded
// into the type, unless the type embeds noBody.
type treeWrite interface {
	// check refuses what is wrong with the request alone, before any lock.
	check(r *request) error
	// lock finds the load balancer written and locks it (lockLB, childLB):
	// octMu stays held until the answer.
	lock(r *request) (*lbRecord, error)
	// apply changes the locked tree and says what it wrote.
	apply(r *request, lb *lbRecord) (written, error)
}

// written is what a treeWrite changed: the child written and its status
// while pending (both "" for a delete), and the answer's body, {key:
// body()}, built once the tree is committed (no body when body is nil).
type written struct {
	child, status string
	key           string
	body          func() any
}

// noBody, embedded in a treeWrite, says that its request has no body and
// nothing to check before the lock.
type noBody struct{}

func (noBody) hasNoBody()           {}
func (noBody) check(*request) error { return nil }

// The load balancer a treeWrite locks, by the child the path names: one
// of these is embedded in each treeWrite that has no lock of its own.
type (
	atLB       struct{} // {id}: a load balancer
	atListener struct{} // {id}: a listener
	atPool     struct{} // {id}: a pool
	atMembers  struct{} // {pool}: the pool of the members
	atMonitor  struct{} // {id}: a health monitor
)

func (atLB) lock(r *request) (*lbRecord, error) {
	return r.d.lockLB(r, &lbRecord{ID: r.PathValue("id")})
}

func (atListener) lock(r *request) (*lbRecord, error) {
	id := r.PathValue("id")
	return r.d.childLB(r, "Listener", id, hasListener(id))
}

func (atPool) lock(r *request) (*lbRecord, error) { return lockPool(r, r.PathValue("id")) }

func (atMembers) lock(r *request) (*lbRecord, error) { return lockPool(r, r.PathValue("pool")) }

func (atMonitor) lock(r *request) (*lbRecord, error) {
	id := r.PathValue("id")
	return r.d.childLB(r, "Health Monitor", id, hasMonitor(id))
}

// queried is a treeWrite that reads query parameters, before its body.
type queried interface {
	query(q url.Values) error
}

// writeTree is the handler of every write to a load balancer's tree: the
// request (In) is read and checked, the load balancer locked, the change
// applied and committed, and the answer sent with status.
func writeTree[In any, W interface {
	*In
	treeWrite
}](status int) handler {
	return func(r *request) (int, any, error) {
		w := W(new(In))
		if q, ok := any(w).(queried); ok {
			if err := q.query(r.URL.Query()); err != nil {
				return 0, nil, err
			}
		}
		if _, none := any(w).(interface{ hasNoBody() }); !none {
			if err := decodeBody(r, w); err != nil {
				return 0, nil, err
			}
		}
		if err := w.check(r); err != nil {
			return 0, nil, err
		}
		lb, err := w.lock(r)
		if err != nil {
			return 0, nil, err
		}
		defer r.d.octMu.Unlock()
		done, err := w.apply(r, lb)
		if err != nil {
			return 0, nil, err
		}
		if err := r.d.commit(r, lb, done.child, done.status); err != nil {
			return 0, nil, err
		}
		if done.body == nil {
			return status, nil, nil
		}
		return status, map[string]any{done.key: done.body()}, nil
	}
}

// boolQuery reads the query of a request that takes one boolean parameter,
// name (false when absent).
func boolQuery(q url.Values, name string) (bool, error) {
	v := false
	for k, vs := range q {
		if k != name {
			return false, badRequest("unexpected query parameter %s", k)
		}
		b, err := strconv.ParseBool(vs[0])
		if err != nil {
			return false, badRequest("%s: %q is not a boolean", name, vs[0])
		}
		v = b
	}
	return v, nil
}
