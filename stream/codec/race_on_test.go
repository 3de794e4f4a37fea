//go:build race

package codec

// raceEnabled: under -race, sync.Pool drops a random quarter of its Puts,
// so pooled scratch (mapEnc) allocates; make test checks allocations in a
// second pass without -race.
const raceEnabled = true
