package vsphere

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stratus-ccm/stratus/pkg/stratus"
)

// TestErrorClassification: vCenter's HTTP answers become the errors
// stratus's cloud layer acts on, and none of them loses an instance.
func TestErrorClassification(t *testing.T) {
	s := newSim(t)
	c := s.cloud(s.config("labels:\n  zone: k8s-zone\n  region: k8s-region\n"), nil)
	if _, err := c.ListInstances(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		status             int
		throttled, transit bool
	}{
		{http.StatusTooManyRequests, true, false},
		{http.StatusServiceUnavailable, false, true},
		{http.StatusBadGateway, false, true},
		{http.StatusGatewayTimeout, false, true},
	} {
		s.srv.FailHTTP("RetrievePropertiesEx", tc.status, 1)
		_, err := c.ListInstances(t.Context())
		var th *stratus.ThrottledError
		if err == nil || errors.As(err, &th) != tc.throttled || stratus.IsTransient(err) != tc.transit {
			t.Errorf("HTTP %d: ListInstances error %v; want throttled %t, transient %t", tc.status, err, tc.throttled, tc.transit)
		}
	}
	if ok, err := c.InstanceExists(t.Context(), nodeNamed("node-0")); !ok || err != nil {
		t.Errorf("InstanceExists after the failures = %t, %v", ok, err)
	}

	// A failing tag endpoint while a VM's host has no zone yet: the VM is
	// listed, with a transient metadata error.
	key := ""
	for k := range s.srv.Requests().REST {
		if strings.Contains(k, "list-attached-tags-on-objects") {
			key = k
		}
	}
	if key == "" {
		t.Fatalf("no tag request among %v", s.srv.Requests().REST)
	}
	c2 := s.cloud(s.config("labels:\n  zone: k8s-zone\n  region: k8s-region\n"), nil)
	s.srv.FailHTTP(key, http.StatusInternalServerError, 1)
	list, err := c2.ListInstances(t.Context())
	if err != nil || len(list) != 4 {
		t.Fatalf("ListInstances with the tag endpoint failing: %d instances, %v", len(list), err)
	}
	for _, inst := range list {
		if inst.MetadataErr == nil || !stratus.IsTransient(inst.MetadataErr) || !strings.Contains(inst.MetadataErr.Error(), "zone and region of VM "+inst.Name) {
			t.Errorf("%s: MetadataErr = %v, want a transient zone error", inst.Name, inst.MetadataErr)
		}
	}
}
