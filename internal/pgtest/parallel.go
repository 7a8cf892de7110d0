package pgtest

import (
	"flag"
	"runtime"
	"strconv"
)

// RaiseParallel sets -test.parallel to n when the command line left it at
// its default (GOMAXPROCS, 2 on CI's machines) and that is lower. For the
// TestMain of a package whose parallel tests spend their time waiting
// (on real processes, a lease TTL, a timer) rather than computing: at the
// default most of the machine idles through them. Measure first: tests
// that keep PostgreSQL busy only contend more (state/pgstore's suite ran
// slower at 6).
// It parses the command line first (flag.Parse), as m.Run would.
func RaiseParallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set && runtime.GOMAXPROCS(0) < n {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}
