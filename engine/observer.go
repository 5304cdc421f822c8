package engine

import "github.com/serpent-engine/serpent/serper"

// Observer is told what the engine does, for metrics. Its methods are
// called on the engine's goroutines and must return quickly.
type Observer interface {
	// Searched reports one search: the job's API account ("" for the
	// default) and the result, with its Latency. The result never holds
	// the token.
	Searched(account string, res serper.Result)
}
