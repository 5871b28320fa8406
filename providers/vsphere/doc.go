// Package vsphere is stratus's native cloud provider for VMware vSphere,
// built on govmomi. Importing it (a blank import) registers the provider
// "vsphere" with k8s.io/cloud-provider.
//
// It reads the upstream vSphere cloud provider's cloud config (YAML or the
// legacy INI form, see Config) and gives nodes upstream's provider IDs
// ("vsphere://<lower-case BIOS UUID>"), instance types and zone labels, so
// that a cluster can switch from the upstream vSphere CCM in place. It
// implements InstancesV2 and Zones, plus stratus's InstanceLister and
// InstanceWatcher from pkg/stratus: all VMs are read in one paged
// property retrieve of ten properties over a ContainerView, then kept
// current by WaitForUpdatesEx on a PropertyCollector of the provider's own,
// so that instance questions for thousands of nodes cost no request to
// vCenter. Zones and regions come from vSphere tags on a VM's host or its
// nearest ancestor, read in one batched vAPI call.
//
// Each vCenter has one long-lived SOAP session and one vAPI session, both
// with keepalives, and a new login when vCenter drops them. Unreachable
// vCenters and 5xx answers are cloudprovider.Transient errors, 429 answers
// cloudprovider.Throttled ones; refused credentials wrap ErrInvalidLogin.
// No error ever makes a VM "gone": only a successful listing that lacks it.
//
// There is no LoadBalancer and no Routes. docs/vsphere.md is the user
// reference.
package vsphere
