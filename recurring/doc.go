// Package recurring turns schedule definitions into slots. A definition
// says what to observe (the search context) and when (a cron expression or
// an interval, in a time zone, between a start and an end); its slots are
// the times the expression names. Each slot becomes one job through the
// ordinary schedule command, so a slot fired twice, by a repeated timer or
// by two engines, is still one job.
//
// The package is pure: time zones are resolved by the caller, and the
// clock is a parameter.
package recurring
