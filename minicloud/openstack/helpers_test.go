package openstack_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gos "github.com/gophercloud/gophercloud/v2/openstack"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	"github.com/stratus-ccm/stratus/minicloud/openstack"
)

// clock is a test clock for token expiry and the Octavia pending delays.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// env is a minicloud serving the dialect, with gophercloud clients.
type env struct {
	mc       *minicloudtest.Cloud
	clk      *clock
	provider *gophercloud.ProviderClient
	compute  *gophercloud.ServiceClient
	network  *gophercloud.ServiceClient
	lb       *gophercloud.ServiceClient
}

// startEnv starts a cloud with the dialect (o) and a test clock, and
// authenticates gophercloud with a password.
func startEnv(t *testing.T, mo minicloudtest.Options, o openstack.Options) *env {
	t.Helper()
	clk := &clock{t: time.Now()}
	o.Now = clk.now
	mo.OpenStack = &o
	mc := minicloudtest.Start(t, mo)
	e := &env{mc: mc, clk: clk}
	e.provider = e.auth(t, passwordAuth(mc))
	eo := gophercloud.EndpointOpts{Region: minicloud.Region}
	var err error
	if e.compute, err = gos.NewComputeV2(e.provider, eo); err != nil {
		t.Fatal(err)
	}
	if e.network, err = gos.NewNetworkV2(e.provider, eo); err != nil {
		t.Fatal(err)
	}
	if e.lb, err = gos.NewLoadBalancerV2(e.provider, eo); err != nil {
		t.Fatal(err)
	}
	return e
}

func passwordAuth(mc *minicloudtest.Cloud) gophercloud.AuthOptions {
	return gophercloud.AuthOptions{
		IdentityEndpoint: mc.URL + openstack.IdentityPrefix, Username: "ccm", Password: mc.Token,
		DomainName: openstack.DomainName, TenantName: openstack.ProjectName, AllowReauth: true,
	}
}

func (e *env) auth(t *testing.T, ao gophercloud.AuthOptions) *gophercloud.ProviderClient {
	t.Helper()
	pc, err := gos.AuthenticatedClient(context.Background(), ao)
	if err != nil {
		t.Fatalf("authenticate: %v", err)
	}
	return pc
}

// token returns a fresh Keystone token for raw requests.
func (e *env) token(t *testing.T) string {
	t.Helper()
	pc := e.auth(t, passwordAuth(e.mc))
	return pc.Token()
}

// raw sends a request with a Keystone token and returns status, headers
// and the decoded JSON body.
func (e *env) raw(t *testing.T, method, path, body, token string, hdr ...string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, e.mc.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: body %q is not a JSON object: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, resp.Header, out
}

// createInstance creates an instance natively.
func (e *env) createInstance(t *testing.T, in api.InstanceCreate) *api.Instance {
	t.Helper()
	if in.Type == "" {
		in.Type = "mc.small"
	}
	if in.Zone == "" {
		in.Zone = minicloud.Zones[0]
	}
	inst, err := e.mc.Client.CreateInstance(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

func wantStatus(t *testing.T, err error, status int) {
	t.Helper()
	if !gophercloud.ResponseCodeIs(err, status) {
		t.Fatalf("got error %v, want HTTP %d", err, status)
	}
}
