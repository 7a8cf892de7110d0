// Package egress is the policy that every outbound HTTP request a workflow
// causes goes through (service_call, a wait's notify and its maintenance
// retries): where it may connect, and what a redirect may carry.
//
// The address check runs in the dialer's Control hook, after DNS
// resolution and before connect(2), so a name that resolves to a refused
// address is refused too, and nothing is sent to it. In order:
//
//  1. An address in an operator's Allow prefix is allowed (for an address
//     that embeds an IPv4 address — IPv4-mapped ::ffff:a.b.c.d, NAT64
//     64:ff9b::/96, 6to4 2002::/16 — the embedded address must pass too).
//  2. An address in an operator's Deny prefix, or in AlwaysRefused
//     (link-local 169.254.0.0/16 and fe80::/10, cloud metadata
//     169.254.169.254, fd00:ec2::254, 100.100.100.200), is refused.
//  3. Loopback (127.0.0.0/8, ::1), private (10.0.0.0/8, 172.16.0.0/12,
//     192.168.0.0/16, fc00::/7) and shared (100.64.0.0/10) addresses are
//     allowed (workflows call internal services).
//  4. Every other address is judged by code.dny.dev/ssrf, which follows the
//     IANA special-purpose registries: public unicast is allowed; the
//     unspecified, documentation, benchmarking, reserved and multicast
//     ranges, and IPv6 outside 2000::/3, are refused.
//
// A refusal is a *RefusedError ("egress to ADDR refused by policy"), which
// the engine treats as permanent (no step retry, no run-level retry).
//
// Redirects (CheckRedirect): at most MaxRedirects; Referer is never sent;
// a redirect to another origin (scheme, host, port) than the request's
// carries only Accept and User-Agent, and one that would re-send a request
// body to another origin (307, 308) is refused.
//
// Import rule: standard library and code.dny.dev/ssrf only.
package egress
