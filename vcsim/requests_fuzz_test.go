package vcsim

import (
	"bytes"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzClassify feeds request bodies and paths from clients to the counting
// front: it must never panic, must give the simulator the body unchanged,
// and must name a SOAP operation only from a Body element.
func FuzzClassify(f *testing.F) {
	f.Add("/sdk", `<?xml version="1.0"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body><RetrievePropertiesEx xmlns="urn:vim25"><_this>pc</_this></RetrievePropertiesEx></soapenv:Body></soapenv:Envelope>`)
	f.Add("/sdk", `<Envelope><Header><X/></Header><Body><Login/></Body></Envelope>`)
	f.Add("/sdk", `not xml`)
	f.Add("/rest/com/vmware/cis/tagging/tag/id:urn:vmomi:InventoryServiceTag:1:GLOBAL?~action=get", ``)
	f.Add("/api/cis/tagging/category/0c8b6a27-65c8-4f6e-9e0e-8d1f2a3b4c5d", `{}`)
	f.Fuzz(func(t *testing.T, path, body string) {
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		r.URL.Path = path
		kind, key := classify(r)
		got, err := io.ReadAll(r.Body)
		if err != nil || !bytes.Equal(got, []byte(body)) {
			t.Fatalf("body after classify: %q, %v; want %q", got, err, body)
		}
		if key == "" {
			t.Fatalf("empty key for %q", path)
		}
		if kind == kindSOAP && !strings.Contains(body, "Body") {
			t.Fatalf("SOAP operation %q from a body without a Body element: %q", key, body)
		}
	})
}
