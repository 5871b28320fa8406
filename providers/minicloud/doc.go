// Package minicloud is the stratus cloud provider for minicloud, the reference
// cloud in this repository. Importing it (a blank import) registers the
// provider "minicloud" with k8s.io/cloud-provider, exactly as an upstream
// provider does, so any cloud controller manager built on the upstream
// framework can run it too.
//
// It implements InstancesV2 (provider IDs "minicloud://<instance-id>"),
// LoadBalancer (one minicloud load balancer per Service, named after the
// Service UID and tagged with the cluster and the Service), and Routes (pod
// CIDRs routed to the node's instance), plus stratus's extensions from
// pkg/stratus: InstanceLister and LoadBalancerLister, so stratus
// answers instance questions and finds orphaned load balancers from paged
// listings. minicloud's 429 answers become cloudprovider.Throttled errors and
// 5xx answers cloudprovider.Transient ones.
//
// The cloud config is YAML; see Config. docs/providers.md walks through this
// package as the example of writing a provider for stratus.
package minicloud
