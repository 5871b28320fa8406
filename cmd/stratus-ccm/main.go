// Command stratus-ccm is the stratus cloud controller manager: a drop-in for the
// upstream cloud-controller-manager (same flags), with several providers per
// cluster through --config. See docs/install.md and docs/flags.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/internal/manager"
)

// version is stamped at build time: -ldflags "-X main.version=v0.1.0".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newCommand().ExecuteContext(ctx)
	stop()
	klog.Flush()
	if err != nil {
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	opts := manager.NewOptions()
	cmd := &cobra.Command{
		Use:   "stratus-ccm",
		Short: "stratus cloud controller manager",
		Long: `stratus-ccm runs the cloud node, node lifecycle, service (load balancer) and
route controllers for one or several cloud providers. It accepts the flags of
the upstream cloud-controller-manager; see docs/flags.md.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Version {
				fmt.Fprintf(cmd.OutOrStdout(), "stratus-ccm %s\n", version)
				return nil
			}
			logger := klog.NewKlogr()
			ctrl.SetLogger(logger)
			ctx := log.IntoContext(cmd.Context(), logger)
			logger.Info("stratus-ccm", "version", version)
			err := manager.Run(ctx, opts)
			switch {
			case errors.Is(err, manager.ErrLeaderElectionLost):
				logger.Error(err, "leaderelection lost; exiting so that a restart joins as a standby")
			case err != nil:
				fmt.Fprintf(cmd.ErrOrStderr(), "stratus-ccm: %v\n", err)
			}
			return err
		},
	}
	opts.AddFlags(cmd.Flags())
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		fmt.Fprintf(c.ErrOrStderr(), "stratus-ccm: %v\nRun 'stratus-ccm --help' for the flags.\n", err)
		return err
	})
	return cmd
}
