package manager

import (
	"strings"
	"testing"
)

// TestControllersFlagSemantics is upstream's --controllers evaluation: the first
// item naming a controller (canonical or alias) decides, "*" enables the rest, and
// without "*" an unmentioned controller is off.
func TestControllersFlagSemantics(t *testing.T) {
	all := map[string]bool{CloudNodeController: true, CloudNodeLifecycleController: true, ServiceLBController: true, NodeRouteController: true}
	only := func(names ...string) map[string]bool {
		m := map[string]bool{CloudNodeController: false, CloudNodeLifecycleController: false, ServiceLBController: false, NodeRouteController: false}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	for _, tc := range []struct {
		list string
		want map[string]bool
	}{
		{"*", all},
		{"", only()},
		{"*,-route", only(CloudNodeController, CloudNodeLifecycleController, ServiceLBController)},
		{"*,-node-route-controller", only(CloudNodeController, CloudNodeLifecycleController, ServiceLBController)},
		{"-service,*", only(CloudNodeController, CloudNodeLifecycleController, NodeRouteController)},
		{"service", only(ServiceLBController)},
		{"service-lb-controller,cloud-node", only(ServiceLBController, CloudNodeController)},
		{"cloud-node-lifecycle", only(CloudNodeLifecycleController)},
		// first match wins, whichever spelling
		{"route,-route", only(NodeRouteController)},
		{"-route,route,*", only(CloudNodeController, CloudNodeLifecycleController, ServiceLBController)},
		{"-node-route-controller,route", only()},
		{"-cloud-node,*", only(CloudNodeLifecycleController, ServiceLBController, NodeRouteController)},
	} {
		t.Run(tc.list, func(t *testing.T) {
			var list []string
			if tc.list != "" {
				list = strings.Split(tc.list, ",")
			}
			if err := validateControllers(list); err != nil {
				t.Fatalf("validateControllers: %v", err)
			}
			for name, want := range tc.want {
				if got := controllerEnabled(name, list); got != want {
					t.Errorf("%s enabled = %v, want %v", name, got, want)
				}
			}
		})
	}
}

func TestControllerAliasesAreCanonical(t *testing.T) {
	for alias, canonical := range controllerAliases {
		if c, ok := canonicalController(alias); !ok || c != canonical {
			t.Errorf("alias %s -> %s, %v; want %s", alias, c, ok, canonical)
		}
		if _, ok := canonicalController(canonical); !ok {
			t.Errorf("alias %s maps to unknown %s", alias, canonical)
		}
	}
	if len(controllerTable) != len(ControllerNames) {
		t.Fatalf("controllerTable has %d entries, ControllerNames %d", len(controllerTable), len(ControllerNames))
	}
	for i, e := range controllerTable {
		if e.name != ControllerNames[i] {
			t.Errorf("controllerTable[%d] = %s, want %s", i, e.name, ControllerNames[i])
		}
	}
}

func TestUnknownControllersRejected(t *testing.T) {
	for _, list := range [][]string{{"nodeipam"}, {"*", "-ipam"}, {"Service"}, {"--route"}, {"cloud-node-controller " + "x"}} {
		if err := validateControllers(list); err == nil || !strings.Contains(err.Error(), "--controllers") {
			t.Errorf("validateControllers(%q) = %v, want an error naming --controllers", list, err)
		}
	}
}
