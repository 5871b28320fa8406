package node

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	cloudprovider "k8s.io/cloud-provider"
)

func TestMetadataLabels(t *testing.T) {
	md := &cloudprovider.InstanceMetadata{
		InstanceType: "large",
		Zone:         "z1",
		Region:       "r1",
		AdditionalLabels: map[string]string{
			"kubernetes.io/os":              "linux",
			"k8s.io/thing":                  "x",
			"foo.kubernetes.io/bar":         "x",
			"a.b.k8s.io/bar":                "x",
			"notkubernetes.io/ok":           "yes",
			"example.com/rack":              "r7",
			"example.com/existing":          "new",
			"example.com/existing-same":     "same",
			"topology.kubernetes.io/zone":   "evil",
			"node.kubernetes.io/exclude-ok": "true",
		},
	}
	existing := map[string]string{"example.com/existing": "old", "example.com/existing-same": "same"}
	got, skipped := metadataLabels(existing, md)
	want := map[string]string{
		"node.kubernetes.io/instance-type":         "large",
		"beta.kubernetes.io/instance-type":         "large",
		"topology.kubernetes.io/zone":              "z1",
		"failure-domain.beta.kubernetes.io/zone":   "z1",
		"topology.kubernetes.io/region":            "r1",
		"failure-domain.beta.kubernetes.io/region": "r1",
		"notkubernetes.io/ok":                      "yes",
		"example.com/rack":                         "r7",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	var skippedKeys []string
	for _, s := range skipped {
		skippedKeys = append(skippedKeys, s.key)
	}
	wantSkipped := []string{"a.b.k8s.io/bar", "example.com/existing", "foo.kubernetes.io/bar", "k8s.io/thing", "kubernetes.io/os", "node.kubernetes.io/exclude-ok", "topology.kubernetes.io/zone"}
	if diff := cmp.Diff(wantSkipped, skippedKeys, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}

	if got, _ := metadataLabels(nil, &cloudprovider.InstanceMetadata{}); len(got) != 0 {
		t.Errorf("empty metadata gave labels %v", got)
	}
}

func TestRepairLabels(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   map[string]string
	}{
		{"nothing", map[string]string{"a": "b"}, map[string]string{}},
		{"in step", map[string]string{
			"topology.kubernetes.io/zone": "z", "failure-domain.beta.kubernetes.io/zone": "z",
		}, map[string]string{}},
		{"beta missing follows GA", map[string]string{"topology.kubernetes.io/region": "r"},
			map[string]string{"failure-domain.beta.kubernetes.io/region": "r"}},
		{"GA edited by the user wins", map[string]string{
			"node.kubernetes.io/instance-type": "new", "beta.kubernetes.io/instance-type": "old",
		}, map[string]string{"beta.kubernetes.io/instance-type": "new"}},
		{"beta only fills GA", map[string]string{"failure-domain.beta.kubernetes.io/zone": "z"},
			map[string]string{"topology.kubernetes.io/zone": "z"}},
		{"all three pairs", map[string]string{
			"node.kubernetes.io/instance-type": "t", "topology.kubernetes.io/zone": "z", "topology.kubernetes.io/region": "r",
		}, map[string]string{
			"beta.kubernetes.io/instance-type": "t", "failure-domain.beta.kubernetes.io/zone": "z", "failure-domain.beta.kubernetes.io/region": "r",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, repairLabels(tc.labels)); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOptions(t *testing.T) {
	got, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if got.Workers != DefaultWorkers || got.StatusUpdateWorkers != DefaultWorkers || got.StatusUpdateFrequency != DefaultStatusUpdateFrequency {
		t.Errorf("defaults = %+v", got)
	}
	got, err = Options{Workers: 3}.withDefaults()
	if err != nil || got.StatusUpdateWorkers != 3 {
		t.Errorf("StatusUpdateWorkers follows Workers: %+v, %v", got, err)
	}
	for _, bad := range []Options{{Workers: -1}, {StatusUpdateWorkers: -1}, {StatusUpdateFrequency: -1}} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
