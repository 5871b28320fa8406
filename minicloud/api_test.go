package minicloud_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
)

// noRedirects is a client that shows redirects instead of following them,
// so a test sees exactly what the server answered.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// raw sends a request with the cloud's token (unless headers override
// Authorization) and returns the status, headers and body.
func raw(t *testing.T, mc *minicloudtest.Cloud, method, path, body string, headers map[string]string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, mc.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+mc.Token)
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, out
}

func errorCode(t *testing.T, body []byte) string {
	t.Helper()
	var eb api.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
		t.Fatalf("not an error body: %s", body)
	}
	return eb.Error.Code
}

func newInstance(t *testing.T, c *client.Client, name string, tags map[string]string) *api.Instance {
	t.Helper()
	inst, err := c.CreateInstance(context.Background(), api.InstanceCreate{Name: name, Type: "mc.small", Zone: "mc-central-b", Tags: tags})
	if err != nil {
		t.Fatalf("create instance %s: %v", name, err)
	}
	return inst
}

func TestAuth(t *testing.T) {
	mc := minicloudtest.Start(t, minicloudtest.Options{})
	for _, tc := range []struct {
		name   string
		header string
		want   int
	}{
		{"missing", "", http.StatusUnauthorized},
		{"wrong token", "Bearer nope", http.StatusUnauthorized},
		{"not bearer", "Basic " + mc.Token, http.StatusUnauthorized},
		{"empty bearer", "Bearer ", http.StatusUnauthorized},
		{"token only", mc.Token, http.StatusUnauthorized},
		{"right token", "Bearer " + mc.Token, 0},
		// RFC 7235: the scheme is case-insensitive.
		{"lower-case scheme", "bearer " + mc.Token, 0},
		{"upper-case scheme", "BEARER " + mc.Token, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/v1/instances", "/v1/regions", "/v1/_stats", "/v1/no-such-thing"} {
				status, _, body := raw(t, mc, http.MethodGet, path, "", map[string]string{"Authorization": tc.header})
				want := tc.want
				if want == 0 { // authenticated: the endpoint's own answer
					want = http.StatusOK
					if strings.Contains(path, "no-such") {
						want = http.StatusNotFound
					}
				}
				if status != want {
					t.Fatalf("GET %s with %q: status %d, want %d (%s)", path, tc.header, status, want, body)
				}
				if tc.want == http.StatusUnauthorized && errorCode(t, body) != api.CodeUnauthorized {
					t.Fatalf("GET %s: code %s", path, body)
				}
			}
		})
	}
	// Whatever the path or method, an unauthenticated request gets a JSON
	// 401 and nothing else: no redirect of an unclean path, no 404 or 405.
	for _, req := range []struct{ method, path string }{
		{"GET", "/v1/../v1/instances"},
		{"GET", "/v1//instances"},
		{"GET", "/v1/./instances"},
		{"GET", "/x/../v1/instances"},
		{"GET", "/"},
		{"GET", "/healthz"},
		{"PATCH", "/v1/instances"},
		{"DELETE", "/v1/regions"},
	} {
		for _, header := range []string{"", "Bearer nope"} {
			status, h, body := raw(t, mc, req.method, req.path, "", map[string]string{"Authorization": header})
			if status != http.StatusUnauthorized || h.Get("Content-Type") != "application/json" {
				t.Fatalf("%s %s with %q: status %d (%s), want a JSON 401: %s", req.method, req.path, header, status, h.Get("Content-Type"), body)
			}
			if got := errorCode(t, body); got != api.CodeUnauthorized {
				t.Fatalf("%s %s: code %q, want %q", req.method, req.path, got, api.CodeUnauthorized)
			}
		}
	}
	other, err := client.New(mc.URL, "wrong")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.ListInstances(context.Background(), client.ListOptions{}); !client.IsUnauthorized(err) {
		t.Fatalf("client with wrong token: %v, want unauthorized", err)
	}
}

func TestRegionsAndInstanceTypes(t *testing.T) {
	mc := minicloudtest.Start(t, minicloudtest.Options{})
	ctx := context.Background()
	regions, err := mc.Client.Regions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []api.Region{{Name: "mc-central", Zones: []string{"mc-central-a", "mc-central-b", "mc-central-c"}}}
	if diff := cmp.Diff(want, regions); diff != "" {
		t.Errorf("regions (-want +got):\n%s", diff)
	}
	types, err := mc.Client.InstanceTypes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range types {
		names = append(names, it.Name)
		if it.VCPUs < 1 || it.MemoryMB < 1 {
			t.Errorf("instance type %+v has no size", it)
		}
	}
	if diff := cmp.Diff([]string{"mc.small", "mc.medium", "mc.large"}, names); diff != "" {
		t.Errorf("instance types (-want +got):\n%s", diff)
	}
}

func TestInstanceLifecycle(t *testing.T) {
	mc := minicloudtest.Start(t, minicloudtest.Options{})
	ctx := context.Background()
	c := mc.Client
	start := time.Now().Add(-time.Second)
	inst, err := c.CreateInstance(ctx, api.InstanceCreate{Name: "node-1", Type: "mc.medium", Zone: "mc-central-c", PublicIP: true, Tags: map[string]string{"cluster": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if inst.ID == "" || inst.State != api.InstanceRunning || inst.Region != "mc-central" || inst.Zone != "mc-central-c" || inst.Type != "mc.medium" || inst.CreatedAt.Before(start) {
		t.Fatalf("created instance %+v", inst)
	}
	if ip := netip.MustParseAddr(inst.PrivateIP); !mc.Config.InstanceCIDR.Contains(ip) {
		t.Errorf("private IP %s not in %s", ip, mc.Config.InstanceCIDR)
	}
	if ip := netip.MustParseAddr(inst.PublicIP); !mc.Config.PublicCIDR.Contains(ip) {
		t.Errorf("public IP %s not in %s", ip, mc.Config.PublicCIDR)
	}
	second := newInstance(t, c, "node-2", nil)
	if second.PublicIP != "" || second.PrivateIP == inst.PrivateIP || second.ID == inst.ID {
		t.Errorf("second instance %+v collides with or copies %+v", second, inst)
	}

	got, err := c.GetInstance(ctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(inst, got); diff != "" {
		t.Errorf("GET differs from create (-create +get):\n%s", diff)
	}

	stopped, err := c.StopInstance(ctx, inst.ID)
	if err != nil || stopped.State != api.InstanceStopped {
		t.Fatalf("stop: %+v, %v", stopped, err)
	}
	if got, _ := c.GetInstance(ctx, inst.ID); got.State != api.InstanceStopped {
		t.Fatalf("after stop, state %q", got.State)
	}
	started, err := c.StartInstance(ctx, inst.ID)
	if err != nil || started.State != api.InstanceRunning {
		t.Fatalf("start: %+v, %v", started, err)
	}

	if err := c.DeleteInstance(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetInstance(ctx, inst.ID); !client.IsNotFound(err) {
		t.Fatalf("GET after delete: %v, want not found", err)
	}
	if err := c.DeleteInstance(ctx, inst.ID); !client.IsNotFound(err) {
		t.Fatalf("second delete: %v, want not found", err)
	}
	for _, op := range []func(context.Context, string) (*api.Instance, error){c.StopInstance, c.StartInstance} {
		if _, err := op(ctx, inst.ID); !client.IsNotFound(err) {
			t.Fatalf("stop/start of deleted instance: %v, want not found", err)
		}
	}
	all, err := c.ListInstances(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].ID != second.ID {
		t.Fatalf("list after delete: %+v", all)
	}
	// The name is free again; the ID is new.
	again := newInstance(t, c, "node-1", nil)
	if again.ID == inst.ID {
		t.Fatalf("ID %s reused", again.ID)
	}
}

func TestDualStackInstanceWithLabels(t *testing.T) {
	mc := minicloudtest.Start(t, minicloudtest.Options{})
	ctx := context.Background()
	c := mc.Client
	labels := map[string]string{"example.com/team": "a", "tier": "", "kubernetes.io/x": "y"}
	inst, err := c.CreateInstance(ctx, api.InstanceCreate{Name: "ds", Type: "mc.small", Zone: "mc-central-a", IPv6: true, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr(inst.PrivateIPv6)
	if !ip.Is6() || !netip.MustParsePrefix("fd00:10::/64").Contains(ip) {
		t.Errorf("private IPv6 %s: want one of fd00:10::/64", ip)
	}
	if !netip.MustParseAddr(inst.PrivateIP).Is4() {
		t.Errorf("private IP %s: want IPv4 besides the IPv6", inst.PrivateIP)
	}
	if !cmp.Equal(inst.Labels, labels) {
		t.Errorf("labels %v, want %v", inst.Labels, labels)
	}
	second, err := c.CreateInstance(ctx, api.InstanceCreate{Name: "ds2", Type: "mc.small", Zone: "mc-central-a", IPv6: true})
	if err != nil {
		t.Fatal(err)
	}
	if second.PrivateIPv6 == "" || second.PrivateIPv6 == inst.PrivateIPv6 || second.Labels != nil {
		t.Errorf("second instance %+v: want its own IPv6 and no labels", second)
	}
	if v4 := newInstance(t, c, "v4", nil); v4.PrivateIPv6 != "" {
		t.Errorf("instance created without ipv6 has %q", v4.PrivateIPv6)
	}
	listed, err := c.ListInstances(ctx, client.ListOptions{Name: "ds"})
	if err != nil || len(listed) != 1 {
		t.Fatalf("list: %v, %v", listed, err)
	}
	if diff := cmp.Diff(inst, &listed[0]); diff != "" {
		t.Errorf("listed instance differs from created (-create +list):\n%s", diff)
	}
	status, _, body := raw(t, mc, "POST", "/v1/instances", `{"name":"bad","type":"mc.small","zone":"mc-central-a","labels":{"example.com/team":"a/b"}}`, nil)
	if status != 400 || !strings.Contains(string(body), `label \"example.com/team\": value \"a/b\"`) {
		t.Errorf("bad label value: %d %s; want 400 naming the label and value", status, body)
	}
}

func TestBadInput(t *testing.T) {
	mc := minicloudtest.Start(t, minicloudtest.Options{})
	c := mc.Client
	inst := newInstance(t, c, "taken", nil)
	lb, err := c.CreateLoadBalancer(context.Background(), api.LoadBalancerSpec{Name: "lb-taken", Listeners: []api.Listener{{Protocol: "TCP", Port: 80, TargetPort: 8080}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateRoute(context.Background(), api.RouteCreate{DestinationCIDR: "10.244.0.0/24", TargetInstanceID: inst.ID}); err != nil {
		t.Fatal(err)
	}
	listener := `"listeners":[{"protocol":"TCP","port":80,"target_port":8080}]`
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
	}{
		{"empty body", "POST", "/v1/instances", "", 400},
		{"not JSON", "POST", "/v1/instances", "{", 400},
		{"unknown field", "POST", "/v1/instances", `{"name":"a","type":"mc.small","zone":"mc-central-a","color":"red"}`, 400},
		{"trailing data", "POST", "/v1/instances", `{"name":"a","type":"mc.small","zone":"mc-central-a"} {}`, 400},
		{"wrong type", "POST", "/v1/instances", `{"name":5,"type":"mc.small","zone":"mc-central-a"}`, 400},
		{"missing name", "POST", "/v1/instances", `{"type":"mc.small","zone":"mc-central-a"}`, 400},
		{"bad name", "POST", "/v1/instances", `{"name":"-x","type":"mc.small","zone":"mc-central-a"}`, 400},
		{"unknown type", "POST", "/v1/instances", `{"name":"a","type":"mc.huge","zone":"mc-central-a"}`, 400},
		{"unknown zone", "POST", "/v1/instances", `{"name":"a","type":"mc.small","zone":"mars-1"}`, 400},
		{"bad tag key", "POST", "/v1/instances", `{"name":"a","type":"mc.small","zone":"mc-central-a","tags":{"a=b":"c"}}`, 400},
		{"bad label key", "POST", "/v1/instances", `{"name":"a","type":"mc.small","zone":"mc-central-a","labels":{"-team":"a"}}`, 400},
		{"bad label prefix", "POST", "/v1/instances", `{"name":"a","type":"mc.small","zone":"mc-central-a","labels":{"Example_Com/team":"a"}}`, 400},
		{"bad label value", "POST", "/v1/instances", `{"name":"a","type":"mc.small","zone":"mc-central-a","labels":{"team":"a b"}}`, 400},
		{"label value too long", "POST", "/v1/instances", `{"name":"a","type":"mc.small","zone":"mc-central-a","labels":{"team":"` + strings.Repeat("a", 64) + `"}}`, 400},
		{"ipv6 not a bool", "POST", "/v1/instances", `{"name":"a","type":"mc.small","zone":"mc-central-a","ipv6":"yes"}`, 400},
		{"instance name in use", "POST", "/v1/instances", `{"name":"taken","type":"mc.small","zone":"mc-central-a"}`, 409},
		{"no such instance", "GET", "/v1/instances/i-999999", "", 404},
		{"malformed instance id", "GET", "/v1/instances/xyz", "", 404},
		{"stop missing instance", "POST", "/v1/instances/i-999999/stop", "", 404},
		{"no such endpoint", "GET", "/v1/volumes", "", 404},
		{"method not routed", "PATCH", "/v1/instances/" + inst.ID, "{}", 405},
		{"unclean path", "GET", "/v1/../v1/instances", "", 400},
		{"double slash", "GET", "/v1//instances", "", 400},
		{"idempotency key too long", "POST", "/v1/routes", `{"destination_cidr":"10.9.0.0/16","target_instance_id":"` + inst.ID + `"}`, 400},
		{"bad page size", "GET", "/v1/instances?page_size=0", "", 400},
		{"huge page size", "GET", "/v1/instances?page_size=5000", "", 400},
		{"bad page token", "GET", "/v1/instances?page_token=!!", "", 400},
		{"foreign page token", "GET", "/v1/instances?page_token=bGItMQ", "", 400},
		{"unknown query", "GET", "/v1/instances?color=red", "", 400},
		{"bad tag filter", "GET", "/v1/instances?tag==x", "", 400},
		{"name filter on routes", "GET", "/v1/routes?name=x", "", 400},

		{"lb listener target not a target", "POST", "/v1/load-balancers", `{"name":"x","listeners":[{"protocol":"TCP","port":80,"target_port":80,"targets":[{"ip":"127.10.0.9"}]}],"targets":[{"ip":"127.10.0.8"}]}`, 400},
		{"lb listener bad source range", "POST", "/v1/load-balancers", `{"name":"x","listeners":[{"protocol":"TCP","port":80,"target_port":80,"source_ranges":["10.0.0.0/33"]}]}`, 400},
		{"lb missing name", "POST", "/v1/load-balancers", `{` + listener + `}`, 400},
		{"lb bad protocol", "POST", "/v1/load-balancers", `{"name":"x","listeners":[{"protocol":"SCTP","port":80,"target_port":80}]}`, 400},
		{"lb port zero", "POST", "/v1/load-balancers", `{"name":"x","listeners":[{"protocol":"TCP","port":0,"target_port":80}]}`, 400},
		{"lb port too big", "POST", "/v1/load-balancers", `{"name":"x","listeners":[{"protocol":"TCP","port":65536,"target_port":80}]}`, 400},
		{"lb target port negative", "POST", "/v1/load-balancers", `{"name":"x","listeners":[{"protocol":"UDP","port":53,"target_port":-1}]}`, 400},
		{"lb duplicate listener", "POST", "/v1/load-balancers", `{"name":"x","listeners":[{"protocol":"TCP","port":80,"target_port":80},{"protocol":"TCP","port":80,"target_port":81}]}`, 400},
		{"lb bad target ip", "POST", "/v1/load-balancers", `{"name":"x",` + listener + `,"targets":[{"ip":"10.0.0.300"}]}`, 400},
		{"lb target with both", "POST", "/v1/load-balancers", `{"name":"x",` + listener + `,"targets":[{"ip":"10.0.0.3","instance_id":"` + inst.ID + `"}]}`, 400},
		{"lb empty target", "POST", "/v1/load-balancers", `{"name":"x",` + listener + `,"targets":[{}]}`, 400},
		{"lb duplicate target", "POST", "/v1/load-balancers", `{"name":"x",` + listener + `,"targets":[{"ip":"10.0.0.3"},{"ip":"10.0.0.3"}]}`, 400},
		{"lb missing instance", "POST", "/v1/load-balancers", `{"name":"x",` + listener + `,"targets":[{"instance_id":"i-999999"}]}`, 400},
		{"lb bad source range", "POST", "/v1/load-balancers", `{"name":"x",` + listener + `,"source_ranges":["10.0.0.0/33"]}`, 400},
		{"lb source range not cidr", "POST", "/v1/load-balancers", `{"name":"x",` + listener + `,"source_ranges":["10.0.0.1"]}`, 400},
		{"lb bad health protocol", "POST", "/v1/load-balancers", `{"name":"x",` + listener + `,"health_check":{"protocol":"ICMP"}}`, 400},
		{"lb bad health port", "POST", "/v1/load-balancers", `{"name":"x",` + listener + `,"health_check":{"protocol":"TCP","port":70000}}`, 400},
		{"lb bad health path", "POST", "/v1/load-balancers", `{"name":"x",` + listener + `,"health_check":{"protocol":"HTTP","path":"healthz"}}`, 400},
		{"lb bad interval", "POST", "/v1/load-balancers", `{"name":"x",` + listener + `,"health_check":{"protocol":"TCP","interval_seconds":-1}}`, 400},
		{"lb timeout above interval", "POST", "/v1/load-balancers", `{"name":"x",` + listener + `,"health_check":{"protocol":"TCP","interval_seconds":3,"timeout_seconds":4}}`, 400},
		{"lb timeout above default interval", "POST", "/v1/load-balancers", `{"name":"x",` + listener + `,"health_check":{"protocol":"TCP","timeout_seconds":6}}`, 400},
		{"lb timeout too big", "POST", "/v1/load-balancers", `{"name":"x",` + listener + `,"health_check":{"protocol":"TCP","interval_seconds":300,"timeout_seconds":61}}`, 400},
		{"lb threshold too big", "POST", "/v1/load-balancers", `{"name":"x",` + listener + `,"health_check":{"protocol":"TCP","unhealthy_threshold":11}}`, 400},
		{"lb bad algorithm", "POST", "/v1/load-balancers", `{"name":"x",` + listener + `,"algorithm":"least_connections"}`, 400},
		{"lb idle timeout too big", "POST", "/v1/load-balancers", `{"name":"x",` + listener + `,"idle_timeout_seconds":3601}`, 400},
		{"lb name in use", "POST", "/v1/load-balancers", `{"name":"lb-taken",` + listener + `}`, 409},
		{"lb update rename", "PUT", "/v1/load-balancers/" + lb.ID, `{"name":"other",` + listener + `}`, 400},
		{"lb update bad port", "PUT", "/v1/load-balancers/" + lb.ID, `{"listeners":[{"protocol":"TCP","port":99999,"target_port":1}]}`, 400},
		{"lb update missing", "PUT", "/v1/load-balancers/lb-999999", `{` + listener + `}`, 404},
		{"lb delete missing", "DELETE", "/v1/load-balancers/lb-999999", "", 404},

		{"route bad cidr", "POST", "/v1/routes", `{"destination_cidr":"10.244.1.0/40","target_instance_id":"` + inst.ID + `"}`, 400},
		{"route missing instance", "POST", "/v1/routes", `{"destination_cidr":"10.244.1.0/24","target_instance_id":"i-999999"}`, 400},
		{"route destination in use", "POST", "/v1/routes", `{"destination_cidr":"10.244.0.0/24","target_instance_id":"` + inst.ID + `"}`, 409},
		{"route delete missing", "DELETE", "/v1/routes/r-999999", "", 404},

		{"faults rate above one", "PUT", "/v1/_faults", `{"error_rate":1.5}`, 400},
		{"faults negative latency", "PUT", "/v1/_faults", `{"latency_ms":-1}`, 400},
		{"faults unknown field", "PUT", "/v1/_faults", `{"chaos":true}`, 400},
		{"faults unknown operation", "PUT", "/v1/_faults", `{"error_rate":1,"operations":["GET /v1/volumes"]}`, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var headers map[string]string
			if strings.Contains(tc.name, "idempotency key") {
				headers = map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}
			}
			status, _, body := raw(t, mc, tc.method, tc.path, tc.body, headers)
			if status != tc.status {
				t.Fatalf("%s %s %s: status %d, want %d: %s", tc.method, tc.path, tc.body, status, tc.status, body)
			}
			want := map[int]string{400: api.CodeInvalid, 404: api.CodeNotFound, 405: api.CodeMethod, 409: api.CodeConflict}[tc.status]
			if got := errorCode(t, body); got != want {
				t.Fatalf("code %q, want %q", got, want)
			}
		})
	}
	// Nothing invalid was created.
	insts, _ := c.ListInstances(context.Background(), client.ListOptions{})
	lbs, _ := c.ListLoadBalancers(context.Background(), client.ListOptions{})
	routes, _ := c.ListRoutes(context.Background(), client.ListOptions{})
	if len(insts) != 1 || len(lbs) != 1 || len(routes) != 1 {
		t.Fatalf("bad requests created resources: %d instances, %d LBs, %d routes", len(insts), len(lbs), len(routes))
	}
}

func TestIdempotencyKey(t *testing.T) {
	mc := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: time.Hour})
	ctx := context.Background()
	c := mc.Client
	spec := api.InstanceCreate{Name: "idem", Type: "mc.small", Zone: "mc-central-a"}
	first, err := c.CreateInstance(ctx, spec, client.WithIdempotencyKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.CreateInstance(ctx, spec, client.WithIdempotencyKey("k1"))
	if err != nil {
		t.Fatalf("retry with the same key: %v", err)
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("retry returned a different instance (-first +retry):\n%s", diff)
	}
	// Without a key the same body is a second create: conflict on the name.
	if _, err := c.CreateInstance(ctx, spec); !client.IsConflict(err) {
		t.Errorf("create without key: %v, want conflict", err)
	}
	// The same key with another body is refused.
	if _, err := c.CreateInstance(ctx, api.InstanceCreate{Name: "other", Type: "mc.small", Zone: "mc-central-a"}, client.WithIdempotencyKey("k1")); !client.IsConflict(err) {
		t.Errorf("key reused with another body: %v, want conflict", err)
	}
	// The replay shows the current state, and survives deletion.
	if _, err := c.StopInstance(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if again, _ = c.CreateInstance(ctx, spec, client.WithIdempotencyKey("k1")); again.State != api.InstanceStopped {
		t.Errorf("replay after stop: state %q, want stopped", again.State)
	}
	if err := c.DeleteInstance(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if again, err = c.CreateInstance(ctx, spec, client.WithIdempotencyKey("k1")); err != nil || again.ID != first.ID {
		t.Errorf("replay after delete: %+v, %v; want the original %s", again, err, first.ID)
	}

	lbSpec := api.LoadBalancerSpec{Name: "web", Listeners: []api.Listener{{Protocol: "TCP", Port: 80, TargetPort: 80}}}
	lb1, err := c.CreateLoadBalancer(ctx, lbSpec, client.WithIdempotencyKey("lb"))
	if err != nil {
		t.Fatal(err)
	}
	lb2, err := c.CreateLoadBalancer(ctx, lbSpec, client.WithIdempotencyKey("lb"))
	if err != nil || lb2.ID != lb1.ID || lb2.VIP != lb1.VIP {
		t.Fatalf("LB retry: %+v, %v; want %s", lb2, err, lb1.ID)
	}
	inst := newInstance(t, c, "n", nil)
	rt := api.RouteCreate{DestinationCIDR: "10.0.0.0/24", TargetInstanceID: inst.ID}
	r1, err := c.CreateRoute(ctx, rt, client.WithIdempotencyKey("r"))
	if err != nil {
		t.Fatal(err)
	}
	if r2, err := c.CreateRoute(ctx, rt, client.WithIdempotencyKey("r")); err != nil || r2.ID != r1.ID {
		t.Fatalf("route retry: %+v, %v; want %s", r2, err, r1.ID)
	}
	lbs, _ := c.ListLoadBalancers(ctx, client.ListOptions{})
	routes, _ := c.ListRoutes(ctx, client.ListOptions{})
	if len(lbs) != 1 || len(routes) != 1 {
		t.Fatalf("retries created duplicates: %d LBs, %d routes", len(lbs), len(routes))
	}
}

func TestPagingAndFilters(t *testing.T) {
	mc := minicloudtest.Start(t, minicloudtest.Options{})
	ctx := context.Background()
	c := mc.Client
	var want []string
	for i := range 25 {
		tags := map[string]string{"cluster": "blue", "index": fmt.Sprint(i)}
		if i%5 == 0 {
			tags["cluster"] = "green"
		}
		want = append(want, newInstance(t, c, fmt.Sprintf("node-%02d", i), tags).ID)
	}

	var got []string
	token := ""
	pages := 0
	for {
		p, err := c.ListInstancesPage(ctx, client.ListOptions{PageSize: 10, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(p.Items) > 10 {
			t.Fatalf("page of %d items, page size 10", len(p.Items))
		}
		for _, i := range p.Items {
			got = append(got, i.ID)
		}
		if token = p.NextPageToken; token == "" {
			break
		}
	}
	if pages != 3 {
		t.Errorf("%d pages, want 3", pages)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paged IDs (-want +got):\n%s", diff)
	}
	all, err := c.ListInstances(ctx, client.ListOptions{PageSize: 7})
	if err != nil || len(all) != 25 {
		t.Fatalf("ListInstances: %d items, %v", len(all), err)
	}

	for _, tc := range []struct {
		name string
		o    client.ListOptions
		want int
	}{
		{"tag value", client.ListOptions{Tags: map[string]string{"cluster": "green"}}, 5},
		{"tag value paged", client.ListOptions{Tags: map[string]string{"cluster": "blue"}, PageSize: 4}, 20},
		{"two tags", client.ListOptions{Tags: map[string]string{"cluster": "green", "index": "10"}}, 1},
		{"tag key only", client.ListOptions{Tags: map[string]string{"index": ""}}, 25},
		{"missing tag", client.ListOptions{Tags: map[string]string{"zone": ""}}, 0},
		{"name", client.ListOptions{Name: "node-07"}, 1},
		{"name and matching tag", client.ListOptions{Name: "node-05", Tags: map[string]string{"cluster": "green"}}, 1},
		{"name and other tag", client.ListOptions{Name: "node-07", Tags: map[string]string{"cluster": "green"}}, 0},
		{"unknown name", client.ListOptions{Name: "node-99"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items, err := c.ListInstances(ctx, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if len(items) != tc.want {
				t.Fatalf("%d items, want %d", len(items), tc.want)
			}
			for _, i := range items {
				if tc.o.Name != "" && i.Name != tc.o.Name {
					t.Errorf("name filter returned %s", i.Name)
				}
				for k, v := range tc.o.Tags {
					if got, ok := i.Tags[k]; !ok || (v != "" && got != v) {
						t.Errorf("tag filter %s=%s returned %v", k, v, i.Tags)
					}
				}
			}
		})
	}
	// An empty list is an empty array, not null.
	status, _, body := raw(t, mc, "GET", "/v1/routes", "", nil)
	if status != 200 || !strings.Contains(string(body), `"items":[]`) {
		t.Errorf("empty list: %d %s", status, body)
	}
}

func TestRateLimit(t *testing.T) {
	mc := minicloudtest.Start(t, minicloudtest.Options{RateLimit: 0.2, Burst: 3, ExtraTokens: []string{"second-token", "admin-token"}, UnlimitedTokens: []string{"admin-token"}})
	ctx := context.Background()
	for i := range 3 {
		if _, err := mc.Client.ListInstances(ctx, client.ListOptions{}); err != nil {
			t.Fatalf("request %d within burst: %v", i, err)
		}
	}
	_, err := mc.Client.ListInstances(ctx, client.ListOptions{})
	if !client.IsThrottled(err) {
		t.Fatalf("request over the limit: %v, want throttled", err)
	}
	// 0.2/s: the next token is about 5s away.
	if d, ok := client.RetryAfter(err); !ok || d < 2*time.Second || d > 5*time.Second {
		t.Fatalf("retry after %v (%v), want about 5s", d, ok)
	}
	status, h, body := raw(t, mc, "GET", "/v1/instances", "", nil)
	if status != http.StatusTooManyRequests || h.Get("Retry-After") == "" || errorCode(t, body) != api.CodeThrottled {
		t.Fatalf("raw over-limit request: %d %v %s", status, h, body)
	}
	// Operations endpoints are not limited, and count the throttling.
	st, err := mc.Client.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Throttled != 2 || st.ThrottledByOperation["GET /v1/instances"] != 2 || st.Requests["GET /v1/instances"] != 5 {
		t.Fatalf("stats %+v, want 5 requests and 2 throttled", st)
	}
	// Limits are per token.
	other, err := client.New(mc.URL, "second-token")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.ListInstances(ctx, client.ListOptions{}); err != nil {
		t.Fatalf("another token is throttled too: %v", err)
	}
	// An unlimited token is never throttled.
	admin, err := client.New(mc.URL, "admin-token")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := admin.ListInstances(ctx, client.ListOptions{}); err != nil {
			t.Fatalf("unlimited token, request %d: %v", i, err)
		}
	}
}

func TestUnlimitedTokenMustBeAToken(t *testing.T) {
	cfg := minicloud.DefaultConfig()
	cfg.StateDir = t.TempDir()
	cfg.Tokens = []string{"a"}
	cfg.UnlimitedTokens = []string{"b"}
	if _, err := minicloud.NewServer(cfg); err == nil || !strings.Contains(err.Error(), "unlimited token") {
		t.Fatalf("NewServer with an unknown unlimited token: %v, want an error naming it", err)
	}
}

func TestFaults(t *testing.T) {
	mc := minicloudtest.Start(t, minicloudtest.Options{})
	ctx := context.Background()
	c := mc.Client
	inst := newInstance(t, c, "n", nil)

	if _, err := c.SetFaults(ctx, api.Faults{ErrorRate: 1, Operations: []string{"GET /v1/instances/{id}"}}); err != nil {
		t.Fatal(err)
	}
	_, err := c.GetInstance(ctx, inst.ID)
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 500 {
		t.Fatalf("GET with error_rate 1: %v, want 500", err)
	}
	if _, err := c.ListInstances(ctx, client.ListOptions{}); err != nil {
		t.Fatalf("an operation without faults failed: %v", err)
	}

	if _, err := c.SetFaults(ctx, api.Faults{ThrottleRate: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListInstances(ctx, client.ListOptions{}); !client.IsThrottled(err) {
		t.Fatalf("throttle_rate 1: %v, want throttled", err)
	}
	if d, _ := client.RetryAfter(err); d <= 0 {
		// RetryAfter of the err above.
		_, err = c.ListInstances(ctx, client.ListOptions{})
		if d, _ := client.RetryAfter(err); d <= 0 {
			t.Fatalf("injected throttle without Retry-After: %v", err)
		}
	}

	if _, err := c.SetFaults(ctx, api.Faults{UnauthorizedRate: 1, Operations: []string{"GET /v1/instances/{id}"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetInstance(ctx, inst.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Code != api.CodeUnauthorized || client.IsRetryable(err) {
		t.Fatalf("GET with unauthorized_rate 1: %v, want 401 %s", err, api.CodeUnauthorized)
	}
	if _, err := c.SetFaults(ctx, api.Faults{UnauthorizedRate: 1.5}); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "unauthorized_rate") {
		t.Fatalf("unauthorized_rate 1.5: %v, want 400 naming unauthorized_rate", err)
	}

	f, err := c.SetFaults(ctx, api.Faults{LatencyMS: 300})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Faults(ctx); err != nil || !cmp.Equal(f, got) {
		t.Fatalf("GET faults %+v, %v; want %+v", got, err, f)
	}
	begin := time.Now()
	if _, err := c.GetInstance(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took < 300*time.Millisecond {
		t.Fatalf("request with latency_ms 300 answered after %v", took)
	}
	if _, err := c.SetFaults(ctx, api.Faults{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetInstance(ctx, inst.ID); err != nil {
		t.Fatalf("after clearing faults: %v", err)
	}
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Errors != 1 || st.Throttled < 1 || st.Unauthorized != 1 {
		t.Fatalf("stats %+v, want 1 error, throttling and 1 unauthorized", st)
	}
}

func TestStats(t *testing.T) {
	mc := minicloudtest.Start(t, minicloudtest.Options{ExtraTokens: []string{"second-token"}})
	ctx := context.Background()
	c := mc.Client
	inst := newInstance(t, c, "n", nil)
	for range 3 {
		if _, err := c.GetInstance(ctx, inst.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.ListInstances(ctx, client.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"POST /v1/instances": 1, "GET /v1/instances/{id}": 3, "GET /v1/instances": 1}
	if diff := cmp.Diff(want, st.Requests); diff != "" || st.Total != 5 {
		t.Errorf("requests (-want +got):\n%s total %d", diff, st.Total)
	}
	// Per-token counts tell two clients of one cloud apart.
	other, err := client.New(mc.URL, "second-token")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Regions(ctx); err != nil {
		t.Fatal(err)
	}
	mine, err := c.TokenStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, mine.Requests); diff != "" || mine.Total != 5 {
		t.Errorf("token stats (-want +got):\n%s total %d", diff, mine.Total)
	}
	theirs, err := other.TokenStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int64{"GET /v1/regions": 1}, theirs.Requests); diff != "" {
		t.Errorf("second token's stats (-want +got):\n%s", diff)
	}
	if all, _ := c.Stats(ctx); all.Total != 6 {
		t.Errorf("global total %d, want 6", all.Total)
	}
	if err := c.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	if mine, _ = c.TokenStats(ctx); mine.Total != 0 {
		t.Errorf("token stats after reset: %+v", mine)
	}
	st, err = c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Total != 0 || len(st.Requests) != 0 {
		t.Errorf("after reset: %+v", st)
	}
}

func TestRoutes(t *testing.T) {
	mc := minicloudtest.Start(t, minicloudtest.Options{})
	ctx := context.Background()
	c := mc.Client
	a := newInstance(t, c, "a", nil)
	b := newInstance(t, c, "b", nil)
	ra, err := c.CreateRoute(ctx, api.RouteCreate{DestinationCIDR: "10.244.0.0/24", TargetInstanceID: a.ID, Tags: map[string]string{"cluster": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	// Host bits are masked.
	rb, err := c.CreateRoute(ctx, api.RouteCreate{DestinationCIDR: "10.244.1.7/24", TargetInstanceID: b.ID})
	if err != nil {
		t.Fatal(err)
	}
	if rb.DestinationCIDR != "10.244.1.0/24" || rb.State != api.RouteActive {
		t.Errorf("route %+v", rb)
	}
	got, err := c.GetRoute(ctx, ra.ID)
	if err != nil || !cmp.Equal(ra, got) {
		t.Fatalf("GET route %+v, %v; want %+v", got, err, ra)
	}
	tagged, err := c.ListRoutes(ctx, client.ListOptions{Tags: map[string]string{"cluster": "x"}})
	if err != nil || len(tagged) != 1 || tagged[0].ID != ra.ID {
		t.Fatalf("routes tagged cluster=x: %+v, %v", tagged, err)
	}
	if err := c.DeleteInstance(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.GetRoute(ctx, rb.ID); got.State != api.RouteBlackhole {
		t.Errorf("route to a deleted instance: state %q, want blackhole", got.State)
	}
	if err := c.DeleteRoute(ctx, rb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetRoute(ctx, rb.ID); !client.IsNotFound(err) {
		t.Fatalf("GET deleted route: %v", err)
	}
	all, err := c.ListRoutes(ctx, client.ListOptions{})
	if err != nil || len(all) != 1 || all[0].ID != ra.ID {
		t.Fatalf("routes after delete: %+v, %v", all, err)
	}
	// The destination is free again.
	if _, err := c.CreateRoute(ctx, api.RouteCreate{DestinationCIDR: "10.244.1.0/24", TargetInstanceID: a.ID}); err != nil {
		t.Fatal(err)
	}
}

func TestLoadBalancerAPI(t *testing.T) {
	mc := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: 200 * time.Millisecond})
	ctx := context.Background()
	c := mc.Client
	inst := newInstance(t, c, "n", nil)
	spec := api.LoadBalancerSpec{
		Name:         "web",
		Tags:         map[string]string{"service": "default/web"},
		Listeners:    []api.Listener{{Protocol: "TCP", Port: 80, TargetPort: 30080}, {Protocol: "UDP", Port: 53, TargetPort: 30053}},
		Targets:      []api.Target{{InstanceID: inst.ID}, {IP: "127.0.0.9"}},
		HealthCheck:  &api.HealthCheck{Protocol: "HTTP", Port: 10256, Path: "/healthz", IntervalSeconds: 1},
		SourceRanges: []string{"127.0.0.0/8", "10.1.2.3/16"},
	}
	lb, err := c.CreateLoadBalancer(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if lb.State != api.LBProvisioning || !mc.Config.VIPCIDR.Contains(netip.MustParseAddr(lb.VIP)) {
		t.Fatalf("new LB %+v", lb)
	}
	if !slices.Equal(lb.SourceRanges, []string{"127.0.0.0/8", "10.1.0.0/16"}) {
		t.Errorf("source ranges %v not normalized", lb.SourceRanges)
	}
	if len(lb.TargetHealth) != 2 || lb.TargetHealth[0].State != api.HealthUnknown {
		t.Errorf("target health while provisioning: %+v", lb.TargetHealth)
	}
	active := mc.WaitLoadBalancer(t, lb.ID, minicloudtest.Active)
	if active.TargetHealth[0].IP != inst.PrivateIP || active.TargetHealth[1].IP != "127.0.0.9" {
		t.Errorf("target health IPs: %+v", active.TargetHealth)
	}

	byName, err := c.ListLoadBalancers(ctx, client.ListOptions{Name: "web"})
	if err != nil || len(byName) != 1 || byName[0].ID != lb.ID {
		t.Fatalf("list by name: %+v, %v", byName, err)
	}
	byTag, err := c.ListLoadBalancers(ctx, client.ListOptions{Tags: map[string]string{"service": "default/web"}})
	if err != nil || len(byTag) != 1 {
		t.Fatalf("list by tag: %+v, %v", byTag, err)
	}
	summary, err := c.ListLoadBalancers(ctx, client.ListOptions{Name: "web", Summary: true})
	if err != nil || len(summary) != 1 || summary[0].State != api.LBActive || summary[0].VIP != lb.VIP || len(summary[0].Targets) != 0 || len(summary[0].TargetHealth) != 0 {
		t.Fatalf("summary listing: %+v, %v; want the load balancer without targets", summary, err)
	}
	if status, _, body := raw(t, mc, "GET", "/v1/load-balancers?view=everything", "", nil); status != http.StatusBadRequest || !strings.Contains(string(body), "view must be") {
		t.Errorf("unknown view: %d %s; want 400 naming the parameter", status, body)
	}
	// One load balancer's GET, and a create or an update, answer in the
	// summary view too: the state, VIP, listeners and targets digest, no
	// targets or health.
	full, err := c.GetLoadBalancer(ctx, lb.ID)
	if err != nil || len(full.Targets) != 2 || full.TargetsDigest != api.TargetsDigest(full.Targets, full.Listeners, full.BackendPools) {
		t.Fatalf("GET: %+v, %v; want both targets and their digest", full, err)
	}
	brief, err := c.GetLoadBalancer(ctx, lb.ID, client.SummaryView())
	if err != nil || brief.State != api.LBActive || brief.VIP != lb.VIP || len(brief.Listeners) != len(full.Listeners) ||
		len(brief.Targets) != 0 || len(brief.TargetHealth) != 0 || brief.TargetsDigest != full.TargetsDigest {
		t.Fatalf("GET in the summary view: %+v, %v; want no targets, the full view's digest", brief, err)
	}
	for _, method := range []string{"GET", "PUT"} {
		if status, _, body := raw(t, mc, method, "/v1/load-balancers/"+lb.ID+"?view=everything", "", nil); status != http.StatusBadRequest || !strings.Contains(string(body), "view must be") {
			t.Errorf("%s of one load balancer with an unknown view: %d %s; want 400 naming the parameter", method, status, body)
		}
	}
	resent, err := c.UpdateLoadBalancer(ctx, lb.ID, api.LoadBalancerSpec{Tags: full.Tags, Listeners: full.Listeners, Targets: full.Targets,
		HealthCheck: full.HealthCheck, SourceRanges: full.SourceRanges}, client.SummaryView())
	if err != nil || resent.ID != lb.ID || len(resent.Targets) != 0 || len(resent.TargetHealth) != 0 || resent.TargetsDigest != full.TargetsDigest {
		t.Fatalf("update in the summary view: %+v, %v", resent, err)
	}
	other, err := c.CreateLoadBalancer(ctx, api.LoadBalancerSpec{Name: "brief", Listeners: []api.Listener{{Protocol: "TCP", Port: 80, TargetPort: 30080}},
		Targets: []api.Target{{InstanceID: inst.ID}}}, client.SummaryView())
	if err != nil || other.VIP == "" || len(other.Targets) != 0 || len(other.TargetHealth) != 0 || other.TargetsDigest != api.TargetsDigest([]api.Target{{InstanceID: inst.ID}}, nil, nil) {
		t.Fatalf("create in the summary view: %+v, %v", other, err)
	}
	if err := c.DeleteLoadBalancer(ctx, other.ID); err != nil {
		t.Fatal(err)
	}

	updated, err := c.UpdateLoadBalancer(ctx, lb.ID, api.LoadBalancerSpec{
		Tags:      map[string]string{"service": "default/web", "v": "2"},
		Listeners: []api.Listener{{Protocol: "TCP", Port: 443, TargetPort: 30443}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if updated.VIP != lb.VIP || updated.Name != "web" || len(updated.Listeners) != 1 || len(updated.Targets) != 0 || updated.HealthCheck != nil || updated.SourceRanges != nil || updated.Tags["v"] != "2" {
		t.Fatalf("after replace: %+v", updated)
	}
	if err := c.DeleteLoadBalancer(ctx, lb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetLoadBalancer(ctx, lb.ID); !client.IsNotFound(err) {
		t.Fatalf("GET deleted LB: %v", err)
	}
	// A deleted LB's name can be used again; deleting a provisioning LB
	// keeps it from ever activating.
	again, err := c.CreateLoadBalancer(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteLoadBalancer(ctx, again.ID); err != nil {
		t.Fatal(err)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	mc := minicloudtest.Start(t, minicloudtest.Options{})
	inst := newInstance(t, mc.Client, "node-1", nil)
	for _, tc := range []struct{ method, path, allow string }{
		{"PATCH", "/v1/instances/" + inst.ID, "GET, HEAD, DELETE"},
		{"DELETE", "/v1/instances", "GET, HEAD, POST"},
		{"GET", "/v1/instances/" + inst.ID + "/stop", "POST"},
		{"POST", "/v1/load-balancers/lb-000000000001", "GET, HEAD, PUT, DELETE"},
		{"DELETE", "/v1/_faults", "GET, HEAD, PUT"},
	} {
		status, h, body := raw(t, mc, tc.method, tc.path, "", nil)
		if status != http.StatusMethodNotAllowed {
			t.Fatalf("%s %s: status %d, want 405: %s", tc.method, tc.path, status, body)
		}
		if got := h.Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
		}
		if got := errorCode(t, body); got != api.CodeMethod {
			t.Errorf("%s %s: code %q, want %q", tc.method, tc.path, got, api.CodeMethod)
		}
	}
	// The instance is untouched, and a path no method serves is still 404.
	if _, err := mc.Client.GetInstance(context.Background(), inst.ID); err != nil {
		t.Fatal(err)
	}
	if status, _, body := raw(t, mc, "PATCH", "/v1/volumes", "", nil); status != http.StatusNotFound {
		t.Fatalf("PATCH /v1/volumes: status %d, want 404: %s", status, body)
	}
}

// manyTags returns n distinct tags.
func manyTags(n int) map[string]string {
	tags := map[string]string{}
	for i := range n {
		tags[fmt.Sprintf("k%d", i)] = "v"
	}
	return tags
}

func TestTagAndLabelLimits(t *testing.T) {
	mc := minicloudtest.Start(t, minicloudtest.Options{})
	ctx := context.Background()
	c := mc.Client
	inst := newInstance(t, c, "node-0", nil)
	listeners := []api.Listener{{Protocol: "TCP", Port: 80, TargetPort: 8080}}
	labels := func(n int) map[string]string {
		l := map[string]string{}
		for i := range n {
			l[fmt.Sprintf("example.com/l%d", i)] = "v"
		}
		return l
	}
	atLimit := map[string]string{strings.Repeat("k", api.MaxTagKeyLen): strings.Repeat("v", api.MaxTagValueLen)}

	// At the limits everything is accepted.
	if _, err := c.CreateInstance(ctx, api.InstanceCreate{Name: "full", Type: "mc.small", Zone: "mc-central-a", Tags: manyTags(api.MaxTags), Labels: labels(api.MaxLabels)}); err != nil {
		t.Fatalf("instance with %d tags and %d labels: %v", api.MaxTags, api.MaxLabels, err)
	}
	if _, err := c.CreateInstance(ctx, api.InstanceCreate{Name: "long", Type: "mc.small", Zone: "mc-central-a", Tags: atLimit}); err != nil {
		t.Fatalf("instance with a %d-byte key and %d-byte value: %v", api.MaxTagKeyLen, api.MaxTagValueLen, err)
	}
	lb, err := c.CreateLoadBalancer(ctx, api.LoadBalancerSpec{Name: "lb-full", Listeners: listeners, Tags: manyTags(api.MaxTags)})
	if err != nil {
		t.Fatalf("load balancer with %d tags: %v", api.MaxTags, err)
	}

	// One over is a 400 whose message names the limit.
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"instance tags", func() error {
			_, err := c.CreateInstance(ctx, api.InstanceCreate{Name: "a", Type: "mc.small", Zone: "mc-central-a", Tags: manyTags(api.MaxTags + 1)})
			return err
		}(), "at most 50 tags"},
		{"instance tag key", func() error {
			_, err := c.CreateInstance(ctx, api.InstanceCreate{Name: "a", Type: "mc.small", Zone: "mc-central-a", Tags: map[string]string{strings.Repeat("k", api.MaxTagKeyLen+1): ""}})
			return err
		}(), "1-128 bytes"},
		{"instance tag value", func() error {
			_, err := c.CreateInstance(ctx, api.InstanceCreate{Name: "a", Type: "mc.small", Zone: "mc-central-a", Tags: map[string]string{"k": strings.Repeat("v", api.MaxTagValueLen+1)}})
			return err
		}(), "at most 256"},
		{"instance labels", func() error {
			_, err := c.CreateInstance(ctx, api.InstanceCreate{Name: "a", Type: "mc.small", Zone: "mc-central-a", Labels: labels(api.MaxLabels + 1)})
			return err
		}(), "at most 50 labels"},
		{"load balancer tags", func() error {
			_, err := c.CreateLoadBalancer(ctx, api.LoadBalancerSpec{Name: "lb-a", Listeners: listeners, Tags: manyTags(api.MaxTags + 1)})
			return err
		}(), "at most 50 tags"},
		{"load balancer update tags", func() error {
			_, err := c.UpdateLoadBalancer(ctx, lb.ID, api.LoadBalancerSpec{Listeners: listeners, Tags: manyTags(api.MaxTags + 1)})
			return err
		}(), "at most 50 tags"},
		{"route tags", func() error {
			_, err := c.CreateRoute(ctx, api.RouteCreate{DestinationCIDR: "10.244.0.0/24", TargetInstanceID: inst.ID, Tags: manyTags(api.MaxTags + 1)})
			return err
		}(), "at most 50 tags"},
	} {
		var ce *client.Error
		if !errors.As(tc.err, &ce) || ce.StatusCode != http.StatusBadRequest || ce.Code != api.CodeInvalid || !strings.Contains(ce.Message, tc.want) {
			t.Errorf("%s over the limit: %v, want a 400 %s saying %q", tc.name, tc.err, api.CodeInvalid, tc.want)
		}
	}
	insts, err := c.ListInstances(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != 3 {
		t.Errorf("%d instances, want 3: rejected requests created some", len(insts))
	}
}
