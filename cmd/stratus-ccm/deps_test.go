package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoNSXTSDK keeps the upstream vSphere provider, and with it the NSX-T
// SDK (a 155,000-line package that adds minutes to every build), out of
// the shipped binary: hack/kubebins' stratus-cpv is the build that has it.
func TestNoNSXTSDK(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/vmware/vsphere-automation-sdk-go/") || strings.HasPrefix(pkg, "k8s.io/cloud-provider-vsphere/") {
			t.Errorf("stratus-ccm depends on %s", pkg)
		}
	}
}
