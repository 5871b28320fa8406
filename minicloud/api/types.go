// Package api holds the wire types of the minicloud HTTP API: the JSON bodies
// the server reads and writes and the Go client sends and returns. Field names
// are snake_case on the wire; docs/minicloud.md is the reference.
package api

import (
	"slices"
	"time"
)

// Region is the single region minicloud serves and its zones.
type Region struct {
	Name  string   `json:"name"`
	Zones []string `json:"zones"`
}

// InstanceType describes a machine size.
type InstanceType struct {
	Name     string `json:"name"`
	VCPUs    int    `json:"vcpus"`
	MemoryMB int    `json:"memory_mb"`
}

// Instance states.
const (
	InstanceRunning = "running"
	InstanceStopped = "stopped"
)

// InstanceCreate is the body of POST /v1/instances.
type InstanceCreate struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Zone     string `json:"zone"`
	PublicIP bool   `json:"public_ip,omitempty"`
	// IPv6 asks for a private IPv6 address besides the IPv4 one (a
	// dual-stack instance).
	IPv6 bool              `json:"ipv6,omitempty"`
	Tags map[string]string `json:"tags,omitempty"`
	// Labels are Kubernetes-style labels (qualified-name keys, label
	// values) the instance carries; a cloud provider may report them as a
	// Node's additional labels.
	Labels map[string]string `json:"labels,omitempty"`
}

// Instance is a virtual machine.
type Instance struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Type      string `json:"type"`
	Region    string `json:"region"`
	Zone      string `json:"zone"`
	State     string `json:"state"`
	PrivateIP string `json:"private_ip"`
	// PrivateIPv6 is the instance's private IPv6 address, when it was
	// created with IPv6.
	PrivateIPv6 string            `json:"private_ipv6,omitempty"`
	PublicIP    string            `json:"public_ip,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	CreatedAt   time.Time         `json:"created_at"`
}

// Protocols of listeners and health checks.
const (
	ProtocolTCP  = "TCP"
	ProtocolUDP  = "UDP"
	ProtocolHTTP = "HTTP"
)

// Load balancer states.
const (
	LBProvisioning = "provisioning"
	LBActive       = "active"
)

// Views of a load-balancer listing (query parameter "view"): full (the
// default) or summary, without targets and target health.
const (
	ViewFull    = "full"
	ViewSummary = "summary"
)

// Target health states.
const (
	HealthUnknown   = "unknown"
	HealthHealthy   = "healthy"
	HealthUnhealthy = "unhealthy"
)

// Listener is one front-end port of a load balancer.
type Listener struct {
	Protocol   string `json:"protocol"`
	Port       int    `json:"port"`
	TargetPort int    `json:"target_port"`
	// Targets, when not empty, are the targets of this listener instead
	// of all the load balancer's; each must be one of the load balancer's
	// Targets (which carry the health).
	Targets []Target `json:"targets,omitempty"`
	// SourceRanges, when not empty, are the sources this listener admits
	// instead of the load balancer's SourceRanges.
	SourceRanges []string `json:"source_ranges,omitempty"`
}

// Target is a back end of a load balancer: an instance (its private IP) or a
// raw IP address. Exactly one of the fields is set.
type Target struct {
	InstanceID string `json:"instance_id,omitempty"`
	IP         string `json:"ip,omitempty"`
}

// HealthCheck says how targets are probed: TCP connects, HTTP expects 200
// from GET Path. Port 0 means the first listener's target port;
// IntervalSeconds 0 means 5 seconds (at most 300); TimeoutSeconds 0 means
// 2 seconds or the interval when that is shorter (at most 60, never more than
// the interval); UnhealthyThreshold 0 means 2 (at most 10).
type HealthCheck struct {
	Protocol        string `json:"protocol"`
	Port            int    `json:"port,omitempty"`
	Path            string `json:"path,omitempty"`
	IntervalSeconds int    `json:"interval_seconds,omitempty"`
	TimeoutSeconds  int    `json:"timeout_seconds,omitempty"`
	// UnhealthyThreshold is how many consecutive failed probes take a
	// healthy target out of rotation.
	UnhealthyThreshold int `json:"unhealthy_threshold,omitempty"`
}

// Load-balancing algorithms: how a new TCP connection or UDP session picks
// its target among the healthy ones. Empty means AlgorithmRoundRobin.
const (
	AlgorithmRoundRobin = "round_robin"
	// AlgorithmSourceIP sends every connection from one client address to
	// the same target while the set of healthy targets stays the same.
	AlgorithmSourceIP = "source_ip"
)

// LoadBalancerSpec is the body of POST /v1/load-balancers and of
// PUT /v1/load-balancers/{id} (where Name must be empty or unchanged).
type LoadBalancerSpec struct {
	Name         string            `json:"name,omitempty"`
	Tags         map[string]string `json:"tags,omitempty"`
	Listeners    []Listener        `json:"listeners"`
	Targets      []Target          `json:"targets,omitempty"`
	HealthCheck  *HealthCheck      `json:"health_check,omitempty"`
	SourceRanges []string          `json:"source_ranges,omitempty"`
	// Algorithm is one of the Algorithm* constants; empty is round robin.
	Algorithm string `json:"algorithm,omitempty"`
	// IdleTimeoutSeconds closes a TCP connection or ends a UDP session after
	// that long without traffic in either direction (1 to 3600); 0 means no
	// limit for TCP and 30 seconds for UDP.
	IdleTimeoutSeconds int `json:"idle_timeout_seconds,omitempty"`
	// ProxyProtocol sends a PROXY protocol v2 header, with the client's
	// address and port, at the start of every TCP connection to a target.
	ProxyProtocol bool `json:"proxy_protocol,omitempty"`
	// BackendPools names backend pools (at most MaxBackendPoolsPerLB) whose
	// members are targets of the load balancer besides Targets: listeners
	// without their own Targets send traffic to them, health checks probe
	// them, and a change of a pool's members reaches every load balancer
	// that names it without an update of the load balancer. A pool named
	// here must exist, and cannot be deleted while named.
	BackendPools []string `json:"backend_pools,omitempty"`
}

// TargetHealth is the observed health of one target.
type TargetHealth struct {
	Target Target `json:"target"`
	// IP is the address traffic is sent to (the instance's private IP for
	// instance targets); empty when the instance does not exist.
	IP     string `json:"ip,omitempty"`
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
}

// LoadBalancer is an L4 load balancer with a virtual IP.
type LoadBalancer struct {
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	VIP          string            `json:"vip"`
	State        string            `json:"state"`
	Tags         map[string]string `json:"tags,omitempty"`
	Listeners    []Listener        `json:"listeners"`
	Targets      []Target          `json:"targets"`
	HealthCheck  *HealthCheck      `json:"health_check,omitempty"`
	SourceRanges []string          `json:"source_ranges,omitempty"`
	// Algorithm, IdleTimeoutSeconds and ProxyProtocol are as in
	// LoadBalancerSpec.
	Algorithm          string `json:"algorithm,omitempty"`
	IdleTimeoutSeconds int    `json:"idle_timeout_seconds,omitempty"`
	ProxyProtocol      bool   `json:"proxy_protocol,omitempty"`
	// BackendPools is as in LoadBalancerSpec.
	BackendPools []string `json:"backend_pools,omitempty"`
	// TargetHealth is the health of every target the load balancer
	// serves: its own Targets, then its pools' members that are not among
	// them.
	TargetHealth []TargetHealth `json:"target_health"`
	// TargetsDigest is TargetsDigest of Targets, the listeners' targets
	// and BackendPools, in GET answers and listings (the summary view
	// too); empty elsewhere.
	TargetsDigest string    `json:"targets_digest,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// MaxBackendPoolsPerLB is how many backend pools one load balancer may name.
const MaxBackendPoolsPerLB = 16

// BackendPoolSpec is the body of POST /v1/backend-pools and of
// PUT /v1/backend-pools/{id} (where Name must be empty or unchanged): a
// named set of targets that load balancers share by naming it in their
// BackendPools, as GCE's instance groups and Azure's backend address pools.
type BackendPoolSpec struct {
	Name    string            `json:"name,omitempty"`
	Tags    map[string]string `json:"tags,omitempty"`
	Targets []Target          `json:"targets,omitempty"`
}

// BackendPool is a set of targets shared by load balancers.
type BackendPool struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Tags      map[string]string `json:"tags,omitempty"`
	Targets   []Target          `json:"targets"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
}

// Route states.
const (
	RouteActive = "active"
	// RouteBlackhole means the target instance no longer exists.
	RouteBlackhole = "blackhole"
)

// RouteCreate is the body of POST /v1/routes.
type RouteCreate struct {
	DestinationCIDR  string            `json:"destination_cidr"`
	TargetInstanceID string            `json:"target_instance_id"`
	Tags             map[string]string `json:"tags,omitempty"`
}

// Route sends a CIDR to an instance.
type Route struct {
	ID               string            `json:"id"`
	DestinationCIDR  string            `json:"destination_cidr"`
	TargetInstanceID string            `json:"target_instance_id"`
	State            string            `json:"state"`
	Tags             map[string]string `json:"tags,omitempty"`
	CreatedAt        time.Time         `json:"created_at"`
}

// List is one page of a list response.
type List[T any] struct {
	Items         []T    `json:"items"`
	NextPageToken string `json:"next_page_token,omitempty"`
}

// ErrorBody is the body of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong. Code is one of the Code* constants.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Limits on tags and labels, per resource. They bound what every listing
// carries; the numbers follow the big clouds' (50 tags per resource, keys of
// at most 128 bytes, values of at most 256).
const (
	MaxTags        = 50
	MaxTagKeyLen   = 128
	MaxTagValueLen = 256
	MaxLabels      = 50
)

// Error codes.
const (
	CodeInvalid      = "invalid_argument"   // 400
	CodeUnauthorized = "unauthenticated"    // 401
	CodeNotFound     = "not_found"          // 404
	CodeMethod       = "method_not_allowed" // 405
	CodeConflict     = "conflict"           // 409
	CodeThrottled    = "throttled"          // 429
	CodeInternal     = "internal"           // 500
)

// Stats is the body of GET /v1/_stats: calls since start or the last reset.
type Stats struct {
	// Requests counts authenticated requests per operation, keyed by
	// method and route pattern ("GET /v1/instances/{id}"), throttled ones
	// included.
	Requests map[string]int64 `json:"requests"`
	// Throttled counts requests answered 429, per operation.
	ThrottledByOperation map[string]int64 `json:"throttled_by_operation"`
	Total                int64            `json:"total"`
	Throttled            int64            `json:"throttled"`
	// Errors counts injected faults answered 500.
	Errors int64 `json:"errors"`
	// Unauthorized counts injected faults answered 401.
	Unauthorized int64     `json:"unauthorized"`
	Since        time.Time `json:"since"`
}

// Faults is the body of PUT /v1/_faults (and GET): injected misbehaviour.
// Rates are probabilities in [0,1]. When Operations is not empty only those
// operations ("GET /v1/instances") are affected.
type Faults struct {
	ErrorRate    float64 `json:"error_rate"`
	ThrottleRate float64 `json:"throttle_rate"`
	// UnauthorizedRate is the fraction of requests answered 401 as if their
	// (valid) token were rejected: the OpenStack dialect answers Keystone's
	// 401, also to a token request, so a client can neither use its token
	// nor get a new one.
	UnauthorizedRate float64  `json:"unauthorized_rate,omitempty"`
	LatencyMS        int      `json:"latency_ms"`
	Operations       []string `json:"operations,omitempty"`
	// HoldProvisioning keeps every provisioning load balancer provisioning
	// (a cloud whose provisioning never completes) while set; once
	// cleared they become active. Operations does not apply to it.
	HoldProvisioning bool `json:"hold_provisioning,omitempty"`
}

// ServedTargets are the targets some listener of lb sends traffic to, in
// lb.Targets' order: a listener's own Targets, or all of lb's for a
// listener without them. A load balancer without listeners serves none.
func (lb *LoadBalancer) ServedTargets() []Target {
	served := map[Target]bool{}
	for _, l := range lb.Listeners {
		if len(l.Targets) == 0 {
			return lb.Targets
		}
		for _, t := range l.Targets {
			served[t] = true
		}
	}
	var out []Target
	for _, t := range lb.Targets {
		if served[t] {
			out = append(out, t)
		}
	}
	return out
}

// SourcesOf are the source ranges listener l of lb admits, sorted: its own
// SourceRanges, or lb's when it has none; none means any source.
func (lb *LoadBalancer) SourcesOf(l Listener) []string {
	r := lb.SourceRanges
	if len(l.SourceRanges) > 0 {
		r = l.SourceRanges
	}
	out := append([]string{}, r...)
	slices.Sort(out)
	return out
}

// AdmittedSources are the source ranges every listener of lb admits
// (SourcesOf), lb's own without listeners. ok is false when two listeners
// admit different sources: then no one set describes the load balancer.
func (lb *LoadBalancer) AdmittedSources() (ranges []string, ok bool) {
	if len(lb.Listeners) == 0 {
		return lb.SourcesOf(Listener{}), true
	}
	ranges = lb.SourcesOf(lb.Listeners[0])
	for _, l := range lb.Listeners[1:] {
		if !slices.Equal(lb.SourcesOf(l), ranges) {
			return nil, false
		}
	}
	return ranges, true
}
