package restapi

import "errors"

// ErrLogNotFound is a log file a process does not have (404).
var ErrLogNotFound = errors.New("restapi: log not found")
