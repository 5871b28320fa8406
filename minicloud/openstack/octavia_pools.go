package openstack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
)

// The pools of Octavia load balancers and their members.

func (d *Dialect) poolRoutes(b string) {
	d.handle(lbSvc, "GET "+b+"pools", false, d.octaviaList("pools", special{"loadbalancer_id": refFilter("loadbalancers"), "listener_id": refFilter("listeners")}, poolObjects))
	d.handle(lbSvc, "POST "+b+"pools", false, writeTree[poolPost](http.StatusCreated))
	d.handle(lbSvc, "GET "+b+"pools/{id}", false, d.octaviaGet("pool", poolObjects))
	d.handle(lbSvc, "PUT "+b+"pools/{id}", false, writeTree[poolPut](http.StatusOK))
	d.handle(lbSvc, "DELETE "+b+"pools/{id}", false, writeTree[poolDelete](http.StatusNoContent))

	d.handle(lbSvc, "GET "+b+"pools/{pool}/members", false, d.listMembers)
	d.handle(lbSvc, "POST "+b+"pools/{pool}/members", false, writeTree[memberPost](http.StatusCreated))
	d.handle(lbSvc, "PUT "+b+"pools/{pool}/members", false, writeTree[membersPut](http.StatusAccepted))
	d.handle(lbSvc, "GET "+b+"pools/{pool}/members/{id}", false, d.getMember)
	d.handle(lbSvc, "PUT "+b+"pools/{pool}/members/{id}", false, writeTree[memberPut](http.StatusOK))
	d.handle(lbSvc, "DELETE "+b+"pools/{pool}/members/{id}", false, writeTree[memberDelete](http.StatusNoContent))
}

func hasPool(id string) func(*lbRecord) bool {
	return func(lb *lbRecord) bool { return lb.pool(id) != nil }
}

// lockPool locks the load balancer of pool id.
func lockPool(r *request, id string) (*lbRecord, error) {
	return r.d.childLB(r, "Pool", id, hasPool(id))
}

// poolPost is POST /pools.
type poolPost struct {
	Pool poolCreate `json:"pool"`
}

func (w *poolPost) check(*request) error {
	if w.Pool.ListenerID == "" && w.Pool.LoadBalancerID == "" {
		return badRequest("loadbalancer_id: a pool needs loadbalancer_id or listener_id")
	}
	return nil
}

func (w *poolPost) lock(r *request) (*lbRecord, error) {
	if c := &w.Pool; c.ListenerID != "" {
		return r.d.childLB(r, "Listener", c.ListenerID, hasListener(c.ListenerID))
	}
	return r.d.lockLB(r, &lbRecord{ID: w.Pool.LoadBalancerID})
}

func (w *poolPost) apply(r *request, lb *lbRecord) (written, error) {
	c := &w.Pool
	if c.LoadBalancerID != "" && c.LoadBalancerID != lb.ID {
		return written{}, badRequest("loadbalancer_id: listener %s belongs to load balancer %s", c.ListenerID, lb.ID)
	}
	proto := ""
	var l *listener
	if c.ListenerID != "" {
		l = lb.listener(c.ListenerID)
		if l.DefaultPoolID != "" {
			return written{}, conflict("Listener %s already has default pool %s", l.ID, l.DefaultPoolID)
		}
		proto = l.Protocol
	}
	p, err := c.record(proto)
	if err != nil {
		return written{}, err
	}
	p.CreatedAt = nowUTC()
	if l != nil {
		p.ListenerID, l.DefaultPoolID = l.ID, p.ID
	}
	lb.Pools = append(lb.Pools, p)
	return written{p.ID, statusPendingCreate, "pool", func() any { return poolBody(lb, lb.pool(p.ID)) }}, nil
}

// poolPut is PUT /pools/{id}.
type poolPut struct {
	atPool
	Pool struct {
		Name               *string         `json:"name"`
		Description        *string         `json:"description"`
		LBAlgorithm        *string         `json:"lb_algorithm"`
		Tags               *[]string       `json:"tags"`
		AdminStateUp       *bool           `json:"admin_state_up"`
		SessionPersistence json.RawMessage `json:"session_persistence"`
	} `json:"pool"`
}

func (w *poolPut) check(*request) error {
	u := &w.Pool
	if err := checkCommon(u.AdminStateUp); err != nil {
		return err
	}
	if len(u.SessionPersistence) > 0 && string(u.SessionPersistence) != "null" {
		return badRequest("session_persistence: cannot be projected; minicloud balances round-robin")
	}
	return nil
}

func (w *poolPut) apply(r *request, lb *lbRecord) (written, error) {
	u, id := &w.Pool, r.PathValue("id")
	p := lb.pool(id)
	setIf(&p.Name, u.Name)
	setIf(&p.Description, u.Description)
	setIf(&p.LBAlgorithm, u.LBAlgorithm)
	setIf(&p.Tags, u.Tags)
	if err := validatePool(p, ""); err != nil {
		return written{}, err
	}
	return written{id, statusPendingUpdate, "pool", func() any { return poolBody(lb, lb.pool(id)) }}, nil
}

// poolDelete is DELETE /pools/{id}.
type poolDelete struct {
	noBody
	atPool
}

func (*poolDelete) apply(r *request, lb *lbRecord) (written, error) {
	id := r.PathValue("id")
	for i := range lb.Listeners {
		if lb.Listeners[i].DefaultPoolID == id {
			lb.Listeners[i].DefaultPoolID = ""
		}
	}
	lb.Pools = slices.DeleteFunc(lb.Pools, func(p pool) bool { return p.ID == id })
	return written{}, nil
}

// ---- members

// poolOf finds the load balancer and pool of the path's {pool}.
func (d *Dialect) poolOf(r *request) (*lbRecord, *pool, error) {
	pid := r.PathValue("pool")
	lb, err := d.findChild(r, "Pool", pid, hasPool(pid))
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
	lb, pl, err := d.poolOf(r)
	if err != nil {
		return 0, nil, err
	}
	health := memberHealth(r, lb)
	var all []object
	for i := range pl.Members {
		all = append(all, toObject(memberBody(lb, pl, &pl.Members[i], health)))
	}
	return listAnswer(r, "members", all, q, nil, p, octaviaAttrErr, octaviaMarkerErr)
}

func (d *Dialect) getMember(r *request) (int, any, error) {
	lb, pl, err := d.poolOf(r)
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

// memberPost is POST /pools/{pool}/members.
type memberPost struct {
	atMembers
	Member memberCreate `json:"member"`

	m member
}

func (w *memberPost) check(*request) error {
	var err error
	w.m, err = w.Member.record()
	return err
}

func (w *memberPost) apply(r *request, lb *lbRecord) (written, error) {
	pl, m := lb.pool(r.PathValue("pool")), w.m
	if duplicateMember(pl.Members, m) {
		return written{}, conflict("Another member on this pool is already using ip %s on protocol_port %d", m.Address, m.ProtocolPort)
	}
	pl.Members = append(pl.Members, m)
	return written{m.ID, statusPendingCreate, "member", func() any { return memberBody(lb, pl, &m, nil) }}, nil
}

// membersPut is PUT /pools/{pool}/members: the pool's members become the
// list (members with the same address and port keep their ID), or, with
// additive_only=true, the list is added.
type membersPut struct {
	atMembers
	Members []memberCreate `json:"members"`

	additive bool
	want     []member
}

func (w *membersPut) query(q url.Values) error {
	var err error
	w.additive, err = boolQuery(q, "additive_only")
	return err
}

func (w *membersPut) check(*request) error {
	for i := range w.Members {
		m, err := w.Members[i].record()
		if err != nil {
			return fmt.Errorf("members[%d]: %w", i, err)
		}
		if duplicateMember(w.want, m) {
			return badRequest("members[%d]: %s:%d is listed twice", i, m.Address, m.ProtocolPort)
		}
		w.want = append(w.want, m)
	}
	return nil
}

func (w *membersPut) apply(r *request, lb *lbRecord) (written, error) {
	pl, want := lb.pool(r.PathValue("pool")), w.want
	for i, m := range want {
		for _, old := range pl.Members {
			if old.Address == m.Address && old.ProtocolPort == m.ProtocolPort {
				want[i].ID = old.ID
			}
		}
	}
	if w.additive {
		for _, old := range pl.Members {
			if !slices.ContainsFunc(want, func(m member) bool { return m.ID == old.ID }) {
				want = append(want, old)
			}
		}
	}
	pl.Members = want
	return written{child: pl.ID, status: statusPendingUpdate}, nil
}

// memberPut is PUT /pools/{pool}/members/{id}.
type memberPut struct {
	atMembers
	Member struct {
		Name         *string   `json:"name"`
		Weight       *int      `json:"weight"`
		Tags         *[]string `json:"tags"`
		AdminStateUp *bool     `json:"admin_state_up"`
		Backup       *bool     `json:"backup"`
	} `json:"member"`
}

func (w *memberPut) check(*request) error {
	u := &w.Member
	if err := checkCommon(u.AdminStateUp); err != nil {
		return err
	}
	if u.Backup != nil && *u.Backup {
		return badRequest("backup: backup members cannot be projected")
	}
	return nil
}

func (w *memberPut) apply(r *request, lb *lbRecord) (written, error) {
	u, pl := &w.Member, lb.pool(r.PathValue("pool"))
	i := slices.IndexFunc(pl.Members, func(m member) bool { return m.ID == r.PathValue("id") })
	if i < 0 {
		return written{}, notFound("Member %s could not be found.", r.PathValue("id"))
	}
	m := &pl.Members[i]
	setIf(&m.Name, u.Name)
	setIf(&m.Weight, u.Weight)
	setIf(&m.Tags, u.Tags)
	if err := validateMember(m); err != nil {
		return written{}, err
	}
	return written{m.ID, statusPendingUpdate, "member", func() any { return memberBody(lb, pl, m, nil) }}, nil
}

// memberDelete is DELETE /pools/{pool}/members/{id}.
type memberDelete struct {
	noBody
	atMembers
}

func (*memberDelete) apply(r *request, lb *lbRecord) (written, error) {
	pl := lb.pool(r.PathValue("pool"))
	n := len(pl.Members)
	pl.Members = slices.DeleteFunc(pl.Members, func(m member) bool { return m.ID == r.PathValue("id") })
	if len(pl.Members) == n {
		return written{}, notFound("Member %s could not be found.", r.PathValue("id"))
	}
	return written{}, nil
}
