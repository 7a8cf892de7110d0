package starflow

import (
	"net/netip"

	"github.com/starflow/starflow/internal/egress"
)

// EgressPolicy says where the outbound HTTP requests a workflow causes
// (service_call, a wait's notify and its maintenance retries) may
// connect. It is checked when the connection is dialled, after DNS
// resolution, so a name resolving to a refused address is refused too;
// redirects are dialled the same way. The zero value is the default
// policy:
//
//   - refused: link-local 169.254.0.0/16 and fe80::/10, cloud metadata
//     169.254.169.254, fd00:ec2::254 and 100.100.100.200, in any form
//     (IPv4-mapped ::ffff:a.b.c.d, NAT64, 6to4); the unspecified,
//     documentation, benchmarking, reserved and multicast ranges, and IPv6
//     outside 2000::/3 other than ::1 and fc00::/7 (the IANA
//     special-purpose registries, as code.dny.dev/ssrf keeps them);
//   - allowed: loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7),
//     shared 100.64.0.0/10 and public addresses.
//
// A refused request fails its step at once, without retries, with an
// error of type egress_refused: "egress to 169.254.169.254 refused by
// policy" (the address dialled).
type EgressPolicy struct {
	// Allow lists prefixes always allowed, checked before everything
	// else: the way to reach an address refused by default (e.g.
	// 169.254.0.0/16 for a metadata service a workflow must call).
	// Default none.
	Allow []netip.Prefix
	// Deny lists prefixes refused besides the default ones (e.g.
	// 10.0.0.0/8 to keep workflows off a private network). Allow wins
	// over Deny. Default none.
	Deny []netip.Prefix
}

// ParseEgressCIDRs parses CIDRs for EgressPolicy (ADDRESS/BITS; a bare
// address means that one address). Blank values are skipped. An invalid
// value is an error naming source (the flag or variable it came from)
// and the value.
func ParseEgressCIDRs(source string, values []string) ([]netip.Prefix, error) {
	return egress.ParsePrefixes(source, values)
}

// egressPolicy is the engine's egress policy, nil when an HTTPClient of the
// embedder's decides where requests go.
func (c *Config) egressPolicy() *egress.Policy {
	if c.HTTPClient != nil {
		return nil
	}
	return egress.New(egress.Config{Allow: c.Egress.Allow, Deny: c.Egress.Deny})
}
