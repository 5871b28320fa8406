// Package manager is what the stratus-ccm binary runs: the upstream
// cloud-controller-manager flags (Options, with their exact names and defaults),
// the ManagerConfig file (--config), validation that names the offending flag or
// field, and Run, which builds a controller-runtime manager with leader election on
// a Lease, initializes the cloud providers once leadership is acquired, wires the
// enabled controllers, and serves /healthz, /readyz, /livez (anonymous) and
// /metrics (delegated authentication and authorization) on one secure port.
package manager
