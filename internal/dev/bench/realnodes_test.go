package bench

import (
	"slices"
	"strings"
	"testing"
)

func TestPercentile(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i + 1)
	}
	cases := []struct {
		name   string
		sorted []float64
		p      float64
		want   float64
	}{
		{"empty", nil, 50, 0},
		{"one value", []float64{7}, 99, 7},
		{"p50 of 1..100", hundred, 50, 50},
		{"p90 of 1..100", hundred, 90, 90},
		{"p99 of 1..100", hundred, 99, 99},
		{"p100", hundred, 100, 100},
		{"p0 is the smallest", hundred, 0, 1},
		{"p50 of four", []float64{1, 2, 3, 4}, 50, 2},
		{"p99 of four", []float64{1, 2, 3, 4}, 99, 4},
		{"p90 of fifty is the 45th", seq(50), 90, 45},
	}
	for _, c := range cases {
		if got := Percentile(c.sorted, c.p); got != c.want {
			t.Errorf("%s: Percentile(p%g) = %g, want %g", c.name, c.p, got, c.want)
		}
	}
}

func seq(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(i + 1)
	}
	return out
}

func TestNewLatencies(t *testing.T) {
	l := NewLatencies([]float64{3.0004, 1, 2.5, 10}, 2)
	if !slices.Equal(l.Samples, []float64{1, 2.5, 3, 10}) {
		t.Errorf("samples %v: want sorted and rounded to milliseconds", l.Samples)
	}
	if l.P50 != 2.5 || l.P90 != 10 || l.P99 != 10 || l.Max != 10 || l.Missing != 2 {
		t.Errorf("got %+v", l)
	}
	empty := NewLatencies(nil, 5)
	if empty.Samples == nil || len(empty.Samples) != 0 || empty.P50 != 0 || empty.Missing != 5 {
		t.Errorf("no samples: got %+v, want an empty list and zeros", empty)
	}
}

func TestUpstreamCCMArgs(t *testing.T) {
	in := strings.Join([]string{
		"--cloud-provider=minicloud",
		"--kubeconfig=/s/manager.kubeconfig",
		"--cloud-config=/s/cloud.yaml",
		"--config=/s/stratus.yaml",
		"--node-deletion-grace-period=20s",
		"",
		"  --cluster-name=stratus-dev  ",
	}, "\n")
	args, orig, err := UpstreamCCMArgs(in, "/s/upstream-cloud.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"--cloud-provider=minicloud",
		"--kubeconfig=/s/manager.kubeconfig",
		"--cloud-config=/s/upstream-cloud.yaml",
		"--cluster-name=stratus-dev",
		"--authentication-kubeconfig=/s/manager.kubeconfig",
		"--authorization-kubeconfig=/s/manager.kubeconfig",
		"--use-service-account-credentials=false",
		"--v=2",
	}
	if !slices.Equal(args, want) {
		t.Errorf("args:\n got %q\nwant %q", args, want)
	}
	if orig != "/s/cloud.yaml" {
		t.Errorf("original cloud-config %q, want /s/cloud.yaml", orig)
	}
	for _, bad := range []string{"--cloud-config=/c", "--kubeconfig=/k", ""} {
		if _, _, err := UpstreamCCMArgs(bad, "/x"); err == nil {
			t.Errorf("UpstreamCCMArgs(%q): no error, want one (a flag missing)", bad)
		}
	}
}

func TestParseLoadAvg(t *testing.T) {
	got, err := ParseLoadAvg("28.38 41.52 37.07 5/1234 5678\n")
	if err != nil {
		t.Fatal(err)
	}
	if got != [3]float64{28.38, 41.52, 37.07} {
		t.Errorf("got %v", got)
	}
	for _, bad := range []string{"", "1.0 2.0", "a b c"} {
		if _, err := ParseLoadAvg(bad); err == nil {
			t.Errorf("ParseLoadAvg(%q): no error, want one", bad)
		}
	}
}

func TestRealNodesMarkdown(t *testing.T) {
	r := &RealNodesReport{Commit: "abc1234", Services: 4, Rate: 5, Nodes: 2, Managers: []RealNodesManager{
		{Name: RealNodesStratus, Creation: NewLatencies([]float64{1, 2, 3, 4}, 0), NodeRemove: NewLatencies([]float64{1}, 0)},
		{Name: RealNodesUpstream, Creation: NewLatencies([]float64{2, 4, 6, 8}, 0), Error: "boom"},
	}}
	md := r.Markdown()
	for _, want := range []string{
		"| stratus | 4 | 0 | 2.00 | 4.00 | 4.00 | 4.00 |",
		"| upstream | 4 | 0 | 4.00 | 8.00 | 8.00 | 8.00 |",
		"| upstream/stratus | | | 2.00× | 2.00× | 2.00× | 2.00× |",
		"| upstream/stratus | | | – | – | – | – |",
		"upstream stopped early: boom",
		"commit abc1234",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}
