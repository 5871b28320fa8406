// Command stratus-cpv is stratus-ccm — the same command, controllers and
// flags as cmd/stratus-ccm — with the upstream vSphere provider
// (k8s.io/cloud-provider-vsphere, registered as "vsphere") compiled in
// instead of stratus's own providers. It runs the upstream provider under
// stratus's controllers, which the shipped stratus-ccm cannot: the upstream
// provider brings the NSX-T SDK, kept out of cmd/stratus-ccm.
//
// hack/kubebins/build.sh builds it into .cache/kubebins/<version>/stratus-cpv
// when asked (KUBEBINS_VSPHERE=1, or by name). See docs/vsphere.md.
package main

import (
	"os"

	_ "k8s.io/cloud-provider-vsphere/pkg/cloudprovider/vsphere" // registers "vsphere"

	"github.com/stratus-ccm/stratus/pkg/app"
)

// version is stamped by build.sh: -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(app.Main(version))
}
