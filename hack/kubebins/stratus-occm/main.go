// Command stratus-occm is stratus-ccm — the same command, controllers and
// flags as cmd/stratus-ccm — with the upstream OpenStack provider
// (k8s.io/cloud-provider-openstack/pkg/openstack, registered as "openstack",
// unchanged) compiled in instead of stratus's own providers. `stratus-occm
// plugin serve --provider openstack` serves the upstream provider, unchanged,
// over the stratus provider protocol: the conformance kit checks it that way
// (docs/conformance.md).
//
// hack/kubebins/build.sh builds it into .cache/kubebins/<version>/stratus-occm
// when asked (KUBEBINS_OPENSTACK=1, or by name).
package main

import (
	"os"

	_ "k8s.io/cloud-provider-openstack/pkg/openstack" // registers "openstack"

	"github.com/stratus-ccm/stratus/pkg/app"
)

// version is stamped by build.sh: -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(app.Main(version))
}
