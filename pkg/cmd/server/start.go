package server

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/term"
)

// NewCommand returns the mydb-apiserver command.
func NewCommand(ctx context.Context, o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mydb-apiserver",
		Short: "Serve the example.com API (MyDatabase) to a Kubernetes cluster's aggregation layer",
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return o.ComponentGlobalsRegistry.Set()
		},
		RunE: func(c *cobra.Command, _ []string) error {
			if o.Controller.PrintManagedImages || o.Controller.PrintManagedImagesPolicy {
				images, err := o.Controller.ManagedImages()
				if err != nil {
					return err
				}
				if o.Controller.PrintManagedImagesPolicy {
					policy, err := ManagedImagesPolicy(images)
					if err != nil {
						return err
					}
					fmt.Fprint(c.OutOrStdout(), policy)
					return nil
				}
				for _, image := range images {
					fmt.Fprintln(c.OutOrStdout(), image)
				}
				return nil
			}
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(c.Context())
		},
	}
	cmd.SetContext(ctx)

	fss := o.Flags()
	for _, fs := range fss.FlagSets {
		cmd.Flags().AddFlagSet(fs)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, fss, cols)
	return cmd
}

// Run builds the server from the options and serves until ctx is done.
func (o *Options) Run(ctx context.Context) error {
	config, err := o.Config()
	if err != nil {
		return err
	}
	server, err := config.Complete().New()
	if err != nil {
		return fmt.Errorf("building the server: %w", err)
	}
	return server.GenericAPIServer.PrepareRun().RunWithContext(ctx)
}
