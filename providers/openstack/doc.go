// Package openstack is stratus's OpenStack provider, registered as
// "openstack": nodes from Nova servers (InstancesV2 and
// pkg/stratus.InstanceLister, every server in one paged listing) on
// gophercloud. It reads upstream's cloud.conf and uses upstream's provider
// IDs, so that a cluster can switch from the upstream OpenStack cloud
// controller manager in place. Load balancers are Octavia's, without
// blocking (api.RetryError while provisioning); routes are not managed.
// docs/openstack.md is the user documentation.
package openstack
