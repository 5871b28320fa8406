package cloud_test

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/stratus-ccm/stratus/internal/cloud"
)

// FuzzConfig feeds arbitrary composition configs through validation and, when
// valid, Build and node routing: nothing may panic, every validation error must
// name its field, and a node must only ever go to a provider of its ID's scheme.
// Seeds are in testdata/fuzz/FuzzConfig.
func FuzzConfig(f *testing.F) {
	f.Fuzz(func(t *testing.T, doc, providerID, labelValue string) {
		var c cloud.Config
		if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
			return
		}
		for i := range c.Providers {
			c.Providers[i].CloudConfigFile = "" // never open arbitrary paths
		}
		if err := c.Validate(); err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.Contains(line, ": ") {
					t.Fatalf("validation error %q does not name a field", line)
				}
			}
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
