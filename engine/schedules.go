package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/recurring"
)

// ScheduleTimers wakes recurring schedules.
type ScheduleTimers interface {
	// ArmSchedule wakes a schedule at a time; arming it again replaces
	// the earlier time.
	ArmSchedule(ctx context.Context, id string, at time.Time) error
	// DisarmSchedule removes a schedule's timer and pending wake-up.
	DisarmSchedule(ctx context.Context, id string) error
	// ScheduleArmed reports whether a schedule has a timer or a wake-up
	// waiting.
	ScheduleArmed(ctx context.Context, id string) (bool, error)
}

// Orders takes the schedule commands of recurring schedules' slots in,
// as an upstream system's (serp.cmd.schedule).
type Orders interface {
	// Order stores a schedule command durably. id names the order: the
	// same id again, within the command stream's duplicate window, is
	// dropped. schedule names the recurring schedule that ordered it.
	Order(ctx context.Context, cmd []byte, id, schedule string) error
}

// SchedulesConfig is what Schedules needs. Bucket, Timers and Orders are
// required.
type SchedulesConfig struct {
	// Bucket holds the definitions, their state and the claims on their
	// searches (serp_schedules).
	Bucket Bucket
	Timers ScheduleTimers
	Orders Orders
	// MaxPayload is the largest message an answer may be: a page of
	// ListPage fits in it. 0 means 1 MiB, the NATS server's default.
	MaxPayload int64
	// Now is the clock; time.Now by default.
	Now    func() time.Time
	Logger *slog.Logger
}

// Schedules keeps recurring schedules: definitions and state in a bucket
// (serp_schedules), timers beside the jobs' (SERP_WORK). When a schedule's
// slot comes, Fire orders one ordinary schedule command per slot; the job
// id, derived from the slot and the search context, makes a slot fired
// twice (a timer repeated after a restart, two engines) one job.
type Schedules struct {
	kv         Bucket
	timers     ScheduleTimers
	orders     Orders
	maxPayload int64
	now        func() time.Time
	log        *slog.Logger
	// account checks a definition's API account (nil: any).
	account func(string) error
	// expired reports a slot intake would refuse (nil: none).
	expired func(time.Time) bool
}

// Record is a schedule as stored: its definition and its state.
type Record struct {
	Definition recurring.Definition `json:"definition"`
	State      recurring.State      `json:"state"`
	// Creating marks a schedule stored whose claim on its search (see
	// Create) is not made yet: it does not fire, and blocks no other.
	Creating bool `json:"creating,omitempty"`
}

// Errors of schedule operations.
var (
	ErrScheduleExists = errors.New("engine: a schedule with this id exists")
	ErrNoSchedule     = errors.New("engine: no such schedule")
)

// ScheduleError is a definition that cannot be used, or one that overlaps
// another: its Reason is the token of the rejection subject.
type ScheduleError struct {
	Reason string
	Err    error
}

func (e *ScheduleError) Error() string { return e.Err.Error() }
func (e *ScheduleError) Unwrap() error { return e.Err }

// NewSchedules checks the configuration and returns the schedules.
func NewSchedules(cfg SchedulesConfig) (*Schedules, error) {
	var errs []error
	if cfg.Bucket == nil {
		errs = append(errs, errors.New("schedules: a bucket is required"))
	}
	if cfg.Timers == nil {
		errs = append(errs, errors.New("schedules: timers are required"))
	}
	if cfg.Orders == nil {
		errs = append(errs, errors.New("schedules: somewhere to order slots is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = defaultMaxPayload
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Schedules{kv: cfg.Bucket, timers: cfg.Timers, orders: cfg.Orders, maxPayload: cfg.MaxPayload, now: cfg.Now, log: cfg.Logger}, nil
}

// defaultMaxPayload is the NATS server's default max_payload.
const defaultMaxPayload = 1 << 20

// notPlaces are zone names that load but name no place: the machine's zone
// ("Local", and "localtime", a link to /etc/localtime), whatever zone the
// packager linked "posixrules" to, and "Factory" (offset 0, abbreviation
// "-00"). On the first two engines (or one after a restart) could disagree
// on every slot.
var notPlaces = []string{"Local", "localtime", "posixrules", "Factory"}

// CheckAccountsWith has Create refuse, as invalid_account, a definition
// naming an API account check refuses: pass the engine's
// (Engine.CheckAccount), so a schedule is not stored whose every slot
// intake would refuse. Without it any account is taken.
func (s *Schedules) CheckAccountsWith(check func(account string) error) {
	s.account = check
}

// SkipExpiredWith has a firing skip the slots expired reports: pass the
// engine's (Engine.SlotRefused), so a catch-up never orders a slot intake
// would refuse. Without it every due slot is ordered.
func (s *Schedules) SkipExpiredWith(expired func(slot time.Time) bool) {
	s.expired = expired
}

// canonical validates a definition, resolving its time zone.
func (s *Schedules) canonical(d recurring.Definition, created time.Time) (recurring.Definition, recurring.Spec, error) {
	tz := d.TimeZone
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if slices.ContainsFunc(notPlaces, func(z string) bool { return strings.EqualFold(z, tz) }) {
		err = errors.New("not an IANA zone")
	}
	if err != nil {
		return d, nil, &ScheduleError{Reason: "invalid_time_zone", Err: fmt.Errorf("schedule %q: unknown time zone %q (use an IANA name such as Europe/Berlin)", d.ID, tz)}
	}
	d, spec, err := d.Canonical(loc, created)
	if err != nil {
		return d, nil, &ScheduleError{Reason: "invalid_schedule", Err: err}
	}
	if s.account != nil {
		if err := s.account(d.Account); err != nil {
			return d, nil, &ScheduleError{Reason: "invalid_account", Err: fmt.Errorf(
				"schedule %q: account: %q is not an account of this engine", d.ID, d.Account)}
		}
	}
	return d, spec, nil
}

// storedSpec reads a stored definition's schedule. Only what the firing
// needs is read, not every check a new definition passes (canonical):
// a stored schedule fires, and can be paused, resumed and deleted.
func storedSpec(d recurring.Definition, created time.Time) (recurring.Spec, error) {
	tz := d.TimeZone
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: time zone %q: %w", d.ID, tz, err)
	}
	spec, err := d.Spec(loc, created)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", d.ID, err)
	}
	return spec, nil
}

// Create validates and stores a new schedule and arms its timer. An id in
// use, or a definition overlapping another (the same search context over
// times that meet), is refused.
//
// Two creates of overlapping definitions at once (two engines, two
// requests) must not both pass the overlap check, so the check is made
// under a claim on the search: a key of the bucket per search context,
// "body.<SHA-256 of it>", listing the schedules created with it. The
// record is stored first, marked creating (it neither fires nor blocks
// another); then, in one compare-and-set write of the claim, it is
// checked against every schedule created and every one the claim lists,
// and added to the claim;
// then the record is marked created. Of two creates at once, the second write of
// the claim fails, is made again, and finds the first listed. A listed
// schedule whose record is gone (deleted, the claim not yet released) or
// is of another search (its id used again) is dropped from the claim. A
// create that stops before its claim leaves a record marked creating,
// which blocks nothing; the same create again, or the sweep, finishes it
// (or, if it overlaps one created meanwhile, removes it).
func (s *Schedules) Create(ctx context.Context, d recurring.Definition) (Record, error) {
	now := s.now().UTC()
	d, spec, err := s.canonical(d, now)
	if err != nil {
		return Record{}, err
	}
	rec := Record{Definition: d, State: recurring.State{Created: now}, Creating: true}
	plan := recurring.Due(d, spec, rec.State, now)
	rec.State.NextSlot = plan.Next
	if len(plan.Fire) > 0 {
		// A start in the past: its slots so far are due now, as after a
		// downtime, and the catch-up policy says which are ordered.
		rec.State.NextSlot = plan.Fire[0]
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return Record{}, err
	}
	if _, ok, err := s.kv.Write(ctx, d.ID, data, 0); err != nil {
		return Record{}, fmt.Errorf("schedules: store %q: %w", d.ID, err)
	} else if !ok {
		return s.createdBefore(ctx, d)
	}
	return s.finishCreate(ctx, d)
}

// overlapping refuses d if one of the schedules all overlaps it. A schedule
// over (past its end) orders nothing more and blocks nothing; one still
// being created blocks only once listed in the claim on its search.
func overlapping(d recurring.Definition, all []Record, listed []string) error {
	for _, o := range all {
		if o.Definition.ID == d.ID || (o.Creating && !slices.Contains(listed, o.Definition.ID)) {
			continue
		}
		if o.State.NextSlot.IsZero() && !o.State.Paused {
			continue // over (past its end): it orders nothing more
		}
		if d.Overlaps(o.Definition) {
			return &ScheduleError{Reason: "overlapping_schedule", Err: fmt.Errorf(
				"schedule %q orders the same observations as schedule %q (same search context over times that meet); change one or delete the other",
				d.ID, o.Definition.ID)}
		}
	}
	return nil
}

// finishCreate claims a stored schedule's search and marks it created, then
// arms its timer; a schedule that overlaps one in the claim is removed and
// refused.
func (s *Schedules) finishCreate(ctx context.Context, d recurring.Definition) (Record, error) {
	id := d.ID
	if err := s.claim(ctx, d); err != nil {
		var se *ScheduleError
		if errors.As(err, &se) {
			if derr := s.abandon(ctx, id); derr != nil {
				s.log.Warn("a schedule refused as overlapping stays stored, marked creating (it neither fires nor blocks); the sweep removes it", "schedule", id, "err", derr)
			}
		}
		return Record{}, err
	}
	rec, err := s.update(ctx, id, func(r *Record, _ recurring.Spec) error {
		r.Creating = false
		return nil
	})
	if err != nil {
		return Record{}, err
	}
	if !rec.State.Paused && !rec.State.NextSlot.IsZero() {
		if err := s.timers.ArmSchedule(ctx, id, rec.State.NextSlot); err != nil {
			return rec, err
		}
	}
	s.log.Info("schedule created", "schedule", id, "expr", d.Schedule, "next", rec.State.NextSlot)
	return rec, nil
}

// abandon removes a schedule still marked creating.
func (s *Schedules) abandon(ctx context.Context, id string) error {
	for range 8 {
		rec, rev, err := s.Get(ctx, id)
		if errors.Is(err, ErrNoSchedule) || (err == nil && !rec.Creating) {
			return nil
		}
		if err != nil {
			return err
		}
		if ok, err := s.kv.Delete(ctx, id, rev); err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("schedules: %q keeps changing", id)
}

// claimKey is the key of the claim on a definition's search context.
func claimKey(d recurring.Definition) string {
	sum := sha256.Sum256([]byte(d.Body()))
	return claimPrefix + hex.EncodeToString(sum[:])
}

// claimPrefix starts the keys of claims on search contexts; a schedule id
// has no dot, so no schedule's key starts with it.
const claimPrefix = "body."

// searchClaim is the value of a claim: the schedules created with its
// search context.
type searchClaim struct {
	Schedules []string `json:"schedules"`
}

// claim checks d against the schedules of its search context and adds it
// to their claim, in one compare-and-set write of the claim.
func (s *Schedules) claim(ctx context.Context, d recurring.Definition) error {
	key := claimKey(d)
	for range 8 {
		var c searchClaim
		value, rev, err := s.kv.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("schedules: read the claim on %q's search: %w", d.ID, err)
		}
		if rev != 0 {
			if err := json.Unmarshal(value, &c); err != nil {
				return fmt.Errorf("schedules: the claim on %q's search is unreadable: %w", d.ID, err)
			}
		}
		all, err := s.List(ctx)
		if err != nil {
			return err
		}
		if err := overlapping(d, all, c.Schedules); err != nil {
			return err
		}
		keep := []string{d.ID}
		for _, id := range c.Schedules {
			if id != d.ID && slices.ContainsFunc(all, func(r Record) bool { return r.Definition.ID == id && r.Definition.Body() == d.Body() }) {
				keep = append(keep, id)
			}
		}
		slices.Sort(keep)
		data, err := json.Marshal(searchClaim{Schedules: keep})
		if err != nil {
			return err
		}
		_, ok, err := s.kv.Write(ctx, key, data, rev)
		if err != nil {
			return fmt.Errorf("schedules: claim %q's search: %w", d.ID, err)
		}
		if ok {
			return nil
		}
		// another create or delete on this search: check again
	}
	return fmt.Errorf("schedules: the claim on %q's search keeps changing; try again", d.ID)
}

// release takes a deleted schedule off the claim on its search. A claim
// left listing it (a failed release) is harmless: the next create on the
// search drops it.
func (s *Schedules) release(ctx context.Context, d recurring.Definition) error {
	key := claimKey(d)
	for range 8 {
		value, rev, err := s.kv.Get(ctx, key)
		if err != nil || rev == 0 {
			return err
		}
		var c searchClaim
		if err := json.Unmarshal(value, &c); err != nil {
			return err
		}
		if !slices.Contains(c.Schedules, d.ID) {
			return nil
		}
		c.Schedules = slices.DeleteFunc(c.Schedules, func(id string) bool { return id == d.ID })
		var ok bool
		if len(c.Schedules) == 0 {
			ok, err = s.kv.Delete(ctx, key, rev)
		} else {
			data, merr := json.Marshal(c)
			if merr != nil {
				return merr
			}
			_, ok, err = s.kv.Write(ctx, key, data, rev)
		}
		if err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("the claim keeps changing")
}

// createdBefore answers a create whose id is taken. The same definition is
// the same create again (a redelivered command, a retried request, or one
// whose timer failed to arm after the record was stored): it succeeds,
// finishing a create that stopped before its claim, and arms the timer
// again. Another definition under that id is refused.
func (s *Schedules) createdBefore(ctx context.Context, d recurring.Definition) (Record, error) {
	rec, _, err := s.Get(ctx, d.ID)
	if err != nil {
		return Record{}, err
	}
	was, _ := json.Marshal(rec.Definition)
	now, _ := json.Marshal(d)
	if string(was) != string(now) {
		return Record{}, fmt.Errorf("%w: %q", ErrScheduleExists, d.ID)
	}
	if rec.Creating {
		return s.finishCreate(ctx, rec.Definition)
	}
	if !rec.State.Paused && !rec.State.NextSlot.IsZero() {
		if err := s.timers.ArmSchedule(ctx, d.ID, rec.State.NextSlot); err != nil {
			return rec, err
		}
	}
	return rec, nil
}

// Sweep arms again the timer of every active schedule that has neither a
// timer nor a due message waiting (a purged work stream, a timer that
// failed to arm), for its next slot; a schedule with pending slots
// (recorded as fired, maybe not yet ordered), paused or not, is woken at
// once. A schedule still marked creating (its create stopped before its
// claim) is finished, or removed if it overlaps one created meanwhile. It
// returns how many timers it armed for schedules created before.
func (s *Schedules) Sweep(ctx context.Context) (int, error) {
	all, err := s.List(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, rec := range all {
		id := rec.Definition.ID
		if rec.Creating {
			// A create that stopped before its claim: finish it, or
			// remove it if it overlaps one created meanwhile.
			s.log.Warn("sweep: finishing the create of a schedule", "schedule", id)
			if _, err := s.finishCreate(ctx, rec.Definition); err != nil && scheduleReason(err) == "" {
				return n, err
			}
			continue
		}
		at := rec.State.NextSlot
		if len(rec.State.Pending) > 0 {
			at = s.now() // slots recorded, not yet ordered: wake it now
		} else if rec.State.Paused || rec.State.NextSlot.IsZero() {
			continue
		}
		armed, err := s.timers.ScheduleArmed(ctx, id)
		if err != nil {
			return n, fmt.Errorf("schedules sweep: %w", err)
		}
		if armed {
			continue
		}
		s.log.Warn("sweep: the schedule had no timer; arming it again", "schedule", id, "at", at)
		if err := s.timers.ArmSchedule(ctx, id, at); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Get returns one schedule and its revision in the bucket.
func (s *Schedules) Get(ctx context.Context, id string) (Record, uint64, error) {
	value, rev, err := s.kv.Get(ctx, id)
	if err != nil {
		return Record{}, 0, fmt.Errorf("schedules: read %q: %w", id, err)
	}
	if rev == 0 {
		return Record{}, 0, fmt.Errorf("%w: %q", ErrNoSchedule, id)
	}
	var rec Record
	if err := json.Unmarshal(value, &rec); err != nil {
		return Record{}, 0, fmt.Errorf("schedules: %q is unreadable: %w", id, err)
	}
	return rec, rev, nil
}

// List returns every schedule, ordered by id.
func (s *Schedules) List(ctx context.Context) ([]Record, error) {
	return s.ListPage(ctx, "", 0)
}

// ListPage returns, ordered by id, the schedules whose id comes after
// after, at most limit of them (0: all). A page (limit above 0) also stops
// short of what one NATS message holds: a caller pages until a page comes
// back empty.
func (s *Schedules) ListPage(ctx context.Context, after string, limit int) ([]Record, error) {
	keys, err := s.kv.Keys(ctx, ">")
	if err != nil {
		return nil, fmt.Errorf("schedules: %w", err)
	}
	var ids []string
	for _, id := range keys {
		if id > after && !strings.HasPrefix(id, claimPrefix) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []Record
	room := int(s.maxPayload) - pageHeadroom
	for _, id := range ids {
		if limit > 0 && len(out) == limit {
			break
		}
		rec, _, err := s.Get(ctx, id)
		if errors.Is(err, ErrNoSchedule) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		if limit > 0 {
			b, err := json.Marshal(rec)
			if err != nil {
				return nil, err
			}
			if room -= len(b) + 1; room < 0 && len(out) > 0 {
				break // the next page starts with it
			}
		}
		out = append(out, rec)
	}
	return out, nil
}

// pageHeadroom is what a page of schedules leaves of a NATS message for
// the reply's headers.
const pageHeadroom = 8 << 10

// update applies change to a schedule with compare-and-set, again on a
// concurrent change.
func (s *Schedules) update(ctx context.Context, id string, change func(*Record, recurring.Spec) error) (Record, error) {
	for range 8 {
		rec, rev, err := s.Get(ctx, id)
		if err != nil {
			return Record{}, err
		}
		spec, err := storedSpec(rec.Definition, rec.State.Created)
		if err != nil {
			return Record{}, err
		}
		if err := change(&rec, spec); err != nil {
			return Record{}, err
		}
		data, err := json.Marshal(rec)
		if err != nil {
			return Record{}, err
		}
		if _, ok, err := s.kv.Write(ctx, id, data, rev); err != nil {
			return Record{}, fmt.Errorf("schedules: store %q: %w", id, err)
		} else if !ok {
			continue // changed meanwhile
		}
		return rec, nil
	}
	return Record{}, fmt.Errorf("schedules: %q keeps changing; try again", id)
}

// Pause stops a schedule from firing; the slots it misses while paused are
// skipped. It records when it was paused (a second pause keeps the first
// time): slots already due then are caught up when it resumes.
func (s *Schedules) Pause(ctx context.Context, id string) (Record, error) {
	now := s.now().UTC()
	return s.update(ctx, id, func(r *Record, _ recurring.Spec) error {
		if !r.State.Paused {
			r.State.Paused, r.State.PausedAt = true, now
		}
		return nil
	})
}

// Resume lets a paused schedule fire again. The slots due before the pause
// that it had not fired (a downtime just before it, a slot whose firing
// the pause overtook) are caught up at once, as the catch-up policy says
// after a downtime; the slots that came while it was paused are skipped.
// (A schedule paused before the pause's time was recorded skips every
// slot since its last.) It goes on from its next slot.
func (s *Schedules) Resume(ctx context.Context, id string) (Record, error) {
	now := s.now().UTC()
	rec, err := s.update(ctx, id, func(r *Record, spec recurring.Spec) error {
		if !r.State.Paused {
			return nil
		}
		r.State.Paused = false
		if at := r.State.PausedAt; !at.IsZero() {
			before := recurring.Due(r.Definition, spec, r.State, minTime(at, now))
			jobs, err := jobIDs(r.Definition, before.Fire)
			if err != nil {
				return err
			}
			r.State = r.State.Apply(before, jobs)
		}
		r.State.PausedAt = time.Time{}
		// The slots of the pause are skipped, not caught up.
		skip := recurring.Due(r.Definition, spec, r.State, now)
		r.State = r.State.Apply(recurring.Plan{Skipped: skip.Skipped + len(skip.Fire), Next: skip.Next}, nil)
		if n := len(skip.Fire); n > 0 {
			r.State.LastSlot = skip.Fire[n-1]
		}
		return nil
	})
	if err != nil {
		return rec, err
	}
	if rec, err = s.flush(ctx, rec); err != nil {
		return rec, err
	}
	if !rec.State.NextSlot.IsZero() {
		err = s.timers.ArmSchedule(ctx, id, rec.State.NextSlot)
	}
	return rec, err
}

// Delete removes a schedule and its timer. Jobs it already ordered stay.
// Slots a firing recorded before the delete (pending) are ordered before
// it returns, and the record is removed only as read: a firing that
// records a slot after the read makes the delete read again. So no slot
// the schedule recorded is lost, and none is decided after Delete
// returns; the firing's own publication of a slot ordered here is the
// same command (one message id, one job).
func (s *Schedules) Delete(ctx context.Context, id string) error {
	for range 8 {
		rec, rev, err := s.Get(ctx, id)
		if err != nil {
			return err
		}
		for _, f := range rec.State.Pending {
			if err := s.order(ctx, rec.Definition, f); err != nil {
				return err
			}
		}
		if ok, err := s.kv.Delete(ctx, id, rev); err != nil {
			return fmt.Errorf("schedules: delete %q: %w", id, err)
		} else if !ok {
			continue // changed meanwhile
		}
		if err := s.release(ctx, rec.Definition); err != nil {
			s.log.Warn("schedule deleted, its claim on its search not released (the next create on the search drops it)", "schedule", id, "err", err)
		}
		return s.timers.DisarmSchedule(ctx, id)
	}
	return fmt.Errorf("schedules: %q keeps changing; try again", id)
}

// Fire records the slots of a schedule that are due now, as its catch-up
// policy says, then orders them and arms the next slot's timer. Every step
// is idempotent, so a repeated or concurrent firing orders nothing twice.
func (s *Schedules) Fire(ctx context.Context, id string) (recurring.Plan, error) {
	return s.fire(ctx, id, time.Time{})
}

// fire is Fire woken by a timer the server fired at its time woke (zero
// when unknown). A slot is due when either clock says it came: were this
// engine's clock behind the server's, which fires the timers, a timer for
// a slot it did not find due would fire again at once, and again, until
// this clock got there.
//
// It decides, then acts: one compare-and-set write records the slots it
// fires (LastSlot, the recent history and the pending list, with each
// slot's job id, computed, not asked for); only once that write succeeds
// are their commands published, and a later write takes them off the
// pending list. A pause or a delete that wins the write leaves nothing
// to publish. A process that stops anywhere leaves no slot lost and none
// ordered against a pause or delete that came first:
//
//   - before the write: nothing is recorded; the wake-up, not
//     acknowledged, comes again and decides again;
//   - after the write, before or while publishing: the slots are pending;
//     the wake-up comes again and a firing publishes pending slots first
//     (a paused schedule's too: they were decided before the pause), as
//     do Resume and Delete, and the sweep wakes a schedule with pending
//     slots that has no wake-up left;
//   - after publishing, before the pending list is cleared: they are
//     published again, as the same commands (the message id is the
//     job's, so the stream drops the copy within its window, and after
//     it the engine finds the job made).
func (s *Schedules) fire(ctx context.Context, id string, woke time.Time) (recurring.Plan, error) {
	now := s.now().UTC()
	if woke.After(now) {
		now = woke.UTC()
	}
	var plan recurring.Plan
	rec, err := s.update(ctx, id, func(r *Record, spec recurring.Spec) error {
		plan = recurring.Plan{}
		if r.State.Paused || r.Creating {
			return nil
		}
		plan = recurring.Due(r.Definition, spec, r.State, now)
		if s.expired != nil {
			n := len(plan.Fire)
			plan.Fire = slices.DeleteFunc(plan.Fire, s.expired)
			plan.Skipped += n - len(plan.Fire)
		}
		jobs, err := jobIDs(r.Definition, plan.Fire)
		if err != nil {
			return err
		}
		r.State = r.State.Apply(plan, jobs)
		return nil
	})
	if errors.Is(err, ErrNoSchedule) {
		return recurring.Plan{}, nil // deleted: nothing to fire, nothing to arm
	}
	if err != nil {
		return recurring.Plan{}, err
	}
	if rec, err = s.flush(ctx, rec); err != nil {
		return plan, err
	}
	if !rec.State.Paused && !rec.Creating && !rec.State.NextSlot.IsZero() {
		if err := s.timers.ArmSchedule(ctx, id, rec.State.NextSlot); err != nil {
			return plan, err
		}
	}
	if len(plan.Fire) > 0 || plan.Skipped > 0 {
		s.log.Info("schedule fired", "schedule", id, "slots", len(plan.Fire), "skipped", plan.Skipped, "next", rec.State.NextSlot)
	}
	return plan, nil
}

// flush publishes the commands of a schedule's pending slots, then takes
// them off its pending list. A schedule deleted meanwhile had them
// published by the delete.
func (s *Schedules) flush(ctx context.Context, rec Record) (Record, error) {
	pending := rec.State.Pending
	if len(pending) == 0 {
		return rec, nil
	}
	for _, f := range pending {
		if err := s.order(ctx, rec.Definition, f); err != nil {
			return rec, err
		}
	}
	out, err := s.update(ctx, rec.Definition.ID, func(r *Record, _ recurring.Spec) error {
		r.State = r.State.Published(pending)
		return nil
	})
	if errors.Is(err, ErrNoSchedule) {
		rec.State = rec.State.Published(pending)
		return rec, nil
	}
	return out, err
}

// jobIDs are the jobs the commands of a definition's slots make.
func jobIDs(d recurring.Definition, slots []time.Time) ([]string, error) {
	jobs := make([]string, len(slots))
	for i, slot := range slots {
		sched, err := aggregate.NewSchedule(d.Command(slot), aggregate.DefaultPolicy(), "")
		if err != nil {
			return nil, fmt.Errorf("schedule %q, slot %s: %w", d.ID, slot.Format(time.RFC3339), err)
		}
		jobs[i] = sched.JobID
	}
	return jobs, nil
}

// order orders the schedule command of a slot recorded as fired, as an
// upstream system would.
func (s *Schedules) order(ctx context.Context, d recurring.Definition, f recurring.Fired) error {
	data, err := json.Marshal(d.Command(f.Slot))
	if err != nil {
		return err
	}
	// The order's id is the job's: the same order again (a repeated
	// firing, a slot published again after a crash) is dropped as a
	// duplicate within the stream's window, and is the same job after it;
	// another search for the slot (the schedule deleted and created again,
	// corrected) is another command.
	if err := s.orders.Order(ctx, data, "schedule-"+d.ID+"-"+f.JobID, d.ID); err != nil {
		return fmt.Errorf("schedule %q, slot %s: publish: %w", d.ID, f.Slot.Format(time.RFC3339), err)
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
