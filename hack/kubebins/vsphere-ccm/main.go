// Command vsphere-ccm is the upstream vSphere cloud-controller-manager: the
// controllers of k8s.io/cloud-provider's app package, unchanged, with the
// upstream vSphere provider (k8s.io/cloud-provider-vsphere, registered as
// "vsphere") compiled in, as its cmd/vsphere-cloud-controller-manager has
// them, at the Kubernetes versions of this repository.
//
// hack/kubebins/build.sh builds it into .cache/kubebins/<version>/vsphere-ccm
// when asked (KUBEBINS_VSPHERE=1, or by name). It is the upstream peer for a
// vSphere provider, run against vcsim: see docs/vsphere.md.
package main

import (
	_ "k8s.io/cloud-provider-vsphere/pkg/cloudprovider/vsphere" // registers "vsphere"

	"github.com/stratus-ccm/stratus/hack/kubebins/ccm/upstream"
)

func main() { upstream.Main() }
