// Package repo finds the stratus repository a command or test runs in, for
// the tools that use what it builds (hack/kubebins's control-plane binaries,
// the stratus-ccm binary) when no flag names them.
package repo

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// ErrNotFound is the error of Root outside the repository.
var ErrNotFound = errors.New("the stratus repository (its go.mod) is not above the working directory")

// Root returns the folder holding the stratus go.mod at or above the working
// directory.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module github.com/stratus-ccm/stratus\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNotFound
		}
		dir = parent
	}
}
