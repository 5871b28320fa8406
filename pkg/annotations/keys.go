package annotations

import "time"

// The stratus Service annotations. Add new ones here; docs/annotations.md follows.
var (
	// LBHealthCheckInterval is how often the load balancer probes each backend.
	LBHealthCheckInterval = register(&Key[time.Duration]{
		Info: Info{
			Name:    Prefix + "load-balancer-health-check-interval",
			Type:    "duration",
			Default: "10s",
			Range:   "1s to 5m",
			Example: "5s",
			Description: "How often the load balancer probes each backend node. With `externalTrafficPolicy: Local` " +
				"the probe is an HTTP GET of `/healthz` on `spec.healthCheckNodePort`; otherwise a TCP connect to " +
				"the node port.",
		},
		parse: durationIn(time.Second, 5*time.Minute),
	})

	// LBHealthCheckTimeout is how long one probe may take.
	LBHealthCheckTimeout = register(&Key[time.Duration]{
		Info: Info{
			Name:        Prefix + "load-balancer-health-check-timeout",
			Type:        "duration",
			Default:     "5s",
			Range:       "1s to 1m",
			Example:     "3s",
			Description: "How long one health probe may take before it counts as failed.",
		},
		parse: durationIn(time.Second, time.Minute),
	})

	// LBHealthCheckUnhealthyThreshold is how many failed probes take a backend out.
	LBHealthCheckUnhealthyThreshold = register(&Key[int]{
		Info: Info{
			Name:        Prefix + "load-balancer-health-check-unhealthy-threshold",
			Type:        "integer",
			Default:     "3",
			Range:       "1 to 10",
			Example:     "2",
			Description: "How many consecutive failed probes take a backend out of rotation (one success brings it back).",
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
				"does not short-circuit traffic to the load balancer's IP.",
		},
		parse: parseBool,
	})
)
