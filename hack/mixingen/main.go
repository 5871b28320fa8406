// Command mixingen renders the monitoring mixin (deploy/mixin) into the
// committed rule files and dashboards: deploy/mixin/generated/ and the Helm
// chart's files/monitoring/. With -check it writes nothing and fails when a
// committed file differs from what it would write.
//
// Run it from the repository root with `make generate`.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/stratus-ccm/stratus/deploy/mixin"
)

func main() {
	root := flag.String("root", ".", "the repository root")
	check := flag.Bool("check", false, "fail when the committed files are stale instead of writing them")
	flag.Parse()
	if err := run(*root, *check); err != nil {
		fmt.Fprintln(os.Stderr, "mixingen:", err)
		os.Exit(1)
	}
}

func run(root string, check bool) error {
	files, err := mixin.Generated()
	if err != nil {
		return err
	}
	stale, err := Write(root, files, check)
	if err != nil {
		return err
	}
	if len(stale) > 0 {
		return fmt.Errorf("stale (run make generate): %v", stale)
	}
	return nil
}

// Write writes files under root, or with check only lists those that differ.
func Write(root string, files map[string][]byte, check bool) (stale []string, err error) {
	for _, p := range slices.Sorted(maps.Keys(files)) {
		full := filepath.Join(root, filepath.FromSlash(p))
		if check {
			if have, err := os.ReadFile(full); err != nil || !bytes.Equal(have, files[p]) {
				stale = append(stale, p)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(full, files[p], 0o644); err != nil {
			return nil, err
		}
	}
	return stale, nil
}
