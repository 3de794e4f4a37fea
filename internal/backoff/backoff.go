// Package backoff is gofl's one retry pause: exponential growth from an
// initial delay up to a cap, with jitter so that peers retrying after the
// same event do not retry in step. Every retry loop in gofl uses it.
package backoff

import (
	"math"
	"math/rand/v2"
	"time"
)

// Config describes a backoff. Zero fields take the defaults noted.
type Config struct {
	Initial    time.Duration // first pause; default 100 ms
	Max        time.Duration // cap; default 30 s
	Multiplier float64       // growth per attempt, at least 1; default 2
	// Jitter is the fraction of each pause drawn at random around it:
	// a pause d becomes uniform in [d·(1−Jitter), d·(1+Jitter)], capped at
	// Max. Between 0 and 1; default 0.2. Negative means none.
	Jitter float64
}

func (c Config) withDefaults() Config {
	if c.Initial <= 0 {
		c.Initial = 100 * time.Millisecond
	}
	if c.Max <= 0 {
		c.Max = 30 * time.Second
	}
	if c.Max < c.Initial {
		c.Max = c.Initial
	}
	if c.Multiplier < 1 {
		c.Multiplier = 2
	}
	switch {
	case c.Jitter == 0:
		c.Jitter = 0.2
	case c.Jitter < 0:
		c.Jitter = -1 // stays "none" when normalised again
	case c.Jitter > 1:
		c.Jitter = 1
	}
	return c
}

// Delay is the pause before retry number attempt (0 for the first retry).
// rnd returns uniform values in [0, 1); nil uses math/rand/v2.
func (c Config) Delay(attempt int, rnd func() float64) time.Duration {
	c = c.withDefaults()
	d := float64(c.Initial) * math.Pow(c.Multiplier, float64(max(attempt, 0)))
	if d > float64(c.Max) || math.IsInf(d, 0) || math.IsNaN(d) {
		d = float64(c.Max)
	}
	if c.Jitter > 0 {
		if rnd == nil {
			rnd = rand.Float64
		}
		d *= 1 - c.Jitter + 2*c.Jitter*rnd()
	}
	return min(time.Duration(d), c.Max)
}

// Backoff counts consecutive failures of one retry loop. It is not safe
// for concurrent use; its owner's goroutine uses it.
type Backoff struct {
	cfg     Config
	rnd     func() float64
	attempt int
}

// New returns a Backoff; rnd as in Config.Delay (seeded in simulations).
func New(cfg Config, rnd func() float64) *Backoff {
	return &Backoff{cfg: cfg.withDefaults(), rnd: rnd}
}

// Next returns the pause before the next retry and counts the failure.
func (b *Backoff) Next() time.Duration {
	d := b.cfg.Delay(b.attempt, b.rnd)
	b.attempt++
	return d
}

// Attempts is the number of failures counted since the last Reset.
func (b *Backoff) Attempts() int { return b.attempt }

// Reset starts over after a success.
func (b *Backoff) Reset() { b.attempt = 0 }
