// Package testagent is gofl's stand-in for a single-node `nomad agent -dev`:
// an HTTP server that speaks the part of Nomad's HTTP API the nomad provider
// uses, and a client half that runs raw_exec (and exec) tasks as real local
// processes.
//
// It exists because a real Nomad agent cannot run on gofl's build and CI
// machines. Its fidelity is checked by driving it with the real
// github.com/hashicorp/nomad/api client in this package's tests. It shares
// no code with the Nomad server (github.com/hashicorp/nomad); only the api
// module's types are used, so request and response JSON are exactly what
// the client encodes and decodes, and jobs are canonicalized with the api
// module's Job.Canonicalize as Nomad's HTTP agent does.
//
// Usage:
//
//	a, err := testagent.New(testagent.Config{Addr: "127.0.0.1:0"}, log)
//	err = a.Start(ctx)
//	defer a.Close() // kills every process the agent started
//	client, _ := api.NewClient(&api.Config{Address: a.URL()})
//
// The command cmd/nomad-testagent (make nomad-testagent) runs it in the
// foreground on 127.0.0.1:4646.
//
// README.md in this directory lists the endpoints and semantics covered,
// what is simplified, and how to check the provider against a real Nomad.
package testagent
