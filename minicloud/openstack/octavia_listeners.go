package openstack

import (
	"net/http"
	"slices"
)

// The listeners of Octavia load balancers.

func (d *Dialect) listenerRoutes(b string) {
	d.handle(lbSvc, "GET "+b+"listeners", false, d.octaviaList("listeners", special{"loadbalancer_id": refFilter("loadbalancers")}, listenerObjects))
	d.handle(lbSvc, "POST "+b+"listeners", false, writeTree[listenerPost](http.StatusCreated))
	d.handle(lbSvc, "GET "+b+"listeners/{id}", false, d.octaviaGet("listener", listenerObjects))
	d.handle(lbSvc, "PUT "+b+"listeners/{id}", false, writeTree[listenerPut](http.StatusOK))
	d.handle(lbSvc, "DELETE "+b+"listeners/{id}", false, writeTree[listenerDelete](http.StatusNoContent))
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

// listenerPost is POST /listeners.
type listenerPost struct {
	Listener listenerCreate `json:"listener"`

	l  listener
	pc *poolCreate
}

func (w *listenerPost) check(*request) error {
	var err error
	if w.l, w.pc, err = w.Listener.record(); err != nil {
		return err
	}
	if w.Listener.LoadBalancerID == "" {
		return badRequest("loadbalancer_id: a listener needs its load balancer")
	}
	return nil
}

func (w *listenerPost) lock(r *request) (*lbRecord, error) {
	return r.d.lockLB(r, &lbRecord{ID: w.Listener.LoadBalancerID})
}

func (w *listenerPost) apply(r *request, lb *lbRecord) (written, error) {
	if err := addListener(lb, w.l, w.pc); err != nil {
		return written{}, err
	}
	return written{w.l.ID, statusPendingCreate, "listener", func() any { return listenerBody(lb, lb.listener(w.l.ID)) }}, nil
}

// listenerPut is PUT /listeners/{id}.
type listenerPut struct {
	atListener
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

func (w *listenerPut) check(*request) error {
	u := &w.Listener
	if err := checkCommon(u.AdminStateUp); err != nil {
		return err
	}
	if u.InsertHeaders != nil && len(*u.InsertHeaders) > 0 {
		return badRequest("insert_headers: only HTTP listeners insert headers")
	}
	return nil
}

func (w *listenerPut) apply(r *request, lb *lbRecord) (written, error) {
	u, id := &w.Listener, r.PathValue("id")
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
		if err := setDefaultPool(lb, l, *u.DefaultPoolID); err != nil {
			return written{}, err
		}
	}
	if err := validateListener(l); err != nil {
		return written{}, err
	}
	return written{id, statusPendingUpdate, "listener", func() any { return listenerBody(lb, lb.listener(id)) }}, nil
}

// setDefaultPool makes pool pid ("": none) the default pool of l, freeing
// the one it had.
func setDefaultPool(lb *lbRecord, l *listener, pid string) error {
	if old := lb.pool(l.DefaultPoolID); old != nil {
		old.ListenerID = ""
	}
	l.DefaultPoolID = ""
	if pid == "" {
		return nil
	}
	p := lb.pool(pid)
	switch {
	case p == nil:
		return notFound("Pool %s could not be found.", pid)
	case p.ListenerID != "":
		return conflict("Pool %s is already used by listener %s", p.ID, p.ListenerID)
	case p.Protocol != l.Protocol:
		return badRequest("default_pool_id: pool protocol %s does not match listener protocol %s", p.Protocol, l.Protocol)
	}
	p.ListenerID, l.DefaultPoolID = l.ID, p.ID
	return nil
}

// listenerDelete is DELETE /listeners/{id}.
type listenerDelete struct {
	noBody
	atListener
}

func (*listenerDelete) apply(r *request, lb *lbRecord) (written, error) {
	id := r.PathValue("id")
	for i := range lb.Pools {
		if lb.Pools[i].ListenerID == id {
			lb.Pools[i].ListenerID = ""
		}
	}
	lb.Listeners = slices.DeleteFunc(lb.Listeners, func(l listener) bool { return l.ID == id })
	return written{}, nil
}
