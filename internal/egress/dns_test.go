package egress

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// dnsServer is a tiny authoritative DNS server on a real UDP socket of
// 127.0.0.1 that answers A and AAAA questions for the names it was given
// (any other question: no answer). A net.Resolver pointed at it goes
// through Go's own resolver code, as the dialer does in production.
type dnsServer struct {
	conn    net.PacketConn
	records map[string][]netip.Addr // lower-case name without the final dot
}

func startDNS(t *testing.T, records map[string][]netip.Addr) *net.Resolver {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dnsServer{conn: conn, records: records}
	done := make(chan struct{})
	go func() { defer close(done); s.serve() }()
	t.Cleanup(func() { conn.Close(); <-done })
	addr := conn.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

func (s *dnsServer) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp := s.answer(buf[:n]); resp != nil {
			_, _ = s.conn.WriteTo(resp, from)
		}
	}
}

// answer builds the response to one query (nil: malformed, dropped).
func (s *dnsServer) answer(q []byte) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil
	}
	// The question: labels up to the zero byte, then type and class.
	i := 12
	var labels []string
	for i < len(q) && q[i] != 0 {
		l := int(q[i])
		if i+1+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[i+1:i+1+l]))
		i += 1 + l
	}
	end := i + 5
	if end > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i+1 : i+3])
	name := strings.ToLower(strings.Join(labels, "."))
	var answers []netip.Addr
	for _, a := range s.records[name] {
		if (qtype == 1 && a.Is4()) || (qtype == 28 && a.Is6()) {
			answers = append(answers, a)
		}
	}
	resp := make([]byte, 0, 512)
	resp = append(resp, q[0], q[1], 0x85, 0x80) // id; QR, AA, RD, RA, NOERROR
	resp = binary.BigEndian.AppendUint16(resp, 1)
	resp = binary.BigEndian.AppendUint16(resp, uint16(len(answers)))
	resp = append(resp, 0, 0, 0, 0) // no authority, no additional records
	resp = append(resp, q[12:end]...)
	for _, a := range answers {
		resp = append(resp, 0xc0, 12) // the question's name
		resp = binary.BigEndian.AppendUint16(resp, qtype)
		resp = binary.BigEndian.AppendUint16(resp, 1) // IN
		resp = binary.BigEndian.AppendUint32(resp, 60)
		b := a.AsSlice()
		resp = binary.BigEndian.AppendUint16(resp, uint16(len(b)))
		resp = append(resp, b...)
	}
	return resp
}

// TestDNSServerAnswers checks the test's own DNS server through Go's
// resolver, so the policy tests below rest on a working resolution.
func TestDNSServerAnswers(t *testing.T) {
	r := startDNS(t, map[string][]netip.Addr{"svc.test": {netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("fd00::7")}})
	got, err := r.LookupNetIP(context.Background(), "ip", "svc.test")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"10.1.2.3": true, "fd00::7": true}
	if len(got) != 2 || !want[got[0].String()] || !want[got[1].String()] {
		t.Fatalf("svc.test resolved to %v, want 10.1.2.3 and fd00::7", got)
	}
	if _, err := r.LookupNetIP(context.Background(), "ip", "absent.test"); err == nil {
		t.Fatal("absent.test resolved")
	}
}
