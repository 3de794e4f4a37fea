package taskmanager

import (
	"math"
	"runtime"
	"runtime/debug"

	"github.com/gofl/gofl/rpc/pb"
)

// hardware describes this process's machine for the ResourceManager
// (Flink's HardwareDescription): cores, the machine's memory and what is
// available of it now, the managed memory of its slots, and the Go
// runtime's memory limit.
func hardware(managed int64) *pb.TaskManagerHardware {
	h := &pb.TaskManagerHardware{CpuCores: int32(runtime.NumCPU()), ManagedMemory: managed}
	h.PhysicalMemory, h.FreeMemory = machineMemory()
	if l := debug.SetMemoryLimit(-1); l < math.MaxInt64 {
		h.MemoryLimit = l
	}
	return h
}
