package conformance

import (
	"context"
	"strings"
)

// Scenario is one check of the contract.
type Scenario struct {
	// Name is "group/name", e.g. "instances/stopped-is-shutdown".
	Name string
	// Doc says in one sentence what the scenario checks.
	Doc string
	// Needs are what the provider and driver must support; without them
	// the scenario is skipped with the reason.
	Needs []Need

	run func(ctx context.Context, e *env) error
}

// Group is the part of the name before the slash.
func (s Scenario) Group() string {
	g, _, _ := strings.Cut(s.Name, "/")
	return g
}

// Groups are the scenario groups in the order they run.
var Groups = []string{"instances", "instancelister", "instancewatcher", "loadbalancers", "loadbalancerlister", "loadbalancervalidator", "backendpools", "routes", "e2e"}

// Scenarios returns every scenario in the order Run runs them.
func Scenarios() []Scenario {
	var all []Scenario
	all = append(all, instanceScenarios()...)
	all = append(all, listerScenarios()...)
	all = append(all, loadBalancerScenarios()...)
	all = append(all, validatorScenarios()...)
	all = append(all, backendPoolScenarios()...)
	all = append(all, routeScenarios()...)
	all = append(all, e2eScenarios()...)
	return all
}
