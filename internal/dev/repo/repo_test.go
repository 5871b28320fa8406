package repo

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestRootFromASubfolder(t *testing.T) {
	// go test runs in this package's folder, internal/dev/repo.
	got, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if want := filepath.Dir(filepath.Dir(filepath.Dir(wd))); got != want {
		t.Errorf("Root() = %q; want %q", got, want)
	}
}

func TestRootOutside(t *testing.T) {
	t.Chdir(t.TempDir())
	if _, err := Root(); !errors.Is(err, ErrNotFound) {
		t.Errorf("Root() outside the repository: %v; want ErrNotFound", err)
	}
}
