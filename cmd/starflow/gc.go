package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/starflow/starflow"
)

func newGCCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "gc",
		Short: "Remove expired session variables now (what maintenance does every minute)",
		Long: `Remove the session variables whose keep_until has passed (database clock) and say how
many. Variables written without keep_until are dropped when their run ends, not here.
"starflow server" and "starflow dev" run the same pass every minute.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			store, err := g.openExistingStore(ctx)
			if err != nil {
				return err
			}
			defer store.Close()
			eng, err := starflow.New(starflow.Config{Store: store, Logger: g.logger(os.Stderr), NoRunner: true})
			if err != nil {
				return err
			}
			n, err := eng.CollectSessionVars(ctx)
			if err != nil {
				return fmt.Errorf("session-variable GC: %w (removed %d before the error)", err, n)
			}
			switch n {
			case 0:
				fmt.Println("gc: no expired session variables")
			case 1:
				fmt.Println("gc: removed 1 expired session variable")
			default:
				fmt.Printf("gc: removed %d expired session variables\n", n)
			}
			return nil
		},
	}
}
