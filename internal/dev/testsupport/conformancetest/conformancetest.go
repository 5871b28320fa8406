// Package conformancetest runs pkg/conformance's kit against a target from a
// go test, on the test control plane of internal/dev/testenv, and checks the
// report the way every driver's test does: a table in the log, a test
// failure per failed scenario that is not a known gap, per known gap that
// passed, and per skip the target does not explain.
package conformancetest

import (
	"context"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/pkg/app"
	"github.com/stratus-ccm/stratus/pkg/conformance"
)

// Want says what a run may report besides passes.
type Want struct {
	// Focus, when set, runs only the scenarios whose name it matches.
	Focus *regexp.Regexp
	// Timeout bounds each wait of a scenario (default the kit's).
	Timeout time.Duration
	// Gaps are the scenarios known to fail, each with why. A gap that
	// passes fails the test too, so that it is taken off the list.
	Gaps map[string]string
	// MaySkip says whether a skipped result is one the target explains
	// (what the provider or its cloud lacks); nil allows no skip.
	MaySkip func(conformance.Result) bool
	// AllScenarios wants one result per scenario of the kit.
	AllScenarios bool
}

// Run runs the kit against target on the test control plane and checks
// the report against want; it returns the report for further checks.
func Run(t *testing.T, target *conformance.Target, want Want) *conformance.Report {
	t.Helper()
	env := testenv.Get(t)
	rep, err := conformance.Run(context.Background(), conformance.Config{
		Name:        target.Name,
		Provider:    target.Provider,
		CloudConfig: target.CloudConfig,
		Driver:      target.Driver,
		KubeConfig:  env.Config,
		Manager:     app.Manager{},
		ClusterName: "cf-" + env.Namespace(t),
		Focus:       want.Focus,
		Timeout:     want.Timeout,
	})
	if err != nil {
		t.Fatalf("run the conformance kit against %s: %v", target.Provider, err)
	}
	var table strings.Builder
	conformance.WriteTable(&table, rep)
	t.Log("\n" + table.String())
	failed := map[string]bool{}
	for _, r := range rep.Results {
		switch {
		case r.Status == conformance.Failed:
			failed[r.Name] = true
			if want.Gaps[r.Name] == "" {
				t.Errorf("%s: %s", r.Name, r.Message)
			}
		case r.Status == conformance.Skipped && (want.MaySkip == nil || !want.MaySkip(r)):
			t.Errorf("%s skipped (%s); want it run", r.Name, r.Message)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want.Gaps)) {
		if !failed[name] {
			t.Errorf("%s passed (known gap: %s); take it off the list", name, want.Gaps[name])
		}
	}
	if n := len(rep.Results); want.AllScenarios && n != len(conformance.Scenarios()) {
		t.Errorf("%d results, want one per scenario (%d)", n, len(conformance.Scenarios()))
	}
	return rep
}

// SkipsWith allows the skips whose message contains one of reasons.
func SkipsWith(reasons ...string) func(conformance.Result) bool {
	return func(r conformance.Result) bool {
		return slices.ContainsFunc(reasons, func(s string) bool { return strings.Contains(r.Message, s) })
	}
}

// SkipsNamed allows the skips of the scenarios whose name starts with one
// of prefixes.
func SkipsNamed(prefixes ...string) func(conformance.Result) bool {
	return func(r conformance.Result) bool {
		return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(r.Name, p) })
	}
}
