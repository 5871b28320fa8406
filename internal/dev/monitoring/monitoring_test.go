package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrepareConfigIsValid: the configuration and rule files Prepare writes
// pass promtool check config (which checks the rule files it names too).
func TestPrepareConfigIsValid(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if testing.Short() {
			t.Skip("promtool not installed; skipped only under -short")
		}
		t.Fatalf("promtool not found (%v): install the Debian package prometheus (hack/ci-packages.txt lists it)", err)
	}
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	args, err := Prepare(Config{
		Dir: dir, Listen: "127.0.0.1:0", Targets: []string{"127.0.0.1:10258"}, TokenFile: token,
		Mixin: map[string]any{"ruleInterval": "5s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var config string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--config.file="); ok {
			config = v
		}
	}
	if config == "" {
		t.Fatalf("no --config.file in %v", args)
	}
	out, err := exec.Command(promtool, "check", "config", config).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS: 13 rules found") {
		t.Errorf("promtool check config found other rules than the mixin's 13 and 13:\n%s", out)
	}
}

// Prepare refuses targets without a token: /metrics would answer 401.
func TestPrepareNeedsToken(t *testing.T) {
	if _, err := Prepare(Config{Dir: t.TempDir(), Listen: "127.0.0.1:0", Targets: []string{"127.0.0.1:10258"}}); err == nil {
		t.Error("Prepare without a token file: no error")
	}
}
