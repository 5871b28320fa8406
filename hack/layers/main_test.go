package main

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		from, imp string
		ok        bool
	}{
		{"cmd/stratus-ccm", "pkg/app", true},
		{"internal/dev/bench", "internal/manager", true},
		{"internal/dev/monitoring", "deploy/mixin", true},
		{"pkg/app", "internal/manager", true},
		{"internal/controller/service", "pkg/annotations", true},
		{"internal/controller/service", "internal/cloud", true},
		{"providers/vsphere", "providers/internal/gitini", true},
		{"providers/minicloud", "minicloud/client", true},
		{"pkg/plugin", "proto/stratus/provider/v1", true},
		{"pkg/stratus/instanceindex", "pkg/stratus", true},
		{"internal/manager/managertest", "internal/dev/testsupport", true},

		{"pkg/conformance", "internal/manager", false},
		{"pkg/annotations", "pkg/app", false},
		{"pkg/stratus", "minicloud/api", false},
		{"providers/vsphere", "internal/cloud", false},
		{"providers/vsphere", "pkg/app", false},
		{"providers/minicloud", "minicloud", false},
		{"internal/cloud", "internal/dev/testenv", false},
		{"internal/manager", "pkg/app", false},
		{"internal/manager", "providers/minicloud", false},
		{"minicloud", "internal/cloud", false},
		{"vcsim", "pkg/stratus", false},
		{"internal/dev/devenv", "cmd/stratus", false},
		{"internal/dev/devenv", "minicloud/minicloudtest", false},
	} {
		bad := check([]pkg{{path: tc.from, imports: []string{tc.imp}}})
		if tc.ok != (len(bad) == 0) {
			t.Errorf("%s importing %s: allowed %v, want %v (%q)", tc.from, tc.imp, len(bad) == 0, tc.ok, bad)
		}
		if len(bad) > 0 && !strings.Contains(bad[0], tc.imp) {
			t.Errorf("message %q does not name %s", bad[0], tc.imp)
		}
	}
}

// TestModule runs the check on this module: its imports run one way.
func TestModule(t *testing.T) {
	pkgs, err := list()
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 50 {
		t.Fatalf("go list found %d packages; the module has more than 50", len(pkgs))
	}
	for _, b := range check(pkgs) {
		t.Error(b)
	}
}
