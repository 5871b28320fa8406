package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
)

// benchParallel is how many tests (each scenario of
// TestQuickRunsEveryScenario, TestPluginRunsBothSides) run at once unless
// -test.parallel says otherwise: they mostly wait for the managers and the
// control planes, so more of them than the machine has cores.
const benchParallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(benchParallel))
	}
	os.Exit(m.Run())
}

// TestQuickRunsEveryScenario is `make bench-quick` as a harness check: every
// scenario runs for both managers and yields its metrics. It asserts nothing
// about speed.
func TestQuickRunsEveryScenario(t *testing.T) {
	t.Parallel() // beside TestPluginRunsBothSides: nothing is shared
	if testing.Short() {
		t.Skip("runs control planes and both managers; skipped under -short")
	}
	binDir, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"etcd", "kube-apiserver", "ccm", "vsphere-ccm", "openstack-ccm"} {
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			t.Fatalf("%s not found in %s: run `%s`, `make kubebins-vsphere` and `make kubebins-openstack` first", name, binDir, testenv.BuildCommand)
		}
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ccm := filepath.Join(t.TempDir(), "stratus-ccm")
	build := exec.Command("go", "build", "-o", ccm, "./cmd/stratus-ccm")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build stratus-ccm: %v\n%s", err, out)
	}
	// Smaller than QuickSizes: this proves the harness, it measures nothing.
	sizes := Sizes{
		BurstNodes:  5,
		SteadyNodes: 5, SteadyServices: 2, SteadyWindow: 3 * time.Second,
		LBBurstNodes: 2, LBBurstServices: 3,
		ChurnServices: 2, ChurnNodes: 2,
		MemoryNodes: 5, MemoryServices: 2, MemoryWait: time.Minute,
		VSphereBurstNodes: 3, VSphereSteadyNodes: 3,
		OpenStackBurstNodes: 3, OpenStackSteadyNodes: 3,
		OpenStackLBNodes: 2, OpenStackLBServices: 2,
		OpenStackChurnServices: 2, OpenStackChurnNodes: 2,
		LadderRungs: []int{3, 6}, LadderWindow: 3 * time.Second,
	}
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each scenario has its own control planes and cloud
			ctx := log.IntoContext(context.Background(), testr.New(t))
			profiles := t.TempDir()
			rep, err := Run(ctx, Options{BinDir: binDir, StratusCCM: ccm, WorkDir: t.TempDir(), Sizes: sizes, Scenarios: []string{name}, Cloud: DefaultCloud, Timeout: 5 * time.Minute, HeapProfileDir: profiles})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Scenarios) != 1 {
				t.Fatalf("report has %d scenarios, want 1", len(rep.Scenarios))
			}
			s := rep.Scenarios[0]
			if err, ok := s.Errors[string(upstream)]; ok && name == "openstack-node-churn" && strings.Contains(err, "load balancers with") {
				// Upstream's service controller syncs a joining node's
				// load balancers when its initialization removes the
				// taint, and its OpenStack provider leaves out a node
				// whose addresses are not there yet ("no address found
				// for host"); the address patch that follows triggers no
				// second sync, so now and then a member stays missing
				// until something else changes. That is upstream's race,
				// not the harness's: give upstream one more run.
				t.Logf("upstream left a member out (%s); running upstream once more", err)
				again, err := Run(ctx, Options{BinDir: binDir, StratusCCM: ccm, WorkDir: t.TempDir(), Sizes: sizes, Scenarios: []string{name}, Managers: []string{string(upstream)}, Cloud: DefaultCloud, Timeout: 5 * time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				s.Upstream = again.Scenarios[0].Upstream
				delete(s.Errors, string(upstream))
				if e, ok := again.Scenarios[0].Errors[string(upstream)]; ok {
					s.Errors[string(upstream)] = e
				}
			}
			if len(s.Errors) > 0 {
				t.Errorf("%s: %v", s.Name, s.Errors)
			}
			if len(s.Upstream) == 0 || len(s.Stratus) == 0 {
				t.Errorf("%s: missing metrics: upstream %v, stratus %v", s.Name, s.Upstream, s.Stratus)
			}
			// The memory scenario takes heap profiles of both managers, the
			// scale ladder a CPU and a heap profile per rung; no other
			// scenario takes any.
			for _, m := range []manager{upstream, stratusCCM} {
				top, ok := s.HeapProfiles[string(m)]
				if want := name == "memory" || name == "scale-ladder"; ok != want {
					t.Errorf("%s: %s profiles taken: %v, want %v", name, m, ok, want)
				}
				if ok && !strings.Contains(top, "inuse_space") {
					t.Errorf("%s: %s heap profile summary is not by in-use space:\n%s", name, m, top)
				}
				files := []string{name + "-" + string(m) + ".heap.pb.gz"}
				if name == "scale-ladder" {
					files = nil
					for _, rung := range sizes.LadderRungs {
						for _, kind := range []string{"cpu", "heap"} {
							files = append(files, fmt.Sprintf("%s-%s-nodes%05d.%s.pb.gz", name, m, rung, kind))
						}
					}
					for _, rung := range []string{"nodes=00000 ", "nodes=00006 "} { // the floor, a rung
						for _, part := range []string{"peakRSSMiB", "rssAnonMiB", "rssFileMiB"} {
							if v := metricsOf(s, m)[rung+part]; v <= 0 {
								t.Errorf("%s: %s %s%s = %v, want the resident memory", name, m, rung, part, v)
							}
						}
					}
					if ok && (!strings.Contains(top, "nodes=00006 CPU over the window") || !strings.Contains(top, "Type: cpu")) {
						t.Errorf("%s: %s summary lacks the last rung's CPU profile:\n%s", name, m, top)
					}
				}
				for _, f := range files {
					if _, err := os.Stat(filepath.Join(profiles, f)); (err == nil) != ok {
						t.Errorf("%s: %s profile file %s: %v, summary %v", name, m, f, err, ok)
					}
				}
			}
			out := filepath.Join(t.TempDir(), "results", "latest.json")
			if err := rep.WriteJSON(out); err != nil {
				t.Fatal(err)
			}
			table := rep.Markdown()
			if !strings.Contains(table, "| "+s.Name+" |") {
				t.Errorf("table lacks %s:\n%s", s.Name, table)
			}
			t.Logf("results (one run, tiny sizes, not a measurement):\n%s", table)
		})
	}
}

// metricsOf is a scenario result's metrics of manager m.
func metricsOf(s Result, m manager) Metrics {
	if m == upstream {
		return s.Upstream
	}
	return s.Stratus
}
