package main

import (
	"net/netip"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/starflow/starflow"
)

// Environment variables of the egress policy: comma-separated CIDRs.
const (
	envEgressAllow = "STARFLOW_EGRESS_ALLOW"
	envEgressDeny  = "STARFLOW_EGRESS_DENY"
)

// egressFlags are --egress-allow and --egress-deny, on every command that
// executes runs or sends notify requests (run, worker, server, dev).
type egressFlags struct {
	allow, deny []string
}

func (f *egressFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringSliceVar(&f.allow, "egress-allow", nil,
		"CIDR that service_call and notify requests may always reach, even a refused-by-default one such as 169.254.0.0/16 (repeatable; env "+envEgressAllow+", comma-separated)")
	cmd.Flags().StringSliceVar(&f.deny, "egress-deny", nil,
		"CIDR that service_call and notify requests may not reach, besides link-local and cloud-metadata addresses (repeatable; env "+envEgressDeny+", comma-separated)")
}

// policy resolves the flags, or when a flag is not given its environment
// variable, into the engine's egress policy; an invalid CIDR is an error
// naming the flag or variable and the value.
func (f *egressFlags) policy(cmd *cobra.Command) (starflow.EgressPolicy, error) {
	var p starflow.EgressPolicy
	var err error
	if p.Allow, err = cidrs(cmd, "egress-allow", f.allow, envEgressAllow); err != nil {
		return p, err
	}
	p.Deny, err = cidrs(cmd, "egress-deny", f.deny, envEgressDeny)
	return p, err
}

func cidrs(cmd *cobra.Command, flag string, values []string, env string) ([]netip.Prefix, error) {
	if cmd.Flags().Changed(flag) {
		return starflow.ParseEgressCIDRs("--"+flag, values)
	}
	return starflow.ParseEgressCIDRs(env, strings.Split(os.Getenv(env), ","))
}
