package manager

import (
	"fmt"
	"slices"
	"strings"
)

// Canonical controller names, as upstream's --controllers flag knows them.
const (
	CloudNodeController          = "cloud-node-controller"
	CloudNodeLifecycleController = "cloud-node-lifecycle-controller"
	ServiceLBController          = "service-lb-controller"
	NodeRouteController          = "node-route-controller"
)

// ControllerNames lists the canonical controller names in start order.
var ControllerNames = []string{CloudNodeController, CloudNodeLifecycleController, ServiceLBController, NodeRouteController}

// controllerAliases maps upstream's historical short names to canonical names;
// upstream accepts them forever.
var controllerAliases = map[string]string{
	"cloud-node":           CloudNodeController,
	"cloud-node-lifecycle": CloudNodeLifecycleController,
	"service":              ServiceLBController,
	"route":                NodeRouteController,
}

// canonicalController returns the canonical name for a name or alias, and whether
// the name is known.
func canonicalController(name string) (string, bool) {
	if c, ok := controllerAliases[name]; ok {
		return c, true
	}
	return name, slices.Contains(ControllerNames, name)
}

// validateControllers rejects unknown names in a --controllers list ("*", names,
// aliases, and either of those prefixed with "-").
func validateControllers(list []string) error {
	var unknown []string
	for _, item := range list {
		item = strings.TrimSpace(item)
		if item == "*" {
			continue
		}
		if _, ok := canonicalController(strings.TrimPrefix(item, "-")); !ok {
			unknown = append(unknown, fmt.Sprintf("%q", item))
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("--controllers: unknown controller %s (known: *, %s, their aliases %s, each optionally prefixed with -)",
			strings.Join(unknown, ", "), strings.Join(ControllerNames, ", "), strings.Join(sortedAliases(), ", "))
	}
	return nil
}

func sortedAliases() []string {
	aliases := make([]string, 0, len(controllerAliases))
	for a := range controllerAliases {
		aliases = append(aliases, a)
	}
	slices.Sort(aliases)
	return aliases
}

// controllerEnabled applies upstream's --controllers semantics to the canonical
// controller name: the first item naming the controller (by canonical name or
// alias) decides, "name" enabling and "-name" disabling it; if no item names it,
// it is enabled exactly when "*" is in the list (no controller is off by default).
func controllerEnabled(name string, list []string) bool {
	hasStar := false
	for _, item := range list {
		item = strings.TrimSpace(item)
		if item == "*" {
			hasStar = true
			continue
		}
		disable := strings.HasPrefix(item, "-")
		if c, _ := canonicalController(strings.TrimPrefix(item, "-")); c == name {
			return !disable
		}
	}
	return hasStar
}
