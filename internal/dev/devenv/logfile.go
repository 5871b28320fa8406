package devenv

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// fileLogger returns a logger writing one line per record to path (the
// dev environment's own log: kubelets, fleet, minicloud), and a close func.
func fileLogger(path string) (logr.Logger, func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return logr.Discard(), nil, fmt.Errorf("log dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return logr.Discard(), nil, fmt.Errorf("open log: %w", err)
	}
	var mu sync.Mutex
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(f, "%s %s %s\n", time.Now().Format(time.RFC3339Nano), prefix, args)
	}, funcr.Options{Verbosity: 1})
	return logger, func() {
		mu.Lock()
		defer mu.Unlock()
		f.Close()
	}, nil
}
