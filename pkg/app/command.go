package app

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

// Main runs the command until SIGINT or SIGTERM and returns the exit code.
// Its arguments are args, or the process's when there are none.
func Main(version string, args ...string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	cmd := NewCommand(version)
	if len(args) > 0 {
		cmd.SetArgs(args)
	}
	err := cmd.ExecuteContext(ctx)
	stop()
	klog.Flush()
	if err != nil {
		return 1
	}
	return 0
}

// NewCommand returns the stratus-ccm command; version is what --version
// prints.
func NewCommand(version string) *cobra.Command {
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
	cmd.AddCommand(newPluginCommand())
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		fmt.Fprintf(c.ErrOrStderr(), "stratus-ccm: %v\nRun 'stratus-ccm --help' for the flags.\n", err)
		return err
	})
	return cmd
}
