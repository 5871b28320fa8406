// Command gen writes docs/annotations.md from the annotation registry. Run it from
// the repository root: go run ./pkg/annotations/internal/gen
package main

import (
	"flag"
	"log"
	"os"

	"github.com/stratus-ccm/stratus/pkg/annotations"
)

func main() {
	out := flag.String("o", "docs/annotations.md", "file to write")
	flag.Parse()
	if err := os.WriteFile(*out, annotations.Markdown(), 0o644); err != nil {
		log.Fatalf("write %s: %v", *out, err)
	}
}
