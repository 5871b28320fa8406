package plugin

import (
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// FuzzParseConfig feeds arbitrary plugin blocks to ParseConfig: it never
// panics, every error names the plugin configuration, and an accepted
// configuration is valid and reads back the same after being written out.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		"address: unix:///run/stratus/mc.sock\n",
		"address: unix:///run/mc.sock\nconnectTimeout: 30s\n",
		"address: plugin.example:7443\ntls: {caFile: /ca.pem, certFile: /c.pem, keyFile: /k.pem, serverName: plugin}\n",
		`{"address": "[::1]:7443", "tls": {"caFile": "a", "certFile": "b", "keyFile": "c"}}`,
		"address: 10.0.0.1:7443\n",
		"address: unix://relative\n",
		"address: http://x:1\n",
		"address: unix:///s\nconnectTimeout: -1s\n",
		"address: unix:///s\nport: 1\n",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		cfg, err := ParseConfig(strings.NewReader(in))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "plugin: ") {
				t.Fatalf("error %q does not say it is the plugin configuration", err)
			}
			return
		}
		if errs := cfg.Validate(); len(errs) != 0 {
			t.Fatalf("accepted %q with problems %v", in, errs)
		}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal %+v: %v", cfg, err)
		}
		again, err := ParseConfig(strings.NewReader(string(out)))
		if err != nil {
			t.Fatalf("written out as %q, read back: %v", out, err)
		}
		if !reflect.DeepEqual(again, cfg) {
			t.Fatalf("round trip changed %+v to %+v", cfg, again)
		}
	})
}
