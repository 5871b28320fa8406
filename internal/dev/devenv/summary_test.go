package devenv

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stratus-ccm/stratus/vcsim"
)

// TestSummarySaysWhatHappens: the start banner says the OpenStack
// environment programs pod-CIDR routes (its cloud.conf has [Route]
// router-id), names the hang drill, and for a destroyed VM prints that the
// deletion guard's confirmation comes on top of the grace period.
func TestSummarySaysWhatHappens(t *testing.T) {
	var out bytes.Buffer
	e := &env{opts: Options{StateDir: t.TempDir(), Cloud: CloudOpenStack}, out: &out, cp: &ControlPlane{Dir: t.TempDir()}}
	e.summary([]string{"node-0"})
	s := out.String()
	if strings.Contains(s, "no routes") || !strings.Contains(s, "pod-CIDR routes on router minicloud") {
		t.Errorf("OpenStack banner does not say routes are programmed:\n%s", s)
	}
	if !strings.Contains(s, "stop|start|hang") {
		t.Errorf("OpenStack banner does not name the hang drill:\n%s", s)
	}

	vc, err := vcsim.Start(context.Background(), vcsim.Options{VMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer vc.Close()
	out.Reset()
	e = &env{opts: Options{StateDir: t.TempDir(), Cloud: CloudVSphere}, out: &out, cp: &ControlPlane{Dir: t.TempDir()}, vc: vc}
	e.summary([]string{"node-0"})
	s = out.String()
	if !strings.Contains(s, "deletion guard's next check confirms it") || !strings.Contains(s, NodeDeletionGracePeriod.String()) {
		t.Errorf("vSphere banner's destroy hint does not say what happens:\n%s", s)
	}
	if !strings.Contains(s, "vcsim stop|start|hang") {
		t.Errorf("vSphere banner does not name the hang drill:\n%s", s)
	}
}
