package app

import (
	"bytes"
	"strings"
	"testing"
)

func TestVersionAndBadFlag(t *testing.T) {
	cmd := NewCommand("v9.9.9")
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil || out.String() != "stratus-ccm v9.9.9\n" {
		t.Errorf("--version: %q, %v", out.String(), err)
	}

	cmd = NewCommand("v9.9.9")
	out.Reset()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--no-such-flag"})
	if err := cmd.Execute(); err == nil || !strings.Contains(out.String(), "no-such-flag") || !strings.Contains(out.String(), "stratus-ccm --help") {
		t.Errorf("bad flag: %q, %v", out.String(), err)
	}
}
