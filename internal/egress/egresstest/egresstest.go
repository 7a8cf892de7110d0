// Package egresstest helps tests of the egress policy reach an address
// the policy refuses by default without touching anyone else's service:
// an HTTP server of the test's own on an IPv6 link-local address
// (fe80::/10) of this machine.
//
// Import rule: standard library only; imported by tests only.
package egresstest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// LinkLocalServer starts an HTTP server on an IPv6 link-local address of
// an interface that is up and returns it with its base URL
// ("http://[fe80::…%25IFACE]:PORT"). It skips the test when the machine
// has no usable link-local address. The server is closed at cleanup.
func LinkLocalServer(t testing.TB, h http.Handler) (*httptest.Server, string) {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatalf("listing network interfaces: %v", err)
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok || !ip.Is6() || !ip.IsLinkLocalUnicast() {
				continue
			}
			host := ip.String() + "%" + ifc.Name
			l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
			if err != nil {
				continue
			}
			_, port, _ := net.SplitHostPort(l.Addr().String())
			srv := httptest.NewUnstartedServer(h)
			srv.Listener.Close()
			srv.Listener = l
			srv.Start()
			t.Cleanup(srv.Close)
			return srv, "http://[" + ip.String() + "%25" + ifc.Name + "]:" + port
		}
	}
	t.Skip("this machine has no IPv6 link-local address to listen on")
	return nil, ""
}
