package openstack

import "net/http"

// The health monitors of Octavia pools.

func (d *Dialect) monitorRoutes(b string) {
	d.handle(lbSvc, "GET "+b+"healthmonitors", false, d.octaviaList("healthmonitors", special{"pool_id": refFilter("pools")}, monitorObjects))
	d.handle(lbSvc, "POST "+b+"healthmonitors", false, writeTree[monitorPost](http.StatusCreated))
	d.handle(lbSvc, "GET "+b+"healthmonitors/{id}", false, d.octaviaGet("healthmonitor", monitorObjects))
	d.handle(lbSvc, "PUT "+b+"healthmonitors/{id}", false, writeTree[monitorPut](http.StatusOK))
	d.handle(lbSvc, "DELETE "+b+"healthmonitors/{id}", false, writeTree[monitorDelete](http.StatusNoContent))
}

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

// monitorPost is POST /healthmonitors.
type monitorPost struct {
	Monitor monitorCreate `json:"healthmonitor"`

	m monitor
}

func (w *monitorPost) check(*request) error {
	var err error
	if w.m, err = w.Monitor.record(); err != nil {
		return err
	}
	if w.Monitor.PoolID == "" {
		return badRequest("pool_id: a health monitor needs its pool")
	}
	return nil
}

func (w *monitorPost) lock(r *request) (*lbRecord, error) { return lockPool(r, w.Monitor.PoolID) }

func (w *monitorPost) apply(r *request, lb *lbRecord) (written, error) {
	pid := w.Monitor.PoolID
	p := lb.pool(pid)
	if p.Monitor != nil {
		return written{}, conflict("Pool %s already has a health monitor", pid)
	}
	p.Monitor = &w.m
	return written{p.Monitor.ID, statusPendingCreate, "healthmonitor", func() any { return monitorBody(lb, p, p.Monitor) }}, nil
}

// monitorPut is PUT /healthmonitors/{id}.
type monitorPut struct {
	atMonitor
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

func (w *monitorPut) check(*request) error { return checkCommon(w.Monitor.AdminStateUp) }

func (w *monitorPut) apply(r *request, lb *lbRecord) (written, error) {
	u := &w.Monitor
	p := lb.monitorPool(r.PathValue("id"))
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
		return written{}, err
	}
	return written{m.ID, statusPendingUpdate, "healthmonitor", func() any { return monitorBody(lb, p, m) }}, nil
}

// monitorDelete is DELETE /healthmonitors/{id}.
type monitorDelete struct {
	noBody
	atMonitor
}

func (*monitorDelete) apply(r *request, lb *lbRecord) (written, error) {
	lb.monitorPool(r.PathValue("id")).Monitor = nil
	return written{}, nil
}
