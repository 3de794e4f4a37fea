package conf

var (
	// CheckpointsDir is where checkpoint data and metadata go.
	CheckpointsDir = StringOption("state.checkpoints.dir", "",
		"Directory URI (file:// or hdfs://) under which checkpoint data and metadata are written.")
	// CheckpointingInterval is the time between checkpoints; 0 disables checkpointing.
	CheckpointingInterval = DurationOption("execution.checkpointing.interval", 0,
		"Time between the starts of two checkpoints; 0 disables checkpointing, otherwise at least 10 ms.")
)
