// Command stratus-ccm is the stratus cloud controller manager: a drop-in for the
// upstream cloud-controller-manager (same flags), with several providers per
// cluster through --config. See docs/install.md and docs/flags.md.
package main

import (
	"os"

	"github.com/stratus-ccm/stratus/pkg/app"
)

// version is stamped at build time: -ldflags "-X main.version=v0.1.0".
var version = "dev"

func main() {
	os.Exit(app.Main(version))
}
