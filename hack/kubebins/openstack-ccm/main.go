// Command openstack-ccm is the upstream OpenStack cloud-controller-manager:
// the controllers of k8s.io/cloud-provider's app package, unchanged, with the
// upstream OpenStack provider (k8s.io/cloud-provider-openstack/pkg/openstack,
// registered as "openstack") compiled in, unchanged, at the Kubernetes
// versions of this repository.
//
// hack/kubebins/build.sh builds it into .cache/kubebins/<version>/openstack-ccm
// when asked (KUBEBINS_OPENSTACK=1, or by name). It is the upstream peer for an
// OpenStack provider, run against minicloud's OpenStack dialect (package
// minicloud/openstack): see docs/minicloud.md.
package main

import (
	_ "k8s.io/cloud-provider-openstack/pkg/openstack" // registers "openstack"

	"github.com/stratus-ccm/stratus/hack/kubebins/ccm/upstream"
)

func main() { upstream.Main() }
