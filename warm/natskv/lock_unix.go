//go:build unix

package natskv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive, non-blocking lock on dir/starflow-warm.lock
// so that two embedded servers never share a store directory (each would
// write the same JetStream files). The lock is per open file, so it also
// holds within one process; it goes with the process.
func lockDir(dir string) (unlock func(), err error) {
	path := filepath.Join(dir, "starflow-warm.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("warm/natskv: embedded NATS: lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("warm/natskv: embedded NATS store directory %s is in use by another embedded server (lock %s held): give each process its own directory, or share one NATS server with nats://", dir, path)
		}
		return nil, fmt.Errorf("warm/natskv: embedded NATS: lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
