// Command ccm is the upstream cloud-controller-manager — the controllers of
// k8s.io/cloud-provider's app package, unchanged — with stratus's minicloud
// provider compiled in. It is the peer that test/compat and bench compare
// stratus-ccm against: same provider, same control plane, same cloud.
//
// hack/kubebins/build.sh builds it into .cache/kubebins/<version>/ccm. The
// controllers use the manager's own identity (no per-controller client names),
// so --use-service-account-credentials=false is all the RBAC it needs on a test
// control plane where it runs as an administrator.
package main

import (
	"github.com/stratus-ccm/stratus/hack/kubebins/ccm/upstream"
	_ "github.com/stratus-ccm/stratus/providers/minicloud" // registers "minicloud"
)

func main() { upstream.Main() }
