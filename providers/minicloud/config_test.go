package minicloud

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    Config
		wantErr string // substring; "" = valid
	}{
		{"token", "url: http://127.0.0.1:8780\ntoken: s3cret\n", Config{URL: "http://127.0.0.1:8780", Token: "s3cret", ForeignNodes: ForeignNodesSkip, ClusterHealthCheck: ClusterHealthCheckNodePort}, ""},
		{"token file and timeout", "url: https://mc.example:443/\ntokenFile: /etc/mc/token\ntimeout: 5s\n",
			Config{URL: "https://mc.example:443/", TokenFile: "/etc/mc/token", Timeout: 5 * time.Second, ForeignNodes: ForeignNodesSkip, ClusterHealthCheck: ClusterHealthCheckNodePort}, ""},
		{"unknown key", "url: http://a\ntoken: x\nregion: mc-central\n", Config{}, `unknown field "region"`},
		{"misspelled key", "url: http://a\ntoken_file: x\n", Config{}, `unknown field "token_file"`},
		{"no url", "token: x\n", Config{}, "url: required"},
		{"bad url", "url: 127.0.0.1:8780\ntoken: x\n", Config{}, "url: "},
		{"no token", "url: http://a\n", Config{}, "token or tokenFile: one is required"},
		{"both tokens", "url: http://a\ntoken: x\ntokenFile: /f\n", Config{}, "token and tokenFile: set only one"},
		{"bad timeout", "url: http://a\ntoken: x\ntimeout: soon\n", Config{}, `timeout: "soon" is not a duration`},
		{"negative timeout", "url: http://a\ntoken: x\ntimeout: -1s\n", Config{}, "timeout: must be positive"},
		{"rate limit", "url: http://a\ntoken: x\nrateLimit: 19.5\nburst: 20\n", Config{URL: "http://a", Token: "x", RateLimit: 19.5, Burst: 20, ForeignNodes: ForeignNodesSkip, ClusterHealthCheck: ClusterHealthCheckNodePort}, ""},
		{"foreign nodes", "url: http://a\ntoken: x\nforeignNodes: internalIP\n", Config{URL: "http://a", Token: "x", ForeignNodes: ForeignNodesInternalIP, ClusterHealthCheck: ClusterHealthCheckNodePort}, ""},
		{"bad foreign nodes", "url: http://a\ntoken: x\nforeignNodes: InternalIP\n", Config{}, `foreignNodes: "InternalIP" is neither`},
		{"kube-proxy health check", "url: http://a\ntoken: x\nclusterHealthCheck: kubeProxy\n",
			Config{URL: "http://a", Token: "x", ForeignNodes: ForeignNodesSkip, ClusterHealthCheck: ClusterHealthCheckKubeProxy}, ""},
		{"bad health check", "url: http://a\ntoken: x\nclusterHealthCheck: kube-proxy\n", Config{}, `clusterHealthCheck: "kube-proxy" is neither`},
		{"negative rate limit", "url: http://a\ntoken: x\nrateLimit: -1\n", Config{}, "rateLimit: must not be negative"},
		{"negative burst", "url: http://a\ntoken: x\nrateLimit: 1\nburst: -2\n", Config{}, "burst: must not be negative"},
		{"burst without rate", "url: http://a\ntoken: x\nburst: 5\n", Config{}, "burst: needs rateLimit"},
		{"rate limit not a number", "url: http://a\ntoken: x\nrateLimit: fast\n", Config{}, "minicloud config"},
		{"not yaml", "url: [\n", Config{}, "minicloud config"},
		{"empty", "  \n", Config{}, "a cloud config is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseConfig(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseConfig error = %v, want one containing %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("error %q shows the token", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			if *got != tc.want {
				t.Errorf("ParseConfig = %+v, want %+v", *got, tc.want)
			}
			if strings.Contains(got.String(), "s3cret") {
				t.Errorf("String() %q shows the token", got.String())
			}
		})
	}
	if _, err := ParseConfig(nil); !errors.Is(err, ErrNoConfig) {
		t.Errorf("ParseConfig(nil) = %v, want ErrNoConfig", err)
	}
}

func TestResolveToken(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "token")
	empty := filepath.Join(dir, "empty")
	os.WriteFile(good, []byte("  abc\n"), 0o600)
	os.WriteFile(empty, []byte("\n"), 0o600)
	for _, tc := range []struct {
		cfg     Config
		want    string
		wantErr string
	}{
		{Config{Token: "t"}, "t", ""},
		{Config{TokenFile: good}, "abc", ""},
		{Config{TokenFile: empty}, "", "is empty"},
		{Config{TokenFile: filepath.Join(dir, "missing")}, "", "tokenFile: "},
	} {
		got, err := tc.cfg.ResolveToken()
		if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) || got != tc.want {
			t.Errorf("ResolveToken(%v) = %q, %v; want %q, error containing %q", tc.cfg, got, err, tc.want, tc.wantErr)
		}
	}
}

// FuzzParseConfig checks that any input is either rejected or yields a
// config that passes validation, and that nothing panics.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		"url: http://127.0.0.1:8780\ntoken: x\n",
		"url: https://h\ntokenFile: /t\ntimeout: 1m\n",
		"{url: 'http://a', token: b, extra: 1}",
		"timeout: 1e9\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		cfg, err := ParseConfig(strings.NewReader(in))
		if err != nil {
			return
		}
		if verr := cfg.validate(); verr != nil {
			t.Fatalf("accepted config fails validation: %v", verr)
		}
		if cfg.Timeout < 0 {
			t.Fatalf("negative timeout %v accepted", cfg.Timeout)
		}
	})
}

// TestConfigKeysDocumented: the provider reference in docs/providers.md names
// every key of the cloud config.
func TestConfigKeysDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/providers.md")
	if err != nil {
		t.Fatal(err)
	}
	rt := reflect.TypeFor[rawConfig]()
	for i := range rt.NumField() {
		key, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if !strings.Contains(string(doc), "\n"+key+":") && !strings.Contains(string(doc), "# or "+key+":") {
			t.Errorf("docs/providers.md's minicloud cloud-config example lacks the key %s", key)
		}
	}
}
