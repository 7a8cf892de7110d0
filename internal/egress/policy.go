package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"

	"code.dny.dev/ssrf"
)

// TypeRefused is the error type of a refusal (SPEC §2 error types).
const TypeRefused = "egress_refused"

// AlwaysRefused are the prefixes refused whatever else the policy says,
// unless an operator's Allow prefix names them: link-local (where cloud
// metadata services live) and the metadata addresses outside it.
var AlwaysRefused = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),     // IPv4 link-local; 169.254.169.254 (AWS, GCP, Azure, …) and 169.254.170.2 (ECS)
	netip.MustParsePrefix("fe80::/10"),          // IPv6 link-local
	netip.MustParsePrefix("fd00:ec2::254/128"),  // AWS metadata over IPv6
	netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud metadata
}

// DefaultAllowed are the special-purpose prefixes allowed by default
// (workflows call internal services); AlwaysRefused and an operator's Deny
// prefixes win over them.
var DefaultAllowed = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),    // loopback
	netip.MustParsePrefix("10.0.0.0/8"),     // private (RFC 1918)
	netip.MustParsePrefix("172.16.0.0/12"),  // private (RFC 1918)
	netip.MustParsePrefix("192.168.0.0/16"), // private (RFC 1918)
	netip.MustParsePrefix("100.64.0.0/10"),  // shared address space (RFC 6598: carrier NAT, overlay networks)
	netip.MustParsePrefix("::1/128"),        // IPv6 loopback
	netip.MustParsePrefix("fc00::/7"),       // IPv6 unique local (private)
}

// Prefixes that carry an IPv4 address inside an IPv6 one.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052: the IPv4 address in the last 32 bits
	sixToFour = netip.MustParsePrefix("2002::/16")    // RFC 3056: the IPv4 address in bits 16–47
	v4Compat  = netip.MustParsePrefix("::/96")        // deprecated IPv4-compatible ::a.b.c.d
)

// RefusedError is a connection the policy refused. Its message is
// "egress to ADDR refused by policy", ADDR the address dialled (after DNS
// resolution).
type RefusedError struct {
	Addr string
}

func (e *RefusedError) Error() string { return "egress to " + e.Addr + " refused by policy" }

// Type is the error's type, TypeRefused.
func (e *RefusedError) Type() string { return TypeRefused }

// Config configures a Policy. The zero value is the default policy.
type Config struct {
	// Allow lists prefixes always allowed, checked first: the way to reach
	// an address refused by default (e.g. 169.254.0.0/16). Default none.
	Allow []netip.Prefix
	// Deny lists prefixes refused in addition to AlwaysRefused (e.g.
	// 10.0.0.0/8 to keep workflows off a private network). Default none.
	Deny []netip.Prefix
	// Resolver resolves names for the dialer and CheckHost. Default
	// net.DefaultResolver. Tests inject one.
	Resolver *net.Resolver
}

// Policy decides which addresses outbound requests may connect to. It is
// safe for concurrent use and must not be modified after New.
type Policy struct {
	allow, deny []netip.Prefix
	resolver    *net.Resolver
	guard       *ssrf.Guardian
}

// New returns the policy of cfg.
func New(cfg Config) *Policy {
	p := &Policy{allow: normalize(cfg.Allow), deny: normalize(cfg.Deny), resolver: cfg.Resolver}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	var v4, v6 []netip.Prefix
	for _, pr := range DefaultAllowed {
		if pr.Addr().Is4() {
			v4 = append(v4, pr)
		} else {
			v6 = append(v6, pr)
		}
	}
	p.guard = ssrf.New(ssrf.WithAnyPort(), ssrf.WithAnyNetwork(),
		ssrf.WithAllowedV4Prefixes(v4...), ssrf.WithAllowedV6Prefixes(v6...))
	return p
}

// Check returns a *RefusedError when the policy refuses a, nil when it
// allows it.
func (p *Policy) Check(a netip.Addr) error {
	a = a.WithZone("").Unmap()
	if !p.allowed(a) {
		return &RefusedError{Addr: a.String()}
	}
	return nil
}

func (p *Policy) allowed(a netip.Addr) bool {
	for _, e := range embeddedV4(a) {
		if !contains(p.allow, e) && (contains(p.deny, e) || contains(AlwaysRefused, e)) {
			return false
		}
	}
	switch {
	case contains(p.allow, a):
		return true
	case contains(p.deny, a), contains(AlwaysRefused, a):
		return false
	}
	return p.guard.SafeAddr(a) == nil
}

// Control is the net.Dialer Control hook: it runs after DNS resolution
// and before connect, once per address tried, and refuses with a
// *RefusedError naming the address dialled.
func (p *Policy) Control(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return &RefusedError{Addr: address}
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !p.allowed(a.WithZone("").Unmap()) {
		return &RefusedError{Addr: host}
	}
	return nil
}

// CheckHost resolves host (a name or an IP literal, as url.URL.Hostname
// gives it) and returns a *RefusedError when the policy refuses every
// address it resolves to. A name that does not resolve is not refused:
// the request itself then fails with the resolver's error. It is a check
// ahead of time (a wait's notify URL, before the wait is entered); the
// dial-time check still applies to the request.
func (p *Policy) CheckHost(ctx context.Context, host string) error {
	if a, err := netip.ParseAddr(host); err == nil {
		return p.Check(a)
	}
	addrs, err := p.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	var first error
	for _, a := range addrs {
		err := p.Check(a)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// ParsePrefixes parses CIDRs (ADDRESS/BITS; a bare address is one
// address: /32 or /128). Blank values are skipped. An invalid value is an
// error naming source (a flag or variable name) and the value.
func ParsePrefixes(source string, values []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range values {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		var pr netip.Prefix
		var err error
		if strings.Contains(v, "/") {
			pr, err = netip.ParsePrefix(v)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(v); err == nil {
				if a.Zone() != "" {
					err = fmt.Errorf("an IPv6 zone (%%%s) is not allowed", a.Zone())
				} else {
					pr = netip.PrefixFrom(a, a.BitLen())
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s %q is not a CIDR (want ADDRESS/BITS, e.g. 169.254.0.0/16 or fd00:ec2::254/128): %v", source, v, err)
		}
		out = append(out, pr.Masked())
	}
	return out, nil
}

// normalize masks prefixes and turns IPv4-mapped IPv6 prefixes
// (::ffff:a.b.c.d/N, N ≥ 96) into IPv4 ones, as addresses are unmapped
// before they are checked.
func normalize(in []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(in))
	for _, pr := range in {
		if a := pr.Addr(); a.Is4In6() && pr.Bits() >= 96 {
			pr = netip.PrefixFrom(a.Unmap(), pr.Bits()-96)
		}
		out = append(out, pr.Masked())
	}
	return out
}

func contains(list []netip.Prefix, a netip.Addr) bool {
	for _, pr := range list {
		if pr.Contains(a) {
			return true
		}
	}
	return false
}

// embeddedV4 returns the IPv4 address an IPv6 address carries (NAT64,
// 6to4, IPv4-compatible), which must pass the policy too. a is unmapped.
func embeddedV4(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return []netip.Addr{netip.AddrFrom4([4]byte(b[12:16]))}
	case sixToFour.Contains(a):
		return []netip.Addr{netip.AddrFrom4([4]byte(b[2:6]))}
	case v4Compat.Contains(a) && !a.IsUnspecified() && !a.IsLoopback():
		return []netip.Addr{netip.AddrFrom4([4]byte(b[12:16]))}
	}
	return nil
}
