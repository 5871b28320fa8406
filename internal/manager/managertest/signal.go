package managertest

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// signalContext is cancelled by SIGTERM or SIGINT, as the stratus-ccm command's.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
