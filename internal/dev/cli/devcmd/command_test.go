package devcmd

import (
	"strings"
	"testing"
)

// TestHelpSaysWhatHappens: `stratus dev --help` says the OpenStack
// environment programs routes, and the drill commands offer hang.
func TestHelpSaysWhatHappens(t *testing.T) {
	cmd := NewCommand()
	if strings.Contains(cmd.Long, "no routes") || !strings.Contains(cmd.Long, "extra route of router minicloud") {
		t.Errorf("stratus dev --help on OpenStack routes:\n%s", cmd.Long)
	}
	for _, target := range []string{"minicloud", "vcsim"} {
		sub, _, err := cmd.Find([]string{target})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(sub.Use, "hang") || !strings.Contains(sub.Long, `"hang"`) {
			t.Errorf("stratus dev %s: use %q, help %q; want the hang drill", target, sub.Use, sub.Long)
		}
		if err := sub.Args(sub, []string{"hang"}); err != nil {
			t.Errorf("stratus dev %s hang: %v", target, err)
		}
	}
}
