// Command starflow is the Starflow CLI: run workflows on the embedded
// SQLite store, validate definitions, inspect runs, and run workers.
// It parses flags and calls library code; see package starflow.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	os.Exit(run())
}

func run() (code int) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(os.Stderr, "starflow: internal error: %s (please report it)\n", termSafe(fmt.Sprint(p)))
			code = 70
		}
	}()
	if err := chaosSetup(); err != nil {
		fmt.Fprintln(os.Stderr, "starflow: "+termSafe(err.Error()))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := newRootCmd()
	if err := cmd.ExecuteContext(ctx); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(os.Stderr, "starflow: "+termText(ee.msg))
			}
			return ee.code
		}
		// Library errors may carry their own "starflow: " prefix.
		fmt.Fprintln(os.Stderr, "starflow: "+termSafe(strings.TrimPrefix(oneLine(err.Error()), "starflow: ")))
		return 1
	}
	return 0
}

// exitError carries an exit code (and an optional message already shaped
// for the user).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// version is the build's version, set with -ldflags "-X main.version=…";
// the OpenAPI document carries it.
var version = "dev"
