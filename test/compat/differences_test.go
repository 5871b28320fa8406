package compat

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
)

// tolerance hides one deliberate difference from the comparison. ID is the
// difference's heading in docs/differences.md.
type tolerance struct {
	ID string
	// apply removes or rewrites, in a snapshot of either side, what the
	// difference makes unequal.
	apply func(*snapshot)
}

// tolerances are applied to both sides of every scenario. Each is as narrow
// as the difference it names.
var tolerances = []tolerance{
	{ID: "node-events", apply: func(s *snapshot) {
		for obj, evs := range s.Events {
			s.Events[obj] = slices.DeleteFunc(evs, func(e string) bool {
				return strings.Contains(e, " InitializationFailed (") || strings.Contains(e, " NodeDeletionBlocked (")
			})
			if len(s.Events[obj]) == 0 {
				delete(s.Events, obj)
			}
		}
	}},
	// stratus's Normal ProvisioningLoadBalancer is upstream's Warning
	// SyncLoadBalancerFailed for the same api.RetryError: compare it as that.
	{ID: "lb-provisioning-event", apply: func(s *snapshot) {
		const stratus = "Normal ProvisioningLoadBalancer (service-controller)"
		const upstream = "Warning SyncLoadBalancerFailed (service-controller)"
		for obj, evs := range s.Events {
			if i := slices.Index(evs, stratus); i >= 0 {
				evs = slices.Delete(evs, i, i+1)
				if !slices.Contains(evs, upstream) {
					evs = append(evs, upstream)
				}
				slices.Sort(evs)
				s.Events[obj] = evs
			}
		}
	}},
	{ID: "lb-ready-condition", apply: func(s *snapshot) {
		for i := range s.Services {
			s.Services[i].Conditions = slices.DeleteFunc(s.Services[i].Conditions, func(c string) bool {
				return strings.HasPrefix(c, "LoadBalancerReady=")
			})
		}
	}},
}

// headingID matches a difference's heading: ### `id`.
var headingID = regexp.MustCompile("(?m)^### `([a-z0-9-]+)`")

// documentedDifferences returns the IDs docs/differences.md lists.
func documentedDifferences(t *testing.T) map[string]bool {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "differences.md"))
	if err != nil {
		t.Fatalf("read the list of deliberate differences: %v", err)
	}
	ids := map[string]bool{}
	for _, m := range headingID.FindAllStringSubmatch(string(doc), -1) {
		ids[m[1]] = true
	}
	if len(ids) == 0 {
		t.Fatal("docs/differences.md lists no differences (headings ### `id`)")
	}
	return ids
}

// TestTolerancesAreDocumented proves that the differential test tolerates
// only differences docs/differences.md lists.
func TestTolerancesAreDocumented(t *testing.T) {
	ids := documentedDifferences(t)
	for _, tol := range append(tolerances, vsphereTolerances...) {
		if !ids[tol.ID] {
			t.Errorf("tolerance %q is not a difference listed in docs/differences.md", tol.ID)
		}
	}
	for _, sc := range append(scenarios, vsphereScenarios...) {
		for _, id := range sc.differences {
			if !ids[id] {
				t.Errorf("scenario %s names difference %q, which docs/differences.md does not list", sc.name, id)
			}
		}
	}
}
