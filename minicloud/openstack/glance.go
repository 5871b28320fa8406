package openstack

import (
	"net/http"
)

// Glance is served because the openstack command builds an image client for
// server list and show and fails without one in the catalog. minicloud has
// no images: the list is empty, servers show no image (as servers booted
// from a volume do) and every image is 404.

var imageSvc = &service{prefix: ImagePrefix, errorBody: imageError}

// imageError is Glance's JSON error body.
func imageError(status int, msg string) any {
	return map[string]any{"code": status, "title": http.StatusText(status), "message": msg}
}

func (d *Dialect) glanceRoutes() {
	d.handle(imageSvc, "GET /image/{$}", true, func(r *request) (int, any, error) {
		return http.StatusMultipleChoices, map[string]any{"versions": []any{map[string]any{
			"id": "v2.16", "status": "CURRENT", "links": []link{{Href: r.base + ImagePrefix + "/v2/", Rel: "self"}},
		}}}, nil
	})
	d.handle(imageSvc, "GET /image/v2/images", false, func(r *request) (int, any, error) {
		// Glance filters by any image property; with no images every
		// filter matches nothing, but a marker names an image that does
		// not exist.
		if m := r.URL.Query().Get("marker"); m != "" {
			return 0, nil, badRequest("Invalid marker %s. Image could not be found.", m)
		}
		return http.StatusOK, map[string]any{"images": []any{}, "first": "/v2/images", "schema": "/v2/schemas/images"}, nil
	})
	d.handle(imageSvc, "GET /image/v2/images/{id}", false, func(r *request) (int, any, error) {
		return 0, nil, notFound("No image found with ID %s", r.PathValue("id"))
	})
}
