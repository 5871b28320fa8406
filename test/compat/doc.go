// Package compat is the differential test of stratus-ccm against the upstream
// cloud-controller-manager (k8s.io/cloud-provider's app, built by
// hack/kubebins as "ccm" with the same providers/minicloud).
//
// Each scenario runs twice, once per manager, each time on a fresh control
// plane and a fresh minicloud; the resulting Nodes, Services and minicloud
// state are normalized (random IDs, IPs and UIDs become names) and compared.
// A difference is tolerated only through a tolerance whose ID is a heading of
// docs/differences.md; anything else fails the scenario with a diff.
//
// The vSphere scenarios (vsphere_test.go) run three times each, on a fresh
// control plane and a fresh vcsim simulator with the same
// inventory: the upstream CCM with the upstream vSphere provider
// (hack/kubebins "vsphere-ccm"), stratus-ccm with the upstream provider
// ("stratus-cpv") and stratus-ccm with providers/vsphere; both stratus runs
// are compared with the upstream one. The test lives in compat_test.go and
// friends; this file only documents the package.
//
// openstack_test.go runs the upstream OpenStack CCM (hack/kubebins'
// openstack-ccm, k8s.io/cloud-provider-openstack unchanged) against
// minicloud's OpenStack dialect: node initialization, shutdown and deletion,
// load balancers with and without a floating IP carrying traffic, and routes.
// It is an oracle for the dialect, not a comparison (stratus has no OpenStack
// provider yet).
//
// plugin_test.go runs some minicloud scenarios with stratus-ccm twice, the
// provider in process and served by a `stratus-ccm plugin serve` child, and
// requires identical results.
package compat
