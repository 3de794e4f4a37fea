// Command keyed-join joins generated orders with their payments by order id
// in tumbling event-time windows (an inner windowed join: unpaid orders and
// payments that fall into a later window than their order do not join) and
// keeps a running total of the paid amounts per user in keyed ValueState,
// applied in event-time order. Each update is one line
// "user paid_ts order_id method amount total".
//
//	go run ./examples/keyed-join --orders 5000 --parallelism 2 --output /tmp/totals
//	gofl run -p 4 ./examples/keyed-join --output /tmp/totals
package main

import (
	"github.com/gofl/gofl/examples/keyed-join/keyedjoin"
	"github.com/gofl/gofl/stream"
)

func init() { stream.RegisterJob(keyedjoin.JobName, keyedjoin.Job) }

func main() { stream.Main() }
