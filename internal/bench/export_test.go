package bench

import "io"

// Names the tests of package bench_test, which run serpent (cli.Run), read
// the report by.
type (
	InflightEngine = benchInflightEngine
	Child          = benchChild
	Load           = benchLoad
	InflightStart  = benchInflightStart
)

var (
	CPUParts = cpuParts
	Phases   = benchPhases
)

func Print(w io.Writer, r Report) error { return printBench(w, r) }
