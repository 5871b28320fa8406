package minicloud

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/stratus-ccm/stratus/minicloud/api"
)

// maxBody bounds request bodies: a load balancer with tens of thousands of
// targets still fits.
const maxBody = 8 << 20

// maxIdempotencyKey bounds Idempotency-Key headers.
const maxIdempotencyKey = 255

// Paging limits.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

func writeJSON(w http.ResponseWriter, status int, body any) {
	if body == nil {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

func writeError(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{status: http.StatusInternalServerError, code: api.CodeInternal, msg: "internal error"}
	}
	if ae.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", retryAfterSeconds(ae.retryAfter))
	}
	writeJSON(w, ae.status, api.ErrorBody{Error: api.ErrorDetail{Code: ae.code, Message: ae.msg}})
}

// readBody reads a request body, bounded by maxBody.
func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, errInvalid("read request body: %v", err)
	}
	if len(body) > maxBody {
		return nil, errInvalid("request body larger than %d bytes", maxBody)
	}
	return body, nil
}

// decodeStrict decodes exactly one JSON object from body into v, rejecting
// unknown fields and trailing data.
func decodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return errInvalid("request body is empty")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errInvalid("invalid request body: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errInvalid("invalid request body: data after the JSON object")
	}
	return nil
}

// decodeRequest reads, strictly decodes and validates a request body; it
// also returns the raw body (for idempotency checks).
func decodeRequest[T any](r *http.Request, validate func(*T) error) (T, []byte, error) {
	var v T
	body, err := readBody(r)
	if err != nil {
		return v, nil, err
	}
	if err := decodeStrict(body, &v); err != nil {
		return v, nil, err
	}
	return v, body, validate(&v)
}

// listQuery is the parsed query of a list request.
type listQuery struct {
	pageSize int
	after    string // ID the page starts after
	name     string
	tags     []tagFilter
}

type tagFilter struct {
	key, value string
	anyValue   bool // "tag=key": the key exists
}

func (q listQuery) matchTags(tags map[string]string) bool {
	for _, f := range q.tags {
		v, ok := tags[f.key]
		if !ok || (!f.anyValue && v != f.value) {
			return false
		}
	}
	return true
}

// parseListQuery parses page_size, page_token, name (when named) and tag;
// other parameters are rejected. idPrefix checks that a page token belongs
// to this collection.
func parseListQuery(v url.Values, idPrefix string, named bool) (listQuery, error) {
	q := listQuery{pageSize: defaultPageSize}
	for k, vals := range v {
		switch k {
		case "page_size":
			n, err := strconv.Atoi(vals[0])
			if err != nil || n < 1 || n > maxPageSize || len(vals) > 1 {
				return q, errInvalid("page_size must be one integer from 1 to %d", maxPageSize)
			}
			q.pageSize = n
		case "page_token":
			raw, err := base64.RawURLEncoding.DecodeString(vals[0])
			if err != nil || !strings.HasPrefix(string(raw), idPrefix) || len(vals) > 1 {
				return q, errInvalid("invalid page_token")
			}
			q.after = string(raw)
		case "name":
			if !named {
				return q, errInvalid("this collection cannot be filtered by name")
			}
			q.name = vals[0]
		case "tag":
			for _, t := range vals {
				key, value, hasValue := strings.Cut(t, "=")
				if key == "" {
					return q, errInvalid("tag filter %q: want key=value or key", t)
				}
				q.tags = append(q.tags, tagFilter{key: key, value: value, anyValue: !hasValue})
			}
		default:
			return q, errInvalid("unknown query parameter %q", k)
		}
	}
	return q, nil
}

func pageToken(lastID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(lastID))
}

// page builds a list response from items whose last ID is lastID.
func page[T any](items []T, more bool, lastID func(T) string) api.List[T] {
	out := api.List[T]{Items: items}
	if out.Items == nil {
		out.Items = []T{}
	}
	if more && len(items) > 0 {
		out.NextPageToken = pageToken(lastID(items[len(items)-1]))
	}
	return out
}

// validateTags enforces the tag limits (api.MaxTags and friends), so that no
// resource makes every listing that carries it large.
func validateTags(tags map[string]string) error {
	if len(tags) > api.MaxTags {
		return errInvalid("%d tags: at most %d tags per resource", len(tags), api.MaxTags)
	}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if k == "" || len(k) > api.MaxTagKeyLen || strings.ContainsAny(k, "=&") {
			return errInvalid("tag key %q: must be 1-%d bytes without '=' or '&'", k, api.MaxTagKeyLen)
		}
		if len(tags[k]) > api.MaxTagValueLen {
			return errInvalid("tag %q: value of %d bytes, at most %d", k, len(tags[k]), api.MaxTagValueLen)
		}
	}
	return nil
}

// validateName accepts names like Kubernetes node and object names.
func validateName(kind, name string) error {
	if name == "" || len(name) > 253 {
		return errInvalid("%s name must be 1-253 characters", kind)
	}
	for i, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || (i > 0 && (c == '-' || c == '.' || c == '_'))
		if !ok {
			return errInvalid("%s name %q: use letters, digits, '-', '.', '_', starting with a letter or digit", kind, name)
		}
	}
	return nil
}

func validatePort(what string, p int) error {
	if p < 1 || p > 65535 {
		return errInvalid("%s %d out of range 1-65535", what, p)
	}
	return nil
}

func pathID(r *http.Request, prefix, kind string) (string, error) {
	id := r.PathValue("id")
	if !strings.HasPrefix(id, prefix) {
		return "", errNotFound("%s %q not found", kind, id)
	}
	return id, nil
}

// serveHTTP authenticates every request before anything else looks at it,
// so an unauthenticated client only ever gets a JSON 401 and learns nothing
// about the API. Unclean paths are refused rather than redirected the way
// http.ServeMux would (with an HTML body).
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		// A write may have changed a route or an instance's state.
		defer s.notifyRoutes()
	}
	if h := s.mounted(r.URL.Path); h != nil {
		h.ServeHTTP(w, r)
		return
	}
	token, ok := s.authenticate(r)
	if !ok {
		writeUnauthorized(w)
		return
	}
	if c := cleanPath(r.URL.Path); c != r.URL.Path {
		writeError(w, errInvalid("path %q is not canonical (use %q)", r.URL.Path, c))
		return
	}
	s.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, token)))
}

// cleanPath is the path http.ServeMux would redirect p to: rooted, without
// "." or ".." elements or repeated slashes, keeping a trailing slash.
func cleanPath(p string) string {
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// methods are the methods the API's routes may use.
var methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// notFound answers requests no route matches: 405 with Allow when the path
// is served with other methods, else 404.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range methods {
		probe := *r
		probe.Method = m
		if _, pattern := s.mux.Handler(&probe); pattern != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, code: api.CodeMethod, msg: fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", "))})
		return
	}
	writeError(w, errNotFound("no such endpoint: %s %s", r.Method, r.URL.Path))
}

func writeUnauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="minicloud"`)
	writeError(w, &apiError{status: http.StatusUnauthorized, code: api.CodeUnauthorized, msg: "missing or invalid bearer token"})
}
