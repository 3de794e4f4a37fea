// Package rest serves the Dispatcher's REST API over net/http, shaped like
// Flink's: the same paths (/overview, /jobs, /jobs/overview, /jobs/{jobid},
// /jobs/{jobid}/exceptions, /taskmanagers, /taskmanagers/{tmid}), the same
// JSON field names (rpc/restapi) and the same error body,
// {"errors": [...]}. Paths may carry Flink's version prefix /v1 and a
// trailing slash. Routing is net/http's ServeMux with method patterns, so
// every GET route also answers HEAD (the same status and headers, no body).
//
// NewHandler turns a Dispatcher into an http.Handler. The handler owns no
// state: every request calls the Dispatcher with the request's context
// bounded by Options.RequestTimeout, and maps the returned error to a status
// code:
//
//	400  malformed JSON, a body that is not a JobGraph, jobgraph.ErrInvalid
//	     (one entry per problem), restapi.ErrBadRequest, an unknown cancel mode
//	404  restapi.ErrJobNotFound, restapi.ErrTaskManagerNotFound, unknown paths
//	405  a known path with the wrong method (with an Allow header listing
//	     the methods it serves, HEAD wherever GET)
//	409  restapi.ErrDuplicateJob, restapi.ErrJobNotCancellable
//	413  a body above Options.MaxBodyBytes
//	500  anything else; logged, and only the error text is returned
//
// POST /jobs takes the JobGraph as protobuf JSON (protojson of rpc/pb.JobGraph,
// enums by name such as "JOB_TYPE_STREAMING") and answers 202 Accepted with
// {"jobUrl": "/jobs/<id>", "jobid": "<id>"}. PATCH /jobs/{jobid} cancels
// (Flink's ?mode=cancel, the default) and answers 202 with {}.
//
// Package resttest holds an in-memory Dispatcher for tests of this package,
// the client and the CLI.
package rest
