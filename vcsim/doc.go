// Package vcsim runs a simulated vCenter for tests, benchmarks and people:
// govmomi's in-process simulator (SOAP vim25 API plus the REST tagging API)
// with an inventory shaped for a Kubernetes cloud provider.
//
// Start builds one or more datacenters (DC0, DC1, …), each with clusters of
// hosts (DC0_C0 with DC0_C0_H0…) and standalone hosts (DC0_H0), then
// Options.VMs node VMs named by Options.NamePattern ("node-%d", from 0),
// spread round-robin over the clusters and standalone hosts. Each datacenter
// carries a region tag ("region-1", …) in the category Options.RegionCategory
// ("k8s-region"); each cluster and each standalone host carries a zone tag
// ("zone-a", "zone-b", …) in Options.ZoneCategory ("k8s-zone"), so that
// consecutive nodes land in different zones, as the upstream vSphere
// provider resolves them (nearest tagged ancestor of the VM's host). Every
// node VM is powered on with 2 vCPUs and 4 GiB, and reports as VMware Tools
// would: guest.hostName equal to its name, guest.ipAddress and guest.net with
// one NIC on the network Options.Network ("VM Network") holding NodeIPv4(i)
// and, with Options.IPv6, NodeIPv6(i).
//
// The server listens on Options.Listen (a free loopback port by default)
// with TLS and a fresh self-signed certificate (CACertPEM, CAFile,
// Thumbprint), and accepts only Options.Username and Options.Password.
// Requests pass through a front handler that counts every request that
// reaches the server, failed logins included (Requests: SOAP by operation,
// REST by method and path template), adds Options.Latency (and, from
// SetLatency on, more), and can fail
// requests with an HTTP status (FailHTTP); SOAP faults come from the
// simulator's fault injector (FailMethod, FaultInjector). The simulator's
// own setup, and the run-time operations of this package, go in-process or
// through the simulator's private listener, so they are not counted.
//
// Run-time operations act on VMs by name: PowerOff, PowerOn, ShutdownGuest,
// Destroy, Create and SetGuest; Stop and Start take the whole server down
// (connections refused) and bring the same inventory back on the same
// address. With Options.Control the same address also serves a small JSON
// control API under ControlPath for these operations, which Remote drives
// from another process (`stratus vcsim vm ...`). CloudConfig writes the
// upstream provider's YAML cloud config for the server. Close removes the simulator's temporary datastore folders and
// the CA file.
//
// Differences from a real vCenter that tests can trip on: sessions never
// expire unless Options.SessionTimeout is set; a powered-off VM keeps its
// guest info; the simulator accepts tag attachments to any object ID; and a
// property collector filter on a container view re-sends every object when
// the view changes.
package vcsim
