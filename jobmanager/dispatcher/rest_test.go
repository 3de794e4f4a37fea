package dispatcher

import "github.com/gofl/gofl/jobmanager/rest"

// The Dispatcher serves the REST API's queries; asserted here, so the
// package imports rest only for its tests.
var _ rest.Dispatcher = (*Dispatcher)(nil)
