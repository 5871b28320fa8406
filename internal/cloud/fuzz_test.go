package cloud_test

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stratus-ccm/stratus/internal/cloud"
	"github.com/stratus-ccm/stratus/internal/strictyaml"
)

// FuzzConfig feeds arbitrary composition configs through decoding, validation
// and, when valid, Build and node routing: nothing may panic, every decoding and
// validation error must name its field, and a node must only ever go to a
// provider of its ID's scheme. Seeds are in testdata/fuzz/FuzzConfig.
func FuzzConfig(f *testing.F) {
	namesFields := func(t *testing.T, what string, err error) {
		for _, line := range strings.Split(err.Error(), "\n") {
			// The JSON decoder's own messages name no path or name it in Go's
			// spelling; the YAML parser's name the line.
			if !strings.Contains(line, ": ") || strings.Contains(line, "error unmarshaling JSON") || strings.Contains(line, "Go struct field") {
				t.Fatalf("%s error %q does not name a field", what, line)
			}
		}
	}
	f.Fuzz(func(t *testing.T, doc, providerID, labelValue string) {
		var c cloud.Config
		if err := strictyaml.Unmarshal([]byte(doc), &c); err != nil {
			namesFields(t, "decoding", err)
			return
		}
		for i := range c.Providers {
			c.Providers[i].CloudConfigFile = "" // never open arbitrary paths
		}
		if err := c.Validate(); err != nil {
			namesFields(t, "validation", err)
			return
		}
		set, err := cloud.Build(c)
		if err != nil {
			return
		}
		n := &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"region": labelValue}},
			Spec:       v1.NodeSpec{ProviderID: providerID},
		}
		p := set.ForNode(n)
		if p == nil || providerID == "" {
			return
		}
		if !strings.HasPrefix(providerID, p.ProviderName()+"://") {
			t.Fatalf("node with provider ID %q went to provider %s of scheme %q", providerID, p.Name(), p.ProviderName())
		}
	})
}
