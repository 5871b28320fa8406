package route

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseClusterCIDRs(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "10.244.0.0/16", want: []string{"10.244.0.0/16"}},
		{in: "10.244.1.0/16", want: []string{"10.244.0.0/16"}},
		{in: " 10.244.0.0/16 , fd00::/48 ", want: []string{"10.244.0.0/16", "fd00::/48"}},
		{in: "fd00::/48,10.244.0.0/16", want: []string{"fd00::/48", "10.244.0.0/16"}},
		{in: "", wantErr: "--cluster-cidr is empty"},
		{in: "  ", wantErr: "--cluster-cidr is empty"},
		{in: "10.244.0.0", wantErr: "--cluster-cidr"},
		{in: "10.244.0.0/33", wantErr: "--cluster-cidr"},
		{in: "10.244.0.0/16,", wantErr: "--cluster-cidr"},
		{in: "banana", wantErr: "--cluster-cidr"},
		{in: "10.244.0.0/16,10.245.0.0/16", wantErr: "dual-stack pair"},
		{in: "fd00::/48,fd01::/48", wantErr: "dual-stack pair"},
		{in: "10.0.0.0/8,fd00::/48,10.1.0.0/16", wantErr: "at most two"},
	}
	for _, tt := range tests {
		got, err := ParseClusterCIDRs(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "--cluster-cidr") {
				t.Errorf("ParseClusterCIDRs(%q) error = %v, want one naming --cluster-cidr containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseClusterCIDRs(%q): %v", tt.in, err)
			continue
		}
		var gotS []string
		for _, p := range got {
			gotS = append(gotS, p.String())
		}
		if diff := cmp.Diff(tt.want, gotS); diff != "" {
			t.Errorf("ParseClusterCIDRs(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func FuzzParseClusterCIDRs(f *testing.F) {
	for _, s := range []string{"10.244.0.0/16", "10.244.0.0/16,fd00::/48", "", "a,b,c", "::ffff:1.2.3.4/128"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		cidrs, err := ParseClusterCIDRs(in)
		if err != nil {
			if !strings.Contains(err.Error(), "--cluster-cidr") {
				t.Errorf("error does not name the flag: %v", err)
			}
			return
		}
		if len(cidrs) == 0 || len(cidrs) > 2 {
			t.Fatalf("%q: %d CIDRs accepted", in, len(cidrs))
		}
		if err := validateClusterCIDRs(cidrs); err != nil {
			t.Fatalf("%q: parsed CIDRs fail validation: %v", in, err)
		}
		for _, c := range cidrs {
			if c != c.Masked() {
				t.Errorf("%q: %s not masked", in, c)
			}
			// Every accepted cluster CIDR is responsible for itself.
			if ok, err := responsible(cidrs, c.String()); err != nil || !ok {
				t.Errorf("%q: not responsible for its own CIDR %s (%v)", in, c, err)
			}
		}
	})
}

func TestOptionsDefaults(t *testing.T) {
	got, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	want := Options{
		ClusterName:          "kubernetes",
		ReconciliationPeriod: 10 * time.Second,
		ResyncPeriod:         5 * time.Minute,
		MaxConcurrentOps:     200,
		MaxRetryBackoff:      5 * time.Minute,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestOptionsInvalid(t *testing.T) {
	tests := []struct {
		opts Options
		want string
	}{
		{Options{ReconciliationPeriod: -time.Second}, "--route-reconciliation-period"},
		{Options{ResyncPeriod: -time.Second}, "ResyncPeriod"},
		{Options{MaxRetryBackoff: -time.Second}, "MaxRetryBackoff"},
		{Options{MaxConcurrentOps: -1}, "MaxConcurrentOps"},
		{Options{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("11.0.0.0/8")}}, "--cluster-cidr"},
		{Options{ClusterCIDRs: []netip.Prefix{{}}}, "--cluster-cidr"},
	}
	for _, tt := range tests {
		_, err := tt.opts.withDefaults()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("withDefaults(%+v) = %v, want an error naming %s", tt.opts, err, tt.want)
		}
	}
}
