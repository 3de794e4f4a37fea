// Package client is the Go client of the Dispatcher's REST API
// (jobmanager/rest), used by the gofl CLI and by tests that drive a real
// cluster.
//
// A Client is bound to one JobManager REST address and is safe for
// concurrent use. Each method is one HTTP request bounded by the Client's
// timeout and the caller's context; none retries, except WaitForJobStatus,
// which polls.
//
// Errors from the server are *Error values carrying the status code and the
// server's messages. They wrap the restapi sentinel that matches the status:
// 400 (and 405, 413) restapi.ErrBadRequest; 404 restapi.ErrJobNotFound on job
// paths and restapi.ErrTaskManagerNotFound on TaskManager paths; 409
// restapi.ErrDuplicateJob on submission and restapi.ErrJobNotCancellable on
// cancellation. So callers test errors.Is(err, restapi.ErrJobNotFound).
// Failing to connect names the address that could not be reached.
package client
