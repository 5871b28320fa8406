package providerv1_test

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedCodeIsCurrent regenerates the Go code from provider.proto
// (hack/protogen, pure Go, pinned plugins) and fails when the committed files
// differ: run make generate after changing the .proto file.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the code generator")
	}
	root, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", ".", "-root", root, "-check")
	cmd.Dir = filepath.Join(root, "hack", "protogen")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generated code of provider.proto is not current (run make generate): %v\n%s", err, out)
	}
}
