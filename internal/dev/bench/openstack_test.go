package bench

import "testing"

func TestOpenStackAPI(t *testing.T) {
	for op, want := range map[string][3]string{
		"GET /compute/v2.1/servers/{id}":                      {"compute", "GET", "true"},
		"POST /identity/v3/auth/tokens":                       {"identity", "POST", "true"},
		"GET /network/v2.0/ports":                             {"network", "GET", "true"},
		"PUT /load-balancer/v2/lbaas/pools/{pool}/members":    {"load-balancer", "PUT", "true"},
		"GET /v1/instances":                                   {"", "", "false"},
		"GET /computer/x":                                     {"", "", "false"},
		"no-method":                                           {"", "", "false"},
		"DELETE /load-balancer/v2.0/lbaas/loadbalancers/{id}": {"load-balancer", "DELETE", "true"},
	} {
		api, method, ok := openstackAPI(op)
		if got := [3]string{api, method, map[bool]string{true: "true", false: "false"}[ok]}; got != want {
			t.Errorf("openstackAPI(%q) = %v, want %v", op, got, want)
		}
	}
}

func TestIsBackendUpdate(t *testing.T) {
	for op, want := range map[string]bool{
		"PUT /v1/load-balancers/{id}":                                true,
		"PUT /load-balancer/v2/lbaas/pools/{pool}/members":           true,
		"POST /load-balancer/v2.0/lbaas/pools/{pool}/members":        true,
		"DELETE /load-balancer/v2.0/lbaas/pools/{pool}/members/{id}": true,
		"GET /load-balancer/v2/lbaas/pools/{pool}/members":           false,
		"PUT /load-balancer/v2/lbaas/loadbalancers/{id}":             false,
		"GET /v1/load-balancers/{id}":                                false,
	} {
		if got := isBackendUpdate(op); got != want {
			t.Errorf("isBackendUpdate(%q) = %v, want %v", op, got, want)
		}
	}
}

func TestOpMetricsSumsPerAPIAndMethod(t *testing.T) {
	m := Metrics{}
	opMetrics(m, "calls", 6, map[string]int64{
		"GET /compute/v2.1/servers/{id}": 2,
		"GET /compute/v2.1/flavors/{id}": 1,
		"POST /identity/v3/auth/tokens":  1,
		"GET /v1/instances":              2,
	}, 2)
	for k, want := range map[string]float64{
		"calls": 12, "calls compute GET": 6, "calls identity POST": 2,
		"calls GET /compute/v2.1/servers/{id}": 4, "calls GET /v1/instances": 4,
	} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v (all: %v)", k, m[k], want, m)
		}
	}
	if _, ok := m["calls v1 GET"]; ok {
		t.Errorf("minicloud's own API summed as an OpenStack API: %v", m)
	}
}
