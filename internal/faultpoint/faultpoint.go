// Package faultpoint provides named pause points for crash tests and fault
// rules for chaos tests.
//
// A crash test starts a real starflow process with STARFLOW_FAULTPOINT set
// to a point name, optionally followed by "#N" to pause at the N-th time
// the point is reached (default the first). When the process gets there it
// prints "faultpoint NAME reached" on stderr and blocks forever, so the test
// can SIGKILL it exactly there — between two writes of one transaction, say
// — where a random kill almost never lands. With the variable unset, Hit
// costs one string comparison.
//
// Fault rules (Parse, Set; docs/faults.md) fail, delay or hang the store
// core's named queries, begin, commit and write operations (Check) and the
// pause points (Hit), or kill the process there, by a seeded rate or at the
// N-th call. With no rules installed a point costs one atomic load. The
// rules' environment variable, STARFLOW_FAULTS, is read only by binaries
// built with -tags chaos; this package never reads it.
//
// Import rule: standard library only.
package faultpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// EnvVar names the environment variable read once at start-up.
const EnvVar = "STARFLOW_FAULTPOINT"

var (
	armed, nth = parse(os.Getenv(EnvVar))
	hits       atomic.Int64
)

func parse(v string) (string, int64) {
	name, count, ok := strings.Cut(v, "#")
	if !ok {
		return name, 1
	}
	n, err := strconv.ParseInt(count, 10, 64)
	if err != nil || n < 1 {
		n = 1
	}
	return name, n
}

// Hit pauses the process forever when name is the armed point and this is
// the armed hit. Installed rules matching name run first (fail rules never
// match a pause point).
func Hit(name string) {
	if r := active.Load(); r != nil {
		hitRules(r, name)
	}
	if armed == "" || armed != name {
		return
	}
	if hits.Add(1) != nth {
		return
	}
	fmt.Fprintf(os.Stderr, "faultpoint %s reached\n", name)
	select {}
}
