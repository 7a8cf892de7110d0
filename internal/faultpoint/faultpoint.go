// Package faultpoint provides named pause points for crash tests.
//
// A crash test starts a real starflow process with STARFLOW_FAULTPOINT set
// to a point name. When the process reaches that point it prints
// "faultpoint NAME reached" on stderr and blocks forever, so the test can
// SIGKILL it exactly there — between two writes of one transaction, say —
// where a random kill almost never lands. With the variable unset Hit costs
// one string comparison.
//
// Import rule: standard library only.
package faultpoint

import (
	"fmt"
	"os"
)

// EnvVar names the environment variable read once at start-up.
const EnvVar = "STARFLOW_FAULTPOINT"

var armed = os.Getenv(EnvVar)

// Hit pauses the process forever when name is the armed point.
func Hit(name string) {
	if armed == "" || armed != name {
		return
	}
	fmt.Fprintf(os.Stderr, "faultpoint %s reached\n", name)
	select {}
}
