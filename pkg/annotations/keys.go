package annotations

import "time"

// The stratus Service annotations. Add new ones here; docs/annotations.md follows.
var (
	// LBHealthCheckInterval is how often the load balancer probes each backend.
	LBHealthCheckInterval = register(&Key[time.Duration]{
		Info: Info{
			Name:    Prefix + "load-balancer-health-check-interval",
			Type:    "duration",
			Range:   "1s to 5m",
			Example: "5s",
			Description: "How often the load balancer probes each backend node. With `externalTrafficPolicy: Local` " +
				"the probe is an HTTP GET of `/healthz` on `spec.healthCheckNodePort`; otherwise a TCP connect to " +
				"the node port. minicloud: default 5s, rounded up to whole seconds; a Service without a TCP port " +
				"and without `externalTrafficPolicy: Local` has no health check, and any health-check annotation " +
				"on it is an error.",
		},
		parse: durationIn(time.Second, 5*time.Minute),
	})

	// LBHealthCheckTimeout is how long one probe may take.
	LBHealthCheckTimeout = register(&Key[time.Duration]{
		Info: Info{
			Name:    Prefix + "load-balancer-health-check-timeout",
			Type:    "duration",
			Range:   "1s to 1m",
			Example: "3s",
			Description: "How long one health probe may take before it counts as failed. minicloud: default 2s " +
				"(or the interval, when that is shorter), rounded up to whole seconds; a timeout longer than the " +
				"interval is an error.",
		},
		parse: durationIn(time.Second, time.Minute),
	})

	// LBHealthCheckUnhealthyThreshold is how many failed probes take a backend out.
	LBHealthCheckUnhealthyThreshold = register(&Key[int]{
		Info: Info{
			Name:    Prefix + "load-balancer-health-check-unhealthy-threshold",
			Type:    "integer",
			Range:   "1 to 10",
			Example: "2",
			Description: "How many consecutive failed probes take a healthy backend out of rotation (the first probe " +
				"of a new backend decides at once). minicloud: default 2; two consecutive successful probes bring " +
				"a backend back.",
		},
		parse: intIn(1, 10),
	})

	// LBProxyProtocol turns on the PROXY protocol (v2) towards the backends.
	LBProxyProtocol = register(&Key[bool]{
		Info: Info{
			Name:    Prefix + "load-balancer-proxy-protocol",
			Type:    "boolean",
			Default: "false",
			Range:   "`true`, `false` (and Go's other boolean spellings)",
			Example: "true",
			Description: "Send a PROXY protocol v2 header to the backends so that they see the client's address. " +
				"Providers that support it report `ipMode: Proxy` in the Service's ingress, so that kube-proxy " +
				"does not short-circuit traffic to the load balancer's IP. minicloud: on TCP listeners (the " +
				"header carries the client's and the load balancer's address and port); UDP is forwarded as it is.",
		},
		parse: parseBool,
	})

	// LBAlgorithm is how the load balancer spreads connections over the backends.
	LBAlgorithm = register(&Key[string]{
		Info: Info{
			Name:    Prefix + "load-balancer-algorithm",
			Type:    "string",
			Default: AlgorithmRoundRobin,
			Range:   "`" + AlgorithmRoundRobin + "`, `" + AlgorithmSourceIP + "`",
			Example: AlgorithmSourceIP,
			Description: "How a new connection (or UDP session) picks its backend among the healthy ones: `" +
				AlgorithmRoundRobin + "` takes each in turn; `" + AlgorithmSourceIP + "` hashes the client's " +
				"address, so that a client's connections reach the same backend while the healthy backends stay " +
				"the same (other CCMs call this session affinity or source-IP balancing). Without the annotation, " +
				"a Service with `sessionAffinity: ClientIP` gets `" + AlgorithmSourceIP + "`, so that the affinity " +
				"holds across nodes.",
		},
		parse: oneOf(AlgorithmRoundRobin, AlgorithmSourceIP),
	})

	// LBIdleTimeout is how long a connection may be idle before the load balancer closes it.
	LBIdleTimeout = register(&Key[time.Duration]{
		Info: Info{
			Name:    Prefix + "load-balancer-idle-timeout",
			Type:    "duration",
			Range:   "1s to 1h",
			Example: "5m",
			Description: "How long a TCP connection (or UDP session) may pass no traffic in either direction " +
				"before the load balancer closes it. minicloud: by default TCP connections are never closed " +
				"for idleness and UDP sessions end after 30s; rounded up to whole seconds.",
		},
		parse: durationIn(time.Second, time.Hour),
	})
)

// Values of LBAlgorithm.
const (
	// AlgorithmRoundRobin sends each new connection to the next backend.
	AlgorithmRoundRobin = "round-robin"
	// AlgorithmSourceIP sends a client's connections to the same backend.
	AlgorithmSourceIP = "source-ip"
)
