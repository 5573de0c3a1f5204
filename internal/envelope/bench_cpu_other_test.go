//go:build !linux

package envelope

import "time"

// threadCPU is not measured here: the CPU ratios are not reported.
func threadCPU() time.Duration { return 0 }
