// Package openstack is minicloud's OpenStack dialect: Keystone v3, Nova,
// Neutron and Octavia served on the minicloud listener under the path
// prefixes /identity, /compute, /network and /load-balancer (and a Glance
// without images under /image, which the openstack command needs), so that
// unmodified OpenStack clients (gophercloud, the upstream OpenStack cloud
// controller manager, the openstack command) manage minicloud's instances,
// load balancers and routes.
//
// The dialect keeps no second cloud: servers are minicloud instances,
// Octavia load balancers are projected onto one minicloud load balancer each
// (what cannot be projected is rejected with a 400 naming the field), extra
// routes of the one router are minicloud routes, and floating IPs are
// further addresses of a load balancer in minicloud's data plane. Every
// request is authenticated by a Keystone token bound to a minicloud token,
// then counted, rate limited and faulted by the minicloud server under its
// own operation name ("GET /compute/v2.1/servers/detail").
// docs/minicloud.md describes what is served.
package openstack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/store"
)

// Path prefixes of the services.
const (
	IdentityPrefix     = "/identity"
	ComputePrefix      = "/compute"
	NetworkPrefix      = "/network"
	LoadBalancerPrefix = "/load-balancer"
	ImagePrefix        = "/image"
	// OpsPrefix holds the dialect's operations endpoints (native bearer
	// authentication): forcing an Octavia provisioning status.
	OpsPrefix = "/v1/_openstack"
)

// Names of the one project and domain the dialect serves.
const (
	ProjectName = "minicloud"
	DomainID    = "default"
	DomainName  = "Default"
)

// maxBody bounds request bodies (the oslo default is 112 KiB; member
// batches of big clusters need more).
const maxBody = 1 << 20

// Options tune the dialect. The zero value is usable.
type Options struct {
	// TokenTTL is how long a Keystone token is valid (default 1h).
	TokenTTL time.Duration
	// MaxPageSize is the largest page a list returns (Nova's max_limit,
	// Neutron's and Octavia's pagination_max_limit; default 1000). A small
	// value forces clients to follow next links.
	MaxPageSize int
	// PendingDelay is how long an Octavia load balancer stays
	// PENDING_UPDATE after a write and PENDING_DELETE after a delete
	// (PENDING_CREATE lasts until minicloud's load balancer is active).
	PendingDelay time.Duration
	// Now is the dialect's clock for token expiry and the pending delays
	// (default time.Now); tests move it instead of waiting.
	Now func() time.Time
	// HiddenExtensions are Neutron extension aliases not listed and not
	// served, as on a cloud that lacks them: "extraroute-atomic" (then
	// add_extraroutes and remove_extraroutes answer 404, and clients
	// update the whole list of routes) or "allowed-address-pairs" (then a
	// port's allowed_address_pairs cannot be written).
	HiddenExtensions []string
}

// Dialect serves the OpenStack APIs of one minicloud server.
type Dialect struct {
	srv  *minicloud.Server
	st   *store.Store
	opts Options
	log  logr.Logger
	mux  *http.ServeMux
	now  func() time.Time

	tokMu  sync.Mutex
	tokens map[string]*token

	natMu  sync.Mutex
	native map[string]*client.Client

	// octMu serializes Octavia and floating-IP writes: each one reads the
	// tree, projects it and writes minicloud and the dialect's records.
	octMu sync.Mutex
}

// Mount serves the OpenStack dialect on srv (call it before srv.Serve) and
// restores the floating IPs' addresses in the data plane.
func Mount(srv *minicloud.Server, opts Options) (*Dialect, error) {
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = time.Hour
	}
	if opts.MaxPageSize <= 0 {
		opts.MaxPageSize = 1000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PendingDelay < 0 {
		return nil, errors.New("openstack dialect: pending delay must not be negative")
	}
	d := &Dialect{
		srv: srv, st: srv.Store(), opts: opts, log: srv.Config().Logger.WithName("openstack"),
		mux: http.NewServeMux(), now: opts.Now,
		tokens: map[string]*token{}, native: map[string]*client.Client{},
	}
	for _, x := range opts.HiddenExtensions {
		if !slices.ContainsFunc(extensions, func(e extension) bool { return e.alias == x }) {
			return nil, fmt.Errorf("openstack dialect: hidden extension %q: not an extension the dialect serves", x)
		}
	}
	if err := d.st.EnsureKinds(kindLoadBalancers, kindFloatingIPs, kindPorts); err != nil {
		return nil, fmt.Errorf("openstack dialect: %w", err)
	}
	d.routes()
	for _, p := range []string{IdentityPrefix, ComputePrefix, NetworkPrefix, LoadBalancerPrefix, ImagePrefix, OpsPrefix} {
		srv.Mount(p+"/", d.mux)
	}
	if err := d.restoreAliases(); err != nil {
		return nil, fmt.Errorf("openstack dialect: restore floating IPs: %w", err)
	}
	return d, nil
}

// service is one OpenStack service: its prefix and error body format.
type service struct {
	prefix string
	// errorBody is the body of an error answer in the service's format.
	errorBody func(status int, msg string) any
}

// osError is an error answered with a status in the service's format.
type osError struct {
	status     int
	msg        string
	retryAfter time.Duration
}

func (e *osError) Error() string { return fmt.Sprintf("%d: %s", e.status, e.msg) }

func errf(status int, format string, args ...any) error {
	return &osError{status: status, msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return errf(http.StatusBadRequest, format, args...)
}
func notFound(format string, args ...any) error { return errf(http.StatusNotFound, format, args...) }
func conflict(format string, args ...any) error { return errf(http.StatusConflict, format, args...) }

// request is one admitted request.
type request struct {
	*http.Request
	d *Dialect
	// tok is the caller's Keystone token (nil for unauthenticated calls).
	tok *token
	// mc is the native API acting for the caller's minicloud token.
	mc *client.Client
	// base is the URL of the listener as the client addressed it.
	base string
	// header holds response headers to add (microversions).
	header http.Header
}

// handler answers a request: status and JSON body (nil for none).
type handler func(r *request) (int, any, error)

// handle registers op ("GET /compute/v2.1/servers/{id}") for svc; public
// operations need no token and are not counted (version documents).
func (d *Dialect) handle(svc *service, op string, public bool, h handler) {
	if !public {
		d.srv.RegisterOperations(op)
	}
	d.mux.HandleFunc(op, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		req := &request{Request: r, d: d, base: baseURL(r), header: http.Header{}}
		status, body, err := 0, any(nil), error(nil)
		if !public {
			err = d.admit(req, op)
		}
		if err == nil {
			status, body, err = h(req)
		}
		for k, v := range req.header {
			w.Header()[k] = v
		}
		if err != nil {
			status = d.writeError(w, req, svc, op, err)
		} else {
			writeJSON(w, status, body)
		}
		d.log.V(1).Info("request", "operation", op, "path", r.URL.Path, "status", status, "duration", time.Since(start))
	})
}

// admit authenticates r by its X-Auth-Token and has minicloud count, rate
// limit and fault it.
func (d *Dialect) admit(r *request, op string) error {
	tok := d.lookupToken(r.Header.Get("X-Auth-Token"))
	if tok == nil {
		return errf(http.StatusUnauthorized, "The request you have made requires authentication.")
	}
	r.tok = tok
	r.mc = d.nativeClient(tok.minicloud)
	return d.admitToken(r.Context(), op, tok.minicloud)
}

func (d *Dialect) admitToken(ctx context.Context, op, mcToken string) error {
	err := d.srv.Admit(ctx, op, mcToken)
	var rej *minicloud.Rejection
	if errors.As(err, &rej) {
		return &osError{status: rej.Status, msg: rej.Message, retryAfter: rej.RetryAfter}
	}
	return err
}

// writeError answers err in svc's format and returns the status.
func (d *Dialect) writeError(w http.ResponseWriter, r *request, svc *service, op string, err error) int {
	var oe *osError
	var ce *client.Error
	switch {
	case errors.As(err, &oe):
	case errors.As(err, &ce):
		// A native call failed: its status and message say why.
		oe = &osError{status: ce.StatusCode, msg: ce.Message, retryAfter: ce.RetryAfter}
	default:
		d.log.Error(err, "request failed", "operation", op)
		oe = &osError{status: http.StatusInternalServerError, msg: "internal error"}
	}
	switch oe.status {
	case http.StatusTooManyRequests:
		secs := int(math.Ceil(oe.retryAfter.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(max(1, secs)))
	case http.StatusUnauthorized:
		// keystonemiddleware answers every service's 401 in Keystone's
		// format and names the identity service.
		w.Header().Set("WWW-Authenticate", `Keystone uri="`+r.base+IdentityPrefix+`"`)
		writeJSON(w, oe.status, identityError(oe.status, oe.msg))
		return oe.status
	}
	writeJSON(w, oe.status, svc.errorBody(oe.status, oe.msg))
	return oe.status
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	if body == nil {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

// baseURL is the scheme and host the client used, so that catalog entries
// and next links point back at the address it reached.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// decodeBody reads and strictly decodes a JSON request body: unknown
// fields, wrong types, trailing data and bodies over maxBody are rejected
// (413 for the size, as the services' request-size middleware answers).
func decodeBody(r *request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return badRequest("read request body: %v", err)
	}
	if len(body) > maxBody {
		return errf(http.StatusRequestEntityTooLarge, "Request is too large: more than %d bytes.", maxBody)
	}
	return decodeStrict(body, v)
}

// decodeStrict decodes exactly one JSON object from body into v.
func decodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("The request body is empty.")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("Invalid request body: data after the JSON object.")
	}
	return nil
}

// bodyError says what is wrong with a body in the API's terms (the
// attribute and the type it takes), never in the decoder's (Go types and
// struct fields).
func bodyError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return badRequest("Invalid request body: a JSON object is required, not a %s.", te.Value)
		}
		return badRequest("Invalid input for field/attribute %s: expected %s, got a JSON %s.", field, jsonKind(te.Type), te.Value)
	case errors.As(err, &se):
		return badRequest("Malformed JSON in request body at offset %d: %s.", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("Malformed JSON in request body: it ends before the value is complete.")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("Unrecognized attribute(s) %s.", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return badRequest("Malformed JSON in request body.")
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another type"
}

// nativeClient returns a client of the native API acting for mcToken
// in-process: no socket, no second count or rate limit.
func (d *Dialect) nativeClient(mcToken string) *client.Client {
	d.natMu.Lock()
	defer d.natMu.Unlock()
	c := d.native[mcToken]
	if c == nil {
		hc := &http.Client{Transport: handlerTransport{d.srv.Native(mcToken)}}
		var err error
		c, err = client.New("http://minicloud.internal", mcToken, client.WithHTTPClient(hc))
		if err != nil {
			// The URL is a constant; New cannot fail on it.
			panic(err)
		}
		d.native[mcToken] = c
	}
	return c
}

// handlerTransport sends requests to a handler in-process.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// uuidOf derives a stable UUID-shaped ID for a synthesized resource (a
// port, a network) from what it stands for.
func uuidOf(kind, key string) string {
	h := sha256.Sum256([]byte(kind + "\x00" + key))
	x := hex.EncodeToString(h[:16])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// hexOf derives a Keystone-style ID (32 hex digits).
func hexOf(kind, key string) string {
	h := sha256.Sum256([]byte(kind + "\x00" + key))
	return hex.EncodeToString(h[:16])
}

// ---- paging

// pageParams are limit, marker and page_reverse of a list request.
type pageParams struct {
	limit   int
	marker  string
	reverse bool
}

// parsePage takes the paging parameters out of q.
func (d *Dialect) parsePage(q url.Values) (pageParams, error) {
	p := pageParams{limit: d.opts.MaxPageSize}
	if vs, ok := q["limit"]; ok {
		n, err := strconv.Atoi(vs[0])
		if err != nil || n < 0 || len(vs) > 1 {
			return p, badRequest("limit must be one non-negative integer, not %q", strings.Join(vs, ","))
		}
		if n > 0 && n < p.limit {
			p.limit = n
		}
		delete(q, "limit")
	}
	if vs, ok := q["marker"]; ok {
		if len(vs) > 1 || vs[0] == "" {
			return p, badRequest("marker must be one ID")
		}
		p.marker = vs[0]
		delete(q, "marker")
	}
	if vs, ok := q["page_reverse"]; ok {
		b, err := strconv.ParseBool(vs[0])
		if err != nil || len(vs) > 1 {
			return p, badRequest("page_reverse must be true or false")
		}
		p.reverse = b
		delete(q, "page_reverse")
	}
	return p, nil
}

// paginate returns the page of items after p.marker (items in order, each
// with the ID id returns) and whether more follow; markerErr answers a
// marker that is not in items.
func paginate[T any](items []T, id func(T) string, p pageParams, markerErr func(string) error) ([]T, bool, error) {
	if p.reverse {
		rev := make([]T, len(items))
		for i, it := range items {
			rev[len(items)-1-i] = it
		}
		items = rev
	}
	if p.marker != "" {
		found := -1
		for i, it := range items {
			if id(it) == p.marker {
				found = i
				break
			}
		}
		if found < 0 {
			return nil, false, markerErr(p.marker)
		}
		items = items[found+1:]
	}
	if len(items) > p.limit {
		return items[:p.limit], true, nil
	}
	return items, false, nil
}

// link is an entry of a *_links list.
type link struct {
	Href string `json:"href"`
	Rel  string `json:"rel"`
}

// nextLinks returns the rel=next link of a page ending in lastID, keeping
// the request's filters, or an empty list on the last page.
func nextLinks(r *request, more bool, lastID string, limit int) []link {
	if !more {
		return []link{}
	}
	q := r.URL.Query()
	q.Set("limit", strconv.Itoa(limit))
	q.Set("marker", lastID)
	return []link{{Href: r.base + r.URL.Path + "?" + q.Encode(), Rel: "next"}}
}

// timeString formats a timestamp as the services do (UTC, no zone).
func timeString(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05") }
