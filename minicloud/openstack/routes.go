package openstack

import (
	"net/http"
	"strings"
)

// routes registers every service and, per prefix, a fallback answering
// 405 (with Allow) or 404 in the service's error format.
func (d *Dialect) routes() {
	d.keystoneRoutes()
	d.novaRoutes()
	d.neutronRoutes()
	d.octaviaRoutes()
	d.glanceRoutes()
	for _, svc := range []*service{identitySvc, computeSvc, networkSvc, lbSvc, imageSvc} {
		fallback := svc.prefix + "/"
		d.mux.HandleFunc(fallback, func(w http.ResponseWriter, hr *http.Request) {
			r := &request{Request: hr, d: d, base: baseURL(hr), header: http.Header{}}
			var allow []string
			for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
				probe := *hr
				probe.Method = m
				if _, pattern := d.mux.Handler(&probe); pattern != fallback && pattern != "" {
					allow = append(allow, m)
				}
			}
			if len(allow) > 0 {
				w.Header().Set("Allow", strings.Join(allow, ", "))
				d.writeError(w, r, svc, "", errf(http.StatusMethodNotAllowed, "The method %s is not allowed for %s.", hr.Method, hr.URL.Path))
				return
			}
			d.writeError(w, r, svc, "", notFound("The resource %s could not be found.", hr.URL.Path))
		})
	}
}
