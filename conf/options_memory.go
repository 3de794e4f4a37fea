package conf

var (
	// TaskManagerManagedMemorySize is a TaskManager's managed memory,
	// divided evenly among its slots.
	TaskManagerManagedMemorySize = MemorySizeOption("taskmanager.memory.managed.size", 128*Mebibyte,
		"Managed memory of a TaskManager, divided evenly among its slots: batch operators that buffer (sorts, joins, blocking exchanges of the SDK's local executor) reserve pages of their slot's share and spill to io.tmp.dirs past it.")
	// IOTmpDirs are the directories batch operators spill to.
	IOTmpDirs = StringOption("io.tmp.dirs", "",
		"Directories batch operators spill sorted runs and buffers to, separated by ',' (used round-robin); empty means the job's directory in the TaskManager's work directory.")
)
