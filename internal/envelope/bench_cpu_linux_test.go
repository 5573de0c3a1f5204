//go:build linux

package envelope

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time used by the calling OS thread (the caller
// locks it), so a benchmark can time its phases independently of the other
// processes sharing the machine.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
