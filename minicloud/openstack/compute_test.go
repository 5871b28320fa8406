package openstack_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gos "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	"github.com/stratus-ccm/stratus/minicloud/openstack"
)

func TestKeystone(t *testing.T) {
	e := startEnv(t, minicloudtest.Options{}, openstack.Options{TokenTTL: time.Hour})
	ctx := context.Background()

	// Version discovery from the unversioned URL, then the catalog.
	tok, err := tokens.Get(ctx, identityClient(t, e), e.provider.Token()).Extract()
	if err != nil {
		t.Fatalf("validate token: %v", err)
	}
	if !tok.ExpiresAt.After(e.clk.now()) {
		t.Errorf("token expires at %v, not after now", tok.ExpiresAt)
	}
	for _, typ := range []string{"compute", "network", "load-balancer"} {
		url, err := e.provider.EndpointLocator(gophercloud.EndpointOpts{Type: typ, Region: minicloud.Region, Availability: gophercloud.AvailabilityPublic})
		if err != nil || !strings.HasPrefix(url, e.mc.URL+"/") {
			t.Errorf("catalog %s endpoint %q, %v", typ, url, err)
		}
	}

	// Application credentials: the secret is a minicloud token.
	ac := gophercloud.AuthOptions{IdentityEndpoint: e.mc.IdentityURL, ApplicationCredentialID: "ccm-cred", ApplicationCredentialSecret: e.mc.Token}
	if _, err := gos.AuthenticatedClient(ctx, ac); err != nil {
		t.Errorf("application credential: %v", err)
	}

	bad := []gophercloud.AuthOptions{
		{IdentityEndpoint: e.mc.IdentityURL, Username: "ccm", Password: "not-a-token", DomainName: "Default", TenantName: "minicloud"},
		{IdentityEndpoint: e.mc.IdentityURL, Username: "ccm", Password: e.mc.Token, DomainName: "Default", TenantName: "other"},
		{IdentityEndpoint: e.mc.IdentityURL, Username: "ccm", Password: e.mc.Token, DomainName: "Elsewhere", TenantName: "minicloud"},
		{IdentityEndpoint: e.mc.IdentityURL, ApplicationCredentialID: "x", ApplicationCredentialSecret: "wrong"},
	}
	for _, ao := range bad {
		_, err := gos.AuthenticatedClient(ctx, ao)
		wantStatus(t, err, http.StatusUnauthorized)
	}

	// A malformed auth body is a 400 in Keystone's format.
	status, _, body := e.raw(t, "POST", "/identity/v3/auth/tokens", `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"x","password":"y"}}}}}`, "")
	if status != http.StatusBadRequest || body["error"].(map[string]any)["code"].(float64) != 400 {
		t.Errorf("user without domain: %d %v", status, body)
	}
	status, _, body = e.raw(t, "POST", "/identity/v3/auth/tokens", `{"auth":{"identity":{"methods":["password"]}},"extra":1}`, "")
	if status != http.StatusBadRequest || !strings.Contains(body["error"].(map[string]any)["message"].(string), "extra") {
		t.Errorf("unknown field: %d %v", status, body)
	}
}

func identityClient(t *testing.T, e *env) *gophercloud.ServiceClient {
	t.Helper()
	c, err := gos.NewIdentityV3(e.provider, gophercloud.EndpointOpts{Region: minicloud.Region})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTokenExpiry: an expired token is a 401 and gophercloud
// authenticates again and repeats the call.
func TestTokenExpiry(t *testing.T) {
	e := startEnv(t, minicloudtest.Options{}, openstack.Options{TokenTTL: time.Minute})
	ctx := context.Background()
	old := e.provider.Token()
	e.clk.advance(2 * time.Minute)
	status, hdr, body := e.raw(t, "GET", "/compute/v2.1/servers", "", old)
	if status != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") == "" || body["error"] == nil {
		t.Fatalf("expired token: %d %v %v", status, hdr, body)
	}
	if err := e.mc.Client.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := servers.List(e.compute, nil).AllPages(ctx); err != nil {
		t.Fatalf("list after expiry: %v", err)
	}
	if e.provider.Token() == old {
		t.Error("gophercloud kept the expired token")
	}
	st, err := e.mc.Client.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Requests["POST /identity/v3/auth/tokens"] != 1 || st.Requests["GET /compute/v2.1/servers/detail"] != 1 {
		t.Errorf("stats after re-authentication: %v", st.Requests)
	}
	status, _, _ = e.raw(t, "GET", "/compute/v2.1/servers", "", "unknown-token")
	if status != http.StatusUnauthorized {
		t.Errorf("unknown token: %d", status)
	}
}

func TestNovaServers(t *testing.T) {
	e := startEnv(t, minicloudtest.Options{}, openstack.Options{MaxPageSize: 2})
	ctx := context.Background()
	web1 := e.createInstance(t, api.InstanceCreate{Name: "web-1", PublicIP: true, IPv6: true, Zone: minicloud.Zones[1], Tags: map[string]string{"role": "web"}})
	e.createInstance(t, api.InstanceCreate{Name: "web-10", Type: "mc.large"})
	db := e.createInstance(t, api.InstanceCreate{Name: "db"})
	if _, err := e.mc.Client.StopInstance(ctx, db.ID); err != nil {
		t.Fatal(err)
	}

	// Paging: three servers in pages of two, followed through the next link.
	if err := e.mc.Client.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	pages, err := servers.List(e.compute, servers.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, err := servers.ExtractServers(pages)
	if err != nil || len(all) != 3 {
		t.Fatalf("all servers: %d, %v", len(all), err)
	}
	st, _ := e.mc.Client.Stats(ctx)
	if st.Requests["GET /compute/v2.1/servers/detail"] != 2 {
		t.Errorf("pages fetched: %v", st.Requests)
	}

	// The name filter is a regular expression, as the upstream provider
	// sends it.
	for filter, want := range map[string]int{"^web-1$": 1, "web": 2, "^db$": 1, "nothing": 0} {
		pages, err := servers.List(e.compute, servers.ListOpts{Name: filter}).AllPages(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := servers.ExtractServers(pages)
		if len(got) != want {
			t.Errorf("name=%s: %d servers, want %d", filter, len(got), want)
		}
	}
	pages, _ = servers.List(e.compute, servers.ListOpts{Status: "SHUTOFF"}).AllPages(ctx)
	if got, _ := servers.ExtractServers(pages); len(got) != 1 || got[0].ID != db.ID || got[0].Status != "SHUTOFF" {
		t.Errorf("status=SHUTOFF: %+v", got)
	}

	s, err := servers.Get(ctx, e.compute, web1.ID).Extract()
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != "ACTIVE" || s.Name != "web-1" || s.Metadata["role"] != "web" || s.Flavor["id"] != "mc.small" {
		t.Errorf("server: %+v", s)
	}
	var ext struct {
		AZ string `json:"OS-EXT-AZ:availability_zone"`
	}
	if err := servers.Get(ctx, e.compute, web1.ID).ExtractInto(&ext); err != nil || ext.AZ != minicloud.Zones[1] {
		t.Errorf("availability zone %q, %v", ext.AZ, err)
	}
	addrs := s.Addresses["minicloud"].([]any)
	var types []string
	for _, a := range addrs {
		m := a.(map[string]any)
		types = append(types, m["addr"].(string)+"/"+m["OS-EXT-IPS:type"].(string))
	}
	want := web1.PrivateIP + "/fixed " + web1.PrivateIPv6 + "/fixed " + web1.PublicIP + "/floating"
	if strings.Join(types, " ") != want {
		t.Errorf("addresses %v, want %s", types, want)
	}
	_, err = servers.Get(ctx, e.compute, "i-ffffffffffff").Extract()
	wantStatus(t, err, http.StatusNotFound)

	// Microversions: 2.47 embeds the flavor; out of range is 406, garbage 400.
	e.compute.Microversion = "2.47"
	s, err = servers.Get(ctx, e.compute, web1.ID).Extract()
	if err != nil || s.Flavor["original_name"] != "mc.small" || s.Flavor["vcpus"].(float64) != 1 {
		t.Errorf("2.47 flavor: %+v, %v", s.Flavor, err)
	}
	e.compute.Microversion = "2.200"
	_, err = servers.Get(ctx, e.compute, web1.ID).Extract()
	wantStatus(t, err, http.StatusNotAcceptable)
	e.compute.Microversion = ""
	tok := e.token(t)
	status, hdr, _ := e.raw(t, "GET", "/compute/v2.1/servers/"+web1.ID, "", tok, "OpenStack-API-Version", "compute 2.60")
	if status != 200 || hdr.Get("OpenStack-API-Version") != "compute 2.60" {
		t.Errorf("microversion echo: %d %v", status, hdr)
	}
	status, _, body := e.raw(t, "GET", "/compute/v2.1/servers/"+web1.ID, "", tok, "X-OpenStack-Nova-API-Version", "two")
	if status != 400 || body["badRequest"] == nil {
		t.Errorf("bad microversion: %d %v", status, body)
	}

	// Filters the dialect does not serve and bad markers are errors, not
	// ignored.
	status, _, body = e.raw(t, "GET", "/compute/v2.1/servers/detail?image=x", "", tok)
	if status != 400 || body["badRequest"] == nil {
		t.Errorf("unknown filter: %d %v", status, body)
	}
	status, _, _ = e.raw(t, "GET", "/compute/v2.1/servers/detail?marker=i-nope", "", tok)
	if status != 400 {
		t.Errorf("bad marker: %d", status)
	}
	status, _, _ = e.raw(t, "GET", "/compute/v2.1/servers/detail?name=(", "", tok)
	if status != 400 {
		t.Errorf("bad regex: %d", status)
	}

	f, err := flavors.Get(ctx, e.compute, "mc.large").Extract()
	if err != nil || f.VCPUs != 4 || f.RAM != 8192 {
		t.Errorf("flavor: %+v, %v", f, err)
	}
	_, err = flavors.Get(ctx, e.compute, "m1.tiny").Extract()
	wantStatus(t, err, http.StatusNotFound)
}

// TestFlavorsZonesImages: the flavor filters and sort keys Nova accepts
// (the openstack command sends is_public=True or None), extra specs (none),
// the zones' detail refused to a project as Nova's policy refuses it, and
// an image service without images (the command builds an image client for
// every server list).
func TestFlavorsZonesImages(t *testing.T) {
	e := startEnv(t, minicloudtest.Options{}, openstack.Options{})
	tok := e.token(t)
	flavorNames := func(path string) []string {
		t.Helper()
		status, _, body := e.raw(t, "GET", path, "", tok)
		if status != 200 {
			t.Fatalf("%s: %d %v", path, status, body)
		}
		var out []string
		for _, f := range body["flavors"].([]any) {
			out = append(out, f.(map[string]any)["name"].(string))
		}
		return out
	}
	for path, want := range map[string][]string{
		"/compute/v2.1/flavors":                                             {"mc.large", "mc.medium", "mc.small"},
		"/compute/v2.1/flavors/detail?is_public=None":                       {"mc.large", "mc.medium", "mc.small"},
		"/compute/v2.1/flavors/detail?is_public=True":                       {"mc.large", "mc.medium", "mc.small"},
		"/compute/v2.1/flavors?is_public=false":                             nil,
		"/compute/v2.1/flavors?minRam=4096&sort_key=memory_mb":              {"mc.medium", "mc.large"},
		"/compute/v2.1/flavors?sort_key=vcpus&sort_dir=desc":                {"mc.large", "mc.medium", "mc.small"},
		"/compute/v2.1/flavors?minDisk=1":                                   nil,
		"/compute/v2.1/flavors?sort_key=name&sort_dir=desc&limit=1":         {"mc.small"},
		"/compute/v2.1/flavors?sort_key=memory_mb&limit=2&marker=mc.medium": {"mc.large"},
	} {
		if got := flavorNames(path); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", path, got, want)
		}
	}
	for _, path := range []string{"?is_public=maybe", "?minRam=-1", "?sort_key=color", "?sort_dir=up", "?color=red"} {
		if status, _, body := e.raw(t, "GET", "/compute/v2.1/flavors"+path, "", tok); status != 400 || body["badRequest"] == nil {
			t.Errorf("flavors%s: %d %v, want 400 badRequest", path, status, body)
		}
	}
	if status, _, body := e.raw(t, "GET", "/compute/v2.1/flavors/mc.small/os-extra_specs", "", tok); status != 200 || fmt.Sprint(body["extra_specs"]) != "map[]" {
		t.Errorf("extra specs: %d %v", status, body)
	}
	if status, _, _ := e.raw(t, "GET", "/compute/v2.1/flavors/m1.tiny/os-extra_specs", "", tok); status != 404 {
		t.Errorf("extra specs of an unknown flavor: %d", status)
	}
	if status, _, body := e.raw(t, "GET", "/compute/v2.1/os-availability-zone/detail", "", tok); status != 403 || body["forbidden"] == nil {
		t.Errorf("zone detail: %d %v, want 403 forbidden", status, body)
	}
	if status, _, body := e.raw(t, "GET", "/image/v2/images?limit=20", "", tok); status != 200 || fmt.Sprint(body["images"]) != "[]" {
		t.Errorf("images: %d %v", status, body)
	}
	if status, _, _ := e.raw(t, "GET", "/image/v2/images/4c1d6a2e-7ad5-4a0c-9b28-4be0e9a2a5e1", "", tok); status != 404 {
		t.Errorf("an image: %d, want 404", status)
	}
	if status, _, _ := e.raw(t, "GET", "/image/v2/images", "", ""); status != 401 {
		t.Errorf("images without a token: %d, want 401", status)
	}
}

// TestFaults: minicloud's injected faults and 429s reach dialect
// operations by name, with Retry-After and the service's error body.
func TestFaults(t *testing.T) {
	e := startEnv(t, minicloudtest.Options{}, openstack.Options{})
	ctx := context.Background()
	if _, err := e.mc.Client.SetFaults(ctx, api.Faults{ThrottleRate: 1, Operations: []string{"GET /compute/v2.1/servers/detail"}}); err != nil {
		t.Fatalf("faults on a dialect operation: %v", err)
	}
	tok := e.token(t)
	status, hdr, body := e.raw(t, "GET", "/compute/v2.1/servers/detail", "", tok)
	if status != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" || body["overLimit"] == nil {
		t.Errorf("throttled: %d %v %v", status, hdr, body)
	}
	if status, _, _ := e.raw(t, "GET", "/network/v2.0/networks", "", tok); status != 200 {
		t.Errorf("unfaulted operation: %d", status)
	}
	if _, err := e.mc.Client.SetFaults(ctx, api.Faults{ErrorRate: 1, Operations: []string{"GET /network/v2.0/networks"}}); err != nil {
		t.Fatal(err)
	}
	status, _, body = e.raw(t, "GET", "/network/v2.0/networks", "", tok)
	if status != 500 || body["NeutronError"] == nil {
		t.Errorf("injected error: %d %v", status, body)
	}
	st, _ := e.mc.Client.Stats(ctx)
	if st.Throttled != 1 || st.Errors != 1 || st.ThrottledByOperation["GET /compute/v2.1/servers/detail"] != 1 {
		t.Errorf("stats: %+v", st)
	}
}

// TestUnauthorizedFault: with unauthorized_rate 1 Keystone rejects every
// token and every token request (401 in Keystone's format, with
// WWW-Authenticate), so a client that re-authenticates still fails; once the
// fault is cleared its next call authenticates again and succeeds.
func TestUnauthorizedFault(t *testing.T) {
	e := startEnv(t, minicloudtest.Options{}, openstack.Options{})
	ctx := context.Background()
	tok := e.token(t)
	if _, err := e.mc.Client.SetFaults(ctx, api.Faults{UnauthorizedRate: 1}); err != nil {
		t.Fatal(err)
	}
	status, hdr, body := e.raw(t, "GET", "/compute/v2.1/servers/detail", "", tok)
	errBody, _ := body["error"].(map[string]any)
	if status != http.StatusUnauthorized || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Keystone uri=") || errBody["code"] != float64(401) {
		t.Errorf("a valid token under the fault: %d %v %v, want Keystone's 401", status, hdr, body)
	}
	authBody := `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"ccm","domain":{"name":"Default"},"password":"` + e.mc.Token + `"}}},` +
		`"scope":{"project":{"name":"minicloud","domain":{"name":"Default"}}}}}`
	if status, hdr, body := e.raw(t, "POST", "/identity/v3/auth/tokens", authBody, ""); status != http.StatusUnauthorized || hdr.Get("X-Subject-Token") != "" {
		t.Errorf("token request under the fault: %d %v %v, want 401 without a token", status, hdr, body)
	}
	// gophercloud re-authenticates on the 401, and its token request is
	// refused too.
	_, err := servers.List(e.compute, nil).AllPages(ctx)
	if err == nil || !strings.Contains(err.Error(), "Unable to re-authenticate") || !strings.Contains(err.Error(), "POST "+e.mc.URL+"/identity/v3/auth/tokens], but got 401") {
		t.Errorf("gophercloud under the fault: %v, want its re-authentication refused with 401", err)
	}

	if _, err := e.mc.Client.SetFaults(ctx, api.Faults{}); err != nil {
		t.Fatal(err)
	}
	if _, err := servers.List(e.compute, nil).AllPages(ctx); err != nil {
		t.Errorf("after clearing the fault: %v", err)
	}
	if status, _, _ := e.raw(t, "GET", "/compute/v2.1/servers/detail", "", tok); status != http.StatusOK {
		t.Errorf("the token issued before the fault, after it: %d, want 200", status)
	}
	st, err := e.mc.Client.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Unauthorized < 3 {
		t.Errorf("stats: %d unauthorized, want at least 3", st.Unauthorized)
	}
}

// TestRateLimit: the minicloud token's budget applies to its Keystone
// tokens; gophercloud sees 429.
func TestRateLimit(t *testing.T) {
	e := startEnv(t, minicloudtest.Options{RateLimit: 0.001, Burst: 2}, openstack.Options{})
	// The authentication spent the first request of the burst; one more
	// goes through, then 429.
	ctx := context.Background()
	if _, err := servers.List(e.compute, nil).AllPages(ctx); err != nil {
		t.Fatalf("within the burst: %v", err)
	}
	_, err := servers.List(e.compute, nil).AllPages(ctx)
	wantStatus(t, err, http.StatusTooManyRequests)
	var ue gophercloud.ErrUnexpectedResponseCode
	if !asUnexpected(err, &ue) || ue.ResponseHeader.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After: %v", err)
	}
}

func asUnexpected(err error, ue *gophercloud.ErrUnexpectedResponseCode) bool {
	for err != nil {
		if u, ok := err.(gophercloud.ErrUnexpectedResponseCode); ok {
			*ue = u
			return true
		}
		if u, ok := err.(interface{ Unwrap() error }); ok {
			err = u.Unwrap()
			continue
		}
		return false
	}
	return false
}

// TestEmptyAndReadOnlyCollections: what a cloud without them answers for
// key pairs, quota limits, load-balancer flavors and availability zones,
// the Octavia providers and the default group's rules; their filters and
// markers are checked as any collection's.
func TestEmptyAndReadOnlyCollections(t *testing.T) {
	e := startEnv(t, minicloudtest.Options{}, openstack.Options{})
	e.createInstance(t, api.InstanceCreate{Name: "a", Type: "mc.medium"})
	tok := e.token(t)
	for path, check := range map[string]func(map[string]any) bool{
		"/compute/v2.1/os-keypairs": func(b map[string]any) bool { return fmt.Sprint(b["keypairs"]) == "[]" },
		"/compute/v2.1/limits": func(b map[string]any) bool {
			abs := b["limits"].(map[string]any)["absolute"].(map[string]any)
			return abs["totalInstancesUsed"] == 1.0 && abs["totalCoresUsed"] == 2.0 && abs["totalRAMUsed"] == 4096.0 && abs["maxTotalInstances"] == -1.0
		},
		"/load-balancer/v2/lbaas/flavors":           func(b map[string]any) bool { return fmt.Sprint(b["flavors"]) == "[]" },
		"/load-balancer/v2/lbaas/availabilityzones": func(b map[string]any) bool { return fmt.Sprint(b["availability_zones"]) == "[]" },
		"/load-balancer/v2/lbaas/providers":         func(b map[string]any) bool { return len(b["providers"].([]any)) == 2 },
		"/network/v2.0/security-group-rules?direction=egress": func(b map[string]any) bool {
			rs := b["security_group_rules"].([]any)
			return len(rs) == 2 && rs[0].(map[string]any)["security_group_id"] != nil
		},
	} {
		status, _, body := e.raw(t, "GET", path, "", tok)
		if status != 200 || !check(body) {
			t.Errorf("%s: %d %v", path, status, body)
		}
	}
	for path, want := range map[string]int{
		"/compute/v2.1/os-keypairs?color=red":                 400,
		"/compute/v2.1/os-keypairs/k1":                        404,
		"/compute/v2.1/limits?color=red":                      400,
		"/load-balancer/v2/lbaas/flavors?color=red":           400,
		"/load-balancer/v2/lbaas/flavors?marker=nope":         400,
		"/load-balancer/v2/lbaas/flavors/nope":                404,
		"/load-balancer/v2/lbaas/availabilityzones/nope":      404,
		"/network/v2.0/security-group-rules?color=red":        400,
		"/network/v2.0/security-group-rules/nope":             404,
		"/load-balancer/v2/lbaas/availabilityzones?name=mc-a": 200,
	} {
		if status, _, body := e.raw(t, "GET", path, "", tok); status != want {
			t.Errorf("%s: %d %v, want %d", path, status, body, want)
		}
	}
}
