package taskmanager

import "syscall"

// machineMemory is the machine's total and free memory in bytes; zeros
// when unknown.
func machineMemory() (total, free int64) {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0, 0
	}
	unit := int64(si.Unit)
	return int64(si.Totalram) * unit, int64(si.Freeram) * unit
}
