// Package accounts holds the rules of spend and rate control for API
// accounts: the limits an operator sets, the rate limiter's arithmetic
// (GCRA, a token bucket kept as one timestamp), the daily budget and the
// priority a waiting job gets. It is pure; the limiter that shares this
// state between every worker in every process lives in package engine, on
// a JetStream KV bucket.
package accounts
