package minicloud

import (
	"encoding/json"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/stratus-ccm/stratus/minicloud/api"
)

// decodeAndValidate runs the request decoding and validation of one body
// kind (or, for kind 5, a list query string), as the handlers do, and
// returns the accepted value.
func decodeAndValidate(kind uint8, body []byte) (any, error) {
	switch kind % 7 {
	case 0:
		var in api.InstanceCreate
		if err := decodeStrict(body, &in); err != nil {
			return nil, err
		}
		return &in, validateInstanceCreate(&in)
	case 1, 2:
		var in api.LoadBalancerSpec
		if err := decodeStrict(body, &in); err != nil {
			return nil, err
		}
		return &in, validateLBSpec(&in, kind%7 == 1)
	case 3:
		var in api.RouteCreate
		if err := decodeStrict(body, &in); err != nil {
			return nil, err
		}
		return &in, validateRouteCreate(&in)
	case 6:
		var in api.BackendPoolSpec
		if err := decodeStrict(body, &in); err != nil {
			return nil, err
		}
		return &in, validatePoolSpec(&in, true)
	case 5:
		v, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, errInvalid("query: %v", err)
		}
		q, err := parseListQuery(v, instancePrefix, true)
		return &q, err
	default:
		var in api.Faults
		if err := decodeStrict(body, &in); err != nil {
			return nil, err
		}
		return &in, validateFaultRates(&in)
	}
}

// FuzzDecodeRequest checks that no body crashes decoding, that every
// rejection is a 400 with a message, that accepted values keep the API's
// invariants, and that validation is stable: an accepted value, encoded and
// decoded again, is accepted unchanged. Seeds: testdata/fuzz/FuzzDecodeRequest.
func FuzzDecodeRequest(f *testing.F) {
	f.Add(uint8(0), []byte(`{"name":"n1","type":"mc.small","zone":"mc-central-a","public_ip":true,"tags":{"k":"v"}}`))
	f.Add(uint8(1), []byte(`{"name":"web","listeners":[{"protocol":"TCP","port":80,"target_port":30080}],"targets":[{"instance_id":"i-1"},{"ip":"10.0.0.1"}],"health_check":{"protocol":"HTTP","port":10256,"path":"/healthz","interval_seconds":5},"source_ranges":["10.0.0.7/8"]}`))
	f.Add(uint8(1), []byte(`{"name":"web","listeners":[{"protocol":"TCP","port":80,"target_port":30080}],"health_check":{"protocol":"TCP","interval_seconds":5,"timeout_seconds":3,"unhealthy_threshold":4},"algorithm":"source_ip","idle_timeout_seconds":60,"proxy_protocol":true}`))
	f.Add(uint8(2), []byte(`{"listeners":[{"protocol":"UDP","port":53,"target_port":30053}]}`))
	f.Add(uint8(3), []byte(`{"destination_cidr":"10.244.0.0/24","target_instance_id":"i-1"}`))
	f.Add(uint8(4), []byte(`{"error_rate":0.1,"throttle_rate":0.2,"latency_ms":50,"operations":["GET /v1/instances"]}`))
	f.Add(uint8(6), []byte(`{"name":"k8s-dev-nodes","tags":{"stratus/cluster":"dev"},"targets":[{"instance_id":"i-1"},{"ip":"10.0.0.1"}]}`))
	f.Add(uint8(1), []byte(`{"name":"web","listeners":[{"protocol":"TCP","port":80,"target_port":30080}],"backend_pools":["k8s-dev-nodes"]}`))
	f.Add(uint8(5), []byte(`page_size=10&page_token=aS0wMDAwMDAwMDAwMDE&name=n1&tag=cluster%3Ddev&tag=role`))
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		v, err := decodeAndValidate(kind, body)
		if err != nil {
			ae, ok := err.(*apiError)
			if !ok || ae.status != 400 || ae.msg == "" {
				t.Fatalf("rejection %v is not a 400 with a message", err)
			}
			return
		}
		checkInvariants(t, v)
		if _, ok := v.(*listQuery); ok {
			return
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		v2, err := decodeAndValidate(kind, again)
		if err != nil {
			t.Fatalf("accepted %s, then rejected its encoding %s: %v", body, again, err)
		}
		if third, _ := json.Marshal(v2); string(third) != string(again) {
			t.Fatalf("validation not stable: %s became %s", again, third)
		}
	})
}

func checkInvariants(t *testing.T, v any) {
	t.Helper()
	switch in := v.(type) {
	case *api.InstanceCreate:
		if in.Name == "" || !knownType(in.Type) || !knownZone(in.Zone) {
			t.Fatalf("accepted instance %+v", in)
		}
		for k, v := range in.Labels {
			if len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
				t.Fatalf("accepted label %q=%q", k, v)
			}
		}
	case *api.LoadBalancerSpec:
		if len(in.Listeners) == 0 {
			t.Fatal("accepted a load balancer without listeners")
		}
		for _, l := range in.Listeners {
			if l.Port < 1 || l.Port > 65535 || l.TargetPort < 1 || l.TargetPort > 65535 || (l.Protocol != "TCP" && l.Protocol != "UDP") {
				t.Fatalf("accepted listener %+v", l)
			}
		}
		checkTargetInvariants(t, in.Targets)
		if len(in.BackendPools) > api.MaxBackendPoolsPerLB || slices.Contains(in.BackendPools, "") {
			t.Fatalf("accepted backend pools %q", in.BackendPools)
		}
		for _, r := range in.SourceRanges {
			if p, err := netip.ParsePrefix(r); err != nil || p.Masked() != p {
				t.Fatalf("accepted source range %q", r)
			}
		}
	case *api.BackendPoolSpec:
		if in.Name == "" {
			t.Fatal("accepted a backend pool without a name")
		}
		checkTargetInvariants(t, in.Targets)
	case *api.RouteCreate:
		if p, err := netip.ParsePrefix(in.DestinationCIDR); err != nil || p.Masked() != p {
			t.Fatalf("accepted destination %q", in.DestinationCIDR)
		}
	case *listQuery:
		if in.pageSize < 1 || in.pageSize > maxPageSize || (in.after != "" && !strings.HasPrefix(in.after, instancePrefix)) {
			t.Fatalf("accepted query %+v", in)
		}
		for _, f := range in.tags {
			if f.key == "" {
				t.Fatalf("accepted empty tag key in %+v", in)
			}
		}
	case *api.Faults:
		if in.ErrorRate < 0 || in.ErrorRate > 1 || in.ThrottleRate < 0 || in.ThrottleRate > 1 || in.UnauthorizedRate < 0 || in.UnauthorizedRate > 1 || in.LatencyMS < 0 {
			t.Fatalf("accepted faults %+v", in)
		}
	}
}

// checkTargetInvariants fails t unless every target names exactly one of
// an instance and an address, none twice.
func checkTargetInvariants(t *testing.T, targets []api.Target) {
	t.Helper()
	seen := map[api.Target]bool{}
	for _, tg := range targets {
		if (tg.IP == "") == (tg.InstanceID == "") || seen[tg] {
			t.Fatalf("accepted target %+v", tg)
		}
		seen[tg] = true
		if tg.IP != "" {
			if _, err := netip.ParseAddr(tg.IP); err != nil {
				t.Fatalf("accepted target IP %q", tg.IP)
			}
		}
	}
}
