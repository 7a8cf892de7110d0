package egress

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func prefixes(t *testing.T, s ...string) []netip.Prefix {
	t.Helper()
	p, err := ParsePrefixes("test", s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPolicyCheck(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		allow, deny []string
		addr        string
		refusedAs   string // "" = allowed
	}{
		// Always refused by default: link-local and metadata, in every form.
		{name: "aws metadata", addr: "169.254.169.254", refusedAs: "169.254.169.254"},
		{name: "ecs metadata", addr: "169.254.170.2", refusedAs: "169.254.170.2"},
		{name: "ipv4 link-local", addr: "169.254.0.1", refusedAs: "169.254.0.1"},
		{name: "ipv4-mapped metadata", addr: "::ffff:169.254.169.254", refusedAs: "169.254.169.254"},
		{name: "ipv6 link-local", addr: "fe80::1", refusedAs: "fe80::1"},
		{name: "ipv6 link-local with zone", addr: "fe80::1%eth0", refusedAs: "fe80::1"},
		{name: "aws metadata over ipv6", addr: "fd00:ec2::254", refusedAs: "fd00:ec2::254"},
		{name: "alibaba metadata", addr: "100.100.100.200", refusedAs: "100.100.100.200"},
		{name: "nat64 metadata", addr: "64:ff9b::a9fe:a9fe", refusedAs: "64:ff9b::a9fe:a9fe"},
		{name: "6to4 metadata", addr: "2002:a9fe:a9fe::1", refusedAs: "2002:a9fe:a9fe::1"},
		{name: "ipv4-compatible metadata", addr: "::a9fe:a9fe", refusedAs: "::a9fe:a9fe"},
		// Allowed by default: loopback, private, shared, public.
		{name: "loopback", addr: "127.0.0.1"},
		{name: "loopback range", addr: "127.8.9.10"},
		{name: "ipv4-mapped loopback", addr: "::ffff:127.0.0.1"},
		{name: "ipv6 loopback", addr: "::1"},
		{name: "private 10", addr: "10.1.2.3"},
		{name: "private 172", addr: "172.20.0.5"},
		{name: "private 192", addr: "192.168.1.1"},
		{name: "shared 100.64", addr: "100.64.0.1"},
		{name: "unique local", addr: "fd12:3456::1"},
		{name: "public v4", addr: "8.8.8.8"},
		{name: "public v6", addr: "2606:4700:4700::1111"},
		// Refused by the IANA special-purpose registries (ssrf).
		{name: "unspecified", addr: "0.0.0.0", refusedAs: "0.0.0.0"},
		{name: "multicast", addr: "224.0.0.1", refusedAs: "224.0.0.1"},
		{name: "documentation", addr: "192.0.2.1", refusedAs: "192.0.2.1"},
		{name: "ipv6 multicast", addr: "ff02::1", refusedAs: "ff02::1"},
		{name: "ipv6 unspecified", addr: "::", refusedAs: "::"},
		// Operator allow and deny.
		{name: "allowed link-local", allow: []string{"169.254.0.0/16"}, addr: "169.254.169.254"},
		{name: "allowed link-local, mapped", allow: []string{"169.254.0.0/16"}, addr: "::ffff:169.254.169.254"},
		{name: "allowed as mapped prefix", allow: []string{"::ffff:169.254.169.254/128"}, addr: "169.254.169.254"},
		{name: "allowed one address", allow: []string{"169.254.169.254"}, addr: "169.254.169.254"},
		{name: "allowed one address, not its neighbour", allow: []string{"169.254.169.254"}, addr: "169.254.169.253", refusedAs: "169.254.169.253"},
		{name: "allow v4 does not allow v6 link-local", allow: []string{"169.254.0.0/16"}, addr: "fe80::1", refusedAs: "fe80::1"},
		{name: "allowed nat64, public inside", allow: []string{"64:ff9b::/96"}, addr: "64:ff9b::808:808"},
		{name: "allowed nat64, metadata inside", allow: []string{"64:ff9b::/96"}, addr: "64:ff9b::a9fe:a9fe", refusedAs: "64:ff9b::a9fe:a9fe"},
		{name: "allowed nat64 and link-local", allow: []string{"64:ff9b::/96", "169.254.0.0/16"}, addr: "64:ff9b::a9fe:a9fe"},
		{name: "allowed documentation range", allow: []string{"192.0.2.0/24"}, addr: "192.0.2.1"},
		{name: "denied private", deny: []string{"10.0.0.0/8"}, addr: "10.1.2.3", refusedAs: "10.1.2.3"},
		{name: "denied loopback, mapped", deny: []string{"127.0.0.0/8"}, addr: "::ffff:127.0.0.1", refusedAs: "127.0.0.1"},
		{name: "denied public", deny: []string{"8.8.8.0/24"}, addr: "8.8.8.8", refusedAs: "8.8.8.8"},
		{name: "allow wins over deny", allow: []string{"127.0.0.1/32"}, deny: []string{"127.0.0.0/8"}, addr: "127.0.0.1"},
		{name: "deny the rest of the range", allow: []string{"127.0.0.1/32"}, deny: []string{"127.0.0.0/8"}, addr: "127.0.0.2", refusedAs: "127.0.0.2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := New(Config{Allow: prefixes(t, c.allow...), Deny: prefixes(t, c.deny...)})
			err := p.Check(netip.MustParseAddr(c.addr))
			if c.refusedAs == "" {
				if err != nil {
					t.Fatalf("%s refused: %v", c.addr, err)
				}
				return
			}
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("%s: got %v, want a refusal", c.addr, err)
			}
			if want := "egress to " + c.refusedAs + " refused by policy"; err.Error() != want || re.Type() != TypeRefused {
				t.Fatalf("%s: %q (type %s), want %q (type %s)", c.addr, err, re.Type(), want, TypeRefused)
			}
		})
	}
}

func TestPolicyControl(t *testing.T) {
	t.Parallel()
	p := New(Config{})
	for address, want := range map[string]string{
		"169.254.169.254:80":       "egress to 169.254.169.254 refused by policy",
		"[fe80::1%lo]:8080":        "egress to fe80::1%lo refused by policy",
		"[fd00:ec2::254]:80":       "egress to fd00:ec2::254 refused by policy",
		"127.0.0.1:80":             "",
		"[::1]:443":                "",
		"not-an-address":           "egress to not-an-address refused by policy",
		"metadata.internal.test:1": "egress to metadata.internal.test refused by policy",
	} {
		err := p.Control("tcp", address, nil)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("Control(%s) = %q, want %q", address, got, want)
		}
	}
}

func TestCheckHostResolves(t *testing.T) {
	t.Parallel()
	r := startDNS(t, map[string][]netip.Addr{
		"metadata.test": {netip.MustParseAddr("169.254.169.254")},
		"mapped.test":   {netip.MustParseAddr("::ffff:169.254.169.254")},
		"ec2v6.test":    {netip.MustParseAddr("fd00:ec2::254")},
		"mixed.test":    {netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("127.0.0.1")},
		"service.test":  {netip.MustParseAddr("10.0.0.5")},
	})
	p := New(Config{Resolver: r})
	ctx := context.Background()
	for host, want := range map[string]string{
		"metadata.test":   "egress to 169.254.169.254 refused by policy",
		"mapped.test":     "egress to 169.254.169.254 refused by policy",
		"ec2v6.test":      "egress to fd00:ec2::254 refused by policy",
		"mixed.test":      "", // one address passes: the dialer connects to that one
		"service.test":    "",
		"absent.test":     "", // not resolved: the request fails with the resolver's error
		"169.254.169.254": "egress to 169.254.169.254 refused by policy",
		"::1":             "",
	} {
		err := p.CheckHost(ctx, host)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("CheckHost(%s) = %q, want %q", host, got, want)
		}
	}
}

func TestParsePrefixes(t *testing.T) {
	t.Parallel()
	got, err := ParsePrefixes("--egress-allow", []string{" 169.254.169.254/16 ", "", "fd00:ec2::254", "10.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].String() != "169.254.0.0/16" || got[1].String() != "fd00:ec2::254/128" || got[2].String() != "10.0.0.1/32" {
		t.Fatalf("got %v", got)
	}
	for _, bad := range []string{"10.0.0.0/33", "10.0.0/8", "example.com", "fe80::1%eth0", "::/129", "1.2.3.4/"} {
		_, err := ParsePrefixes("STARFLOW_EGRESS_DENY", []string{"8.8.8.8/32", bad})
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, `STARFLOW_EGRESS_DENY "`+bad+`" is not a CIDR (want ADDRESS/BITS`) {
			t.Errorf("%q: %s", bad, msg)
		}
	}
}
