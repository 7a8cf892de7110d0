package main

import (
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/starflow/starflow/workflow"
)

// The caps of workflow.Limits as flags (and environment variables), by
// what a command does with them:
//
//	limitsDefinition  validate, apply, run: the static caps of a definition
//	limitsInput       enqueue, run, worker, dev: a run's (or child's) input
//	limitsPayload     wake, signal, worker, server, dev: wake and signal payloads
//	limitsRun         run, worker, dev: for_each items, items in flight, child-run depth
//
// A flag left unset takes the environment variable, else the default;
// 0 means the default, a negative value lifts the cap.
type limitGroup int

const (
	limitsDefinition limitGroup = iota
	limitsInput
	limitsPayload
	limitsRun
)

// limitFlags are the limit flags one command registered.
type limitFlags struct {
	cmd   *cobra.Command
	l     workflow.Limits
	flags []limitFlag
}

type limitFlag struct {
	lim workflow.Limit
	i64 *int64
	i   *int
}

// register adds the flags of the given groups to cmd.
func (f *limitFlags) register(cmd *cobra.Command, groups ...limitGroup) {
	f.cmd = cmd
	add64 := func(lim workflow.Limit, p *int64, def int64, what string) {
		cmd.Flags().Int64Var(p, lim.Flag[2:], 0, fmt.Sprintf("%s, in bytes (env %s; default %d; -1: no limit)", what, lim.Env, def))
		f.flags = append(f.flags, limitFlag{lim: lim, i64: p})
	}
	add := func(lim workflow.Limit, p *int, def int, what string) {
		cmd.Flags().IntVar(p, lim.Flag[2:], 0, fmt.Sprintf("%s (env %s; default %d; -1: no limit)", what, lim.Env, def))
		f.flags = append(f.flags, limitFlag{lim: lim, i: p})
	}
	for _, g := range groups {
		switch g {
		case limitsDefinition:
			add64(workflow.LimitSourceBytes, &f.l.SourceBytes, workflow.SourceBytesDefault, "largest definition source")
			add(workflow.LimitNestingDepth, &f.l.NestingDepth, workflow.NestingDepthDefault, "deepest nesting of control-flow constructs")
			add(workflow.LimitForEachConcurrency, &f.l.ForEachConcurrency, workflow.ForEachConcurrencyDefault, "largest for_each concurrency a definition may set")
			add(workflow.LimitMaxIterations, &f.l.MaxIterations, workflow.MaxIterationsDefault, "largest repeat_until max_iterations a definition may set")
		case limitsInput:
			add64(workflow.LimitInputBytes, &f.l.InputBytes, workflow.InputBytesDefault, "largest run input (JSON)")
		case limitsPayload:
			add64(workflow.LimitPayloadBytes, &f.l.PayloadBytes, workflow.PayloadBytesDefault, "largest wake or signal payload (JSON)")
		case limitsRun:
			add(workflow.LimitForEachItems, &f.l.ForEachItems, workflow.ForEachItemsDefault, "most items a for_each may iterate over")
			add(workflow.LimitForEachInFlight, &f.l.ForEachInFlight, workflow.ForEachInFlightDefault, "most items of one for_each a runner runs at once, whatever its concurrency")
			add(workflow.LimitChildDepth, &f.l.ChildDepth, workflow.ChildDepthDefault, "deepest a child run may nest below its root run (workflow_call)")
		}
	}
}

// resolve returns the limits: each flag given, else its environment
// variable, else the default. An environment value that is not an integer
// is an error naming the variable.
func (f *limitFlags) resolve() (workflow.Limits, error) {
	for _, fl := range f.flags {
		if f.cmd != nil && f.cmd.Flags().Changed(fl.lim.Flag[2:]) {
			continue
		}
		v, ok := os.LookupEnv(fl.lim.Env)
		if !ok || v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return workflow.Limits{}, fmt.Errorf("%s=%q: not an integer (%s; 0 for the default, -1 for no limit)", fl.lim.Env, v, fl.lim.Key)
		}
		if fl.i64 != nil {
			*fl.i64 = n
		} else {
			*fl.i = int(n)
		}
	}
	return f.l.WithDefaults(), nil
}

// readLimited reads what r holds up to limit bytes (negative: no limit)
// and reports whether there was more.
func readLimited(r io.Reader, limit int64) ([]byte, bool, error) {
	if limit < 0 {
		b, err := io.ReadAll(r)
		return b, false, err
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(b)) > limit {
		return b[:limit], true, nil
	}
	return b, false, nil
}

// readFileLimited reads the file at path, no further than one byte past
// limit (negative: no limit). size is how many bytes the file holds: its
// length, or, when it is over limit, its size on disk (limit+1 for what
// is not a regular file), so the caller's check of the cap names it.
func readFileLimited(path string, limit int64) (data []byte, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	b, more, err := readLimited(f, limit)
	if err != nil || !more {
		return b, int64(len(b)), err
	}
	size = limit + 1
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > size {
		size = fi.Size()
	}
	return nil, size, nil
}
