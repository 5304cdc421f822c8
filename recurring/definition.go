package recurring

import (
	"errors"
	"fmt"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
)

// Catch-up policies: what a schedule does with slots it missed while no
// engine was running.
const (
	// CatchUpSkip fires only the latest missed slot and skips the others.
	CatchUpSkip = "skip"
	// CatchUpFire fires the missed slots, the most recent Limit of them.
	CatchUpFire = "fire"
)

// MaxCatchUp bounds how many missed slots one firing may create.
const MaxCatchUp = 1000

// CatchUp says what to do with missed slots.
type CatchUp struct {
	Policy string `json:"policy"`
	Limit  int    `json:"limit,omitempty"`
}

// Definition is a recurring schedule as an operator or upstream system
// writes it. Field names are part of the public format.
type Definition struct {
	ID       string `json:"id"`
	Schedule string `json:"schedule"`
	TimeZone string `json:"time_zone,omitempty"`
	// The search context of every slot's job, as in a schedule command.
	Query    string `json:"query"`
	Country  string `json:"country"`
	Language string `json:"language"`
	Device   string `json:"device"`
	Limit    int    `json:"limit,omitempty"`
	Account  string `json:"account,omitempty"`
	Priority string `json:"priority,omitempty"`
	// Start and End bound the slots (End excluded); zero means open.
	Start   time.Time `json:"start,omitzero"`
	End     time.Time `json:"end,omitzero"`
	CatchUp CatchUp   `json:"catch_up"`
}

// Command is the schedule command of one slot.
func (d Definition) Command(slot time.Time) aggregate.ScheduleCommand {
	return aggregate.ScheduleCommand{Slot: slot.UTC().Format(time.RFC3339Nano), Query: d.Query, Country: d.Country,
		Language: d.Language, Device: d.Device, Limit: aggregate.LimitOf(d.Limit), Account: d.Account, Priority: d.Priority}
}

// Canonical validates a definition and returns it normalised (search
// context as a schedule command normalises it, defaults filled in) with
// its parsed schedule. loc is the definition's time zone, resolved by the
// caller (nil for UTC); created anchors an interval without a start.
// Every problem is reported at once.
func (d Definition) Canonical(loc *time.Location, created time.Time) (Definition, Spec, error) {
	var errs []error
	if err := events.ValidateJobID(d.ID); err != nil {
		errs = append(errs, fmt.Errorf("id: %s", err))
	}
	if d.TimeZone == "" {
		d.TimeZone = "UTC"
	}
	anchor := d.anchor(created)
	spec, err := d.Spec(loc, created)
	if err != nil {
		errs = append(errs, err)
	} else if spec.Next(anchor.Add(-time.Nanosecond)).IsZero() {
		// 30 February, say: Next looks Horizon years ahead, after
		// which the calendar repeats.
		errs = append(errs, fmt.Errorf("schedule %q has no slot ever (none in the %d years from %s, after which the calendar repeats)",
			d.Schedule, Horizon, anchor.UTC().Format(time.RFC3339)))
	}
	cmd, _, err := d.Command(anchor).Canonical()
	var ve *aggregate.ValidationError
	if errors.As(err, &ve) {
		for _, f := range ve.Fields {
			if f.Field != "slot" {
				errs = append(errs, fmt.Errorf("%s: %s", f.Field, f.Message))
			}
		}
	}
	d.Query, d.Country, d.Language, d.Device, d.Limit = cmd.Query, cmd.Country, cmd.Language, cmd.Device, cmd.SearchContext().Limit
	d.Account, d.Priority = cmd.Account, cmd.Priority
	if !d.Start.IsZero() {
		d.Start = d.Start.UTC()
		if d.Start.Before(created.AddDate(-1, 0, 0)) {
			// Every slot since the start is walked once when the schedule
			// is first fired; centuries of them would never end.
			errs = append(errs, errors.New("start must be at most a year before the schedule is created"))
		}
	}
	if !d.End.IsZero() {
		d.End = d.End.UTC()
		if !d.Start.IsZero() && !d.End.After(d.Start) {
			errs = append(errs, errors.New("end must be after start"))
		} else if spec != nil {
			// The first slot Due would order: from the start, or after
			// the creation without one.
			first := spec.Next(anchor.Add(-time.Nanosecond))
			if d.Start.IsZero() {
				first = spec.Next(created)
			}
			if !first.IsZero() && !first.Before(d.End) {
				errs = append(errs, fmt.Errorf("end %s is not after the first slot, %s: the schedule orders nothing",
					d.End.Format(time.RFC3339), first.UTC().Format(time.RFC3339)))
			}
		}
	}
	switch d.CatchUp.Policy {
	case "":
		d.CatchUp.Policy = CatchUpSkip
	case CatchUpSkip, CatchUpFire:
	default:
		errs = append(errs, fmt.Errorf("catch_up.policy %q is not %q or %q", d.CatchUp.Policy, CatchUpSkip, CatchUpFire))
	}
	if d.CatchUp.Policy == CatchUpFire && d.CatchUp.Limit == 0 {
		d.CatchUp.Limit = 10
	}
	if d.CatchUp.Limit < 0 || d.CatchUp.Limit > MaxCatchUp {
		errs = append(errs, fmt.Errorf("catch_up.limit %d is outside 0..%d", d.CatchUp.Limit, MaxCatchUp))
	}
	if err := errors.Join(errs...); err != nil {
		return d, nil, fmt.Errorf("schedule %q: %w", d.ID, err)
	}
	return d, spec, nil
}

// Spec parses the definition's schedule in loc (nil for UTC), an interval
// counted from its start, or from created without one. It checks nothing
// else: a stored definition is read back with it, whatever the checks of
// a new one (Canonical) have come to refuse since it was stored.
func (d Definition) Spec(loc *time.Location, created time.Time) (Spec, error) {
	return Parse(d.Schedule, loc, d.anchor(created))
}

func (d Definition) anchor(created time.Time) time.Time {
	if d.Start.IsZero() {
		return created
	}
	return d.Start
}

// Body is the canonical search context of the definition's jobs, the part
// of their identity that does not change from slot to slot.
func (d Definition) Body() string {
	body, _ := aggregate.Body(d.Command(time.Time{}).SearchContext())
	return body
}

// Overlaps reports whether two definitions would order the same
// observations: the same search context over spans of time that meet.
// Their common slots would be one job each, so the second definition is
// almost surely a mistake.
func (d Definition) Overlaps(o Definition) bool {
	if d.Body() != o.Body() {
		return false
	}
	before := func(end, start time.Time) bool { return !end.IsZero() && !start.IsZero() && !end.After(start) }
	return !before(d.End, o.Start) && !before(o.End, d.Start)
}
