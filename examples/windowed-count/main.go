// Command windowed-count is a streaming event-time example: it counts
// generated events per key in tumbling event-time windows. The events are
// out of order within a bound (BoundedOutOfOrderness watermarks), and every
// 50th event is later than that: it is counted if its window is still open
// and dropped otherwise. Each window result is one line
// "key window_start window_end count" (milliseconds).
//
//	go run ./examples/windowed-count --events 10000 --parallelism 2 --output /tmp/windows
//	gofl run -p 4 ./examples/windowed-count --output /tmp/windows
package main

import (
	"github.com/gofl/gofl/examples/windowed-count/windowedcount"
	"github.com/gofl/gofl/stream"
)

func init() { stream.RegisterJob(windowedcount.JobName, windowedcount.Job) }

func main() { stream.Main() }
