// Package consume runs the engine's JetStream consumers: loops that take
// deliveries from a durable consumer and hand each to one of the engine's
// handlers (engine.Engine.HandleWork, HandleCommand,
// HandleScheduleCommand, engine.Schedules.HandleDue), and the record of
// refused commands on SERP_REJECTED that those handlers write
// (Rejections).
//
// The handlers take an engine.Msg: a JetStream delivery here, the
// simulation's own in package sim, so both run the same code.
package consume
