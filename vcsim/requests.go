package vcsim

import (
	"bytes"
	"encoding/xml"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Requests is a snapshot of the requests that reached the server, counted
// before authentication, latency and faults, so failed logins and injected
// failures are included.
type Requests struct {
	// SOAP counts vim25 (and other SOAP) calls by operation, the first
	// element of the SOAP body: "Login", "RetrievePropertiesEx".
	SOAP map[string]int
	// REST counts /rest and /api calls by method and path template: path
	// segments that are object IDs read "{id}", and the "~action" (or
	// "action") query parameter is kept, as in
	// "POST /rest/com/vmware/cis/tagging/tag-association/{id}?~action=list-attached-objects".
	REST map[string]int
	// Other counts the remaining HTTP requests by method and path
	// ("GET /about"), including SOAP posts whose body did not parse.
	Other map[string]int
}

// Total returns the number of requests of every kind.
func (r Requests) Total() int {
	n := 0
	for _, m := range []map[string]int{r.SOAP, r.REST, r.Other} {
		for _, c := range m {
			n += c
		}
	}
	return n
}

// request kinds, the first part of a counting key.
const (
	kindSOAP  = "soap"
	kindREST  = "rest"
	kindOther = "other"
)

// httpFault answers matching requests with status instead of passing them on.
type httpFault struct {
	status    int
	remaining int // < 0: until cleared
}

// front counts, delays and fails requests before the simulator sees them.
type front struct {
	next    http.Handler
	latency time.Duration
	control http.Handler // the control API, or nil

	mu     sync.Mutex
	counts map[[2]string]int // {kind, key}
	faults map[string]*httpFault
	// extra is latency added at run time (SetLatency), on top of latency.
	extra time.Duration
}

func newFront(next http.Handler, latency time.Duration) *front {
	return &front{next: next, latency: latency, counts: map[[2]string]int{}, faults: map[string]*httpFault{}}
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.control != nil && strings.HasPrefix(r.URL.Path, ControlPath) {
		f.control.ServeHTTP(w, r)
		return
	}
	kind, key := classify(r)
	f.mu.Lock()
	f.counts[[2]string{kind, key}]++
	status := 0
	if fault := f.faults[key]; fault != nil {
		status = fault.status
		if fault.remaining > 0 {
			fault.remaining--
			if fault.remaining == 0 {
				delete(f.faults, key)
			}
		}
	}
	delay := f.latency + f.extra
	f.mu.Unlock()

	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if status != 0 {
		http.Error(w, "vcsim: injected failure for "+key, status)
		return
	}
	f.next.ServeHTTP(w, r)
}

// classify names a request for counting and HTTP faults. It reads a SOAP
// body to find the operation and puts it back for the simulator.
func classify(r *http.Request) (kind, key string) {
	p := r.URL.Path
	if p == "/rest" || p == "/api" || strings.HasPrefix(p, "/rest/") || strings.HasPrefix(p, "/api/") {
		return kindREST, r.Method + " " + restTemplate(r)
	}
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err == nil {
			if op := soapOperation(body); op != "" {
				return kindSOAP, op
			}
		}
	}
	return kindOther, r.Method + " " + p
}

// soapOperation returns the local name of the first element inside the
// SOAP Body, or "" when body is not a SOAP envelope.
func soapOperation(body []byte) string {
	d := xml.NewDecoder(bytes.NewReader(body))
	inBody := false
	for {
		tok, err := d.Token()
		if err != nil { // io.EOF or not XML
			return ""
		}
		start, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if inBody {
			return start.Name.Local
		}
		if start.Name.Local == "Body" {
			inBody = true
		}
	}
}

// restTemplate is the request's path with object IDs replaced by {id},
// plus its action parameter: the vAPI names an operation by both.
func restTemplate(r *http.Request) string {
	segs := strings.Split(r.URL.Path, "/")
	for i, s := range segs {
		if isObjectID(s) {
			segs[i] = "{id}"
		}
	}
	t := strings.Join(segs, "/")
	q := r.URL.Query()
	for _, name := range []string{"~action", "action"} {
		if v := q.Get(name); v != "" {
			return t + "?" + name + "=" + v
		}
	}
	return t
}

// isObjectID reports whether a path segment names an object rather than a
// resource: tagging IDs are URNs ("urn:vmomi:InventoryServiceTag:…", also
// prefixed "id:" under /rest), and content-library IDs are UUIDs.
func isObjectID(seg string) bool {
	if strings.Contains(seg, ":") {
		return true
	}
	_, err := uuid.Parse(seg)
	return err == nil
}

func (f *front) snapshot() Requests {
	r := Requests{SOAP: map[string]int{}, REST: map[string]int{}, Other: map[string]int{}}
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, n := range f.counts {
		switch k[0] {
		case kindSOAP:
			r.SOAP[k[1]] = n
		case kindREST:
			r.REST[k[1]] = n
		default:
			r.Other[k[1]] = n
		}
	}
	return r
}

func (f *front) reset() {
	f.mu.Lock()
	clear(f.counts)
	f.mu.Unlock()
}

func (f *front) fail(key string, status, times int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if times <= 0 {
		times = -1
	}
	f.faults[key] = &httpFault{status: status, remaining: times}
}

func (f *front) clearFaults() {
	f.mu.Lock()
	clear(f.faults)
	f.mu.Unlock()
}
