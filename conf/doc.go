// Package conf holds gofl's typed configuration options and loads them.
//
// The model follows Flink's ConfigOptions. Every option gofl understands is a
// package variable of type *Option[T] (HeartbeatInterval, RestPort, ...),
// created once at init and registered in a central registry that Options
// lists sorted by key. An option knows its key, type, default, description,
// allowed values (enums) and range checks, so parsing, validation, the
// `gofl config` listing and the generated Markdown reference all come from one
// place and cannot drift apart.
//
// A Configuration maps keys to the raw string a user wrote, the parsed value
// and the Source it came from. Load builds one from, lowest to highest
// precedence:
//
//	defaults < YAML file < environment (GOFL_*) < -D key=value
//
// Load collects every problem before failing, so a user fixes all bad values
// in one round; unknown keys are warnings with a did-you-mean suggestion, since
// a typo must be visible but a newer or older config file must still start.
//
// Readers use Get(cfg, opt) or opt.Get(cfg), which never fail: values are
// validated when they enter a Configuration, and unset keys yield the
// option's default. A nil *Configuration reads as all defaults.
//
// Tests build configurations in code:
//
//	cfg := conf.NewConfiguration()
//	conf.HeartbeatTimeout.Set(cfg, 2*time.Second)
//	err := cfg.Set("rest.port", "0", conf.CodeSource)
//	cfg, err := conf.FromMap(map[string]string{"taskmanager.numberOfTaskSlots": "4"})
package conf
