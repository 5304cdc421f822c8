package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/projections"
)

// lagTimeout bounds the lag read, and the read of the log's last
// sequence, of one scrape.
const lagTimeout = 2 * time.Second

// logCollector turns the Tally, the log's last sequence and the
// projections' lag into metrics at scrape time.
type logCollector struct {
	tally      *projections.Tally
	lag        func(ctx context.Context) (Lag, error)
	lastSeq    func(ctx context.Context) (uint64, error)
	archiveLag func(ctx context.Context) (uint64, error)
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	descJobs            = desc("serpent_jobs", "Jobs by state, folded from the event log.", "state")
	descEvents          = desc("serpent_events_total", "Events in the log by type.", "type")
	descSends           = desc("serpent_sends_total", "Send outcomes by class (success, unknown, in_progress, unresolved, retryable, rate_limited, replay_unavailable, failure).", "class")
	descRotations       = desc("serpent_key_rotations_total", "New attempt keys by the reason the previous key was replaced.", "reason")
	descReconciliations = desc("serpent_reconciliations_total", "Billing ledger reconciliations by verdict (charged, not_charged).", "verdict")
	descPurchases       = desc("serpent_purchases_total", "Searches the log says were bought: stored observations and charges found without a result.")
	descPages           = desc("serpent_billed_pages_total", "Pages billed (after the account's free pages): pages with results of stored observations (source=observation) and billed pages of charges found without a result (source=charged_no_result).", "source")
	descDoubles         = desc("serpent_suspected_double_charges", "Jobs whose log shows serpent bought more than one plus their authorised re-purchases. Must be 0.")
	descChecks          = desc("serpent_charge_checks_total", "Checks of a stored key's charges in the billing ledger, made when the log cannot prove the result was the key's only execution, by verdict (confirmed, double_charge).", "verdict")
	descAPIDoubles      = desc("serpent_api_double_charges_total", "Charges beyond the first the API made under one key (its own double purchase), found live by a check or a reconciliation. Alert on any increase.")
	descUndecodable     = desc("serpent_undecodable_events_total", "Messages of SERP_EVENTS that are not readable events, or not of the job whose subject they are on (another job, message id or type header).")
	descLogSeq          = desc("serpent_metrics_log_seq", "Stream sequence of the last event these metrics counted.")
	descCaughtUp        = desc("serpent_metrics_caught_up", "1 once these metrics have counted the event log as it stood when this process began reading it, else 0; until then the figures folded from the log are left out.")
	descHeld            = desc("serpent_metrics_jobs_held", "Jobs these metrics hold in memory: the jobs in flight (a finished job is counted and let go).")
	descLagEvents       = desc("serpent_projection_lag_events", "Events of SERP_EVENTS not applied to the projection buckets yet.")
	descLagSeconds      = desc("serpent_projection_lag_seconds", "How long the oldest event not applied to the projections yet has waited, by the NATS server's clock (0 when caught up).")
	descLastSeq         = desc("serpent_event_log_last_seq", "Last stream sequence of SERP_EVENTS.")
	descLagUp           = desc("serpent_projection_lag_up", "1 if the projections' lag could be read at this scrape, else 0.")
	descCatchingUp      = desc("serpent_projection_catching_up", "1 while this process's projection runner catches up with a log it trails by more than a batch, else 0.")
	descCatchUpRate     = desc("serpent_projection_catchup_events_per_second", "Events a second the projection runner catching up has applied since it began (0 when not catching up).")
	descArchiveLag      = desc("serpent_archive_lag_events", "Events of SERP_EVENTS that SERP_ARCHIVE has not copied yet, as its source reports it.")
	descArchiveOK       = desc("serpent_archive_ok", "1 if SERP_ARCHIVE could be read at this scrape and reports no error copying SERP_EVENTS, else 0. Events that leave the live log while it is 0 are lost to the archive.")
	descCatchUpLeft     = desc("serpent_projection_catchup_remaining_seconds", "About how long the projection runner catching up takes to apply the events left, at its rate so far (0 when not catching up).")
)

func (c *logCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobs, descEvents, descSends, descRotations, descReconciliations, descPurchases,
		descPages, descDoubles, descChecks, descAPIDoubles, descUndecodable, descLogSeq, descCaughtUp, descHeld, descLagEvents, descLagSeconds, descLastSeq, descLagUp, descCatchingUp, descCatchUpRate, descCatchUpLeft, descArchiveLag, descArchiveOK} {
		ch <- d
	}
}

func (c *logCollector) Collect(ch chan<- prometheus.Metric) {
	if c.tally != nil {
		c.collectTally(ch)
	}
	if c.lastSeq != nil {
		ctx, cancel := context.WithTimeout(context.Background(), lagTimeout)
		defer cancel()
		if last, err := c.lastSeq(ctx); err == nil {
			ch <- prometheus.MustNewConstMetric(descLastSeq, prometheus.GaugeValue, float64(last))
		}
	}
	if c.archiveLag != nil {
		ctx, cancel := context.WithTimeout(context.Background(), lagTimeout)
		defer cancel()
		lag, err := c.archiveLag(ctx)
		ok := 0.0
		if err == nil {
			ok = 1
			ch <- prometheus.MustNewConstMetric(descArchiveLag, prometheus.GaugeValue, float64(lag))
		}
		ch <- prometheus.MustNewConstMetric(descArchiveOK, prometheus.GaugeValue, ok)
	}
	if c.lag != nil {
		ctx, cancel := context.WithTimeout(context.Background(), lagTimeout)
		defer cancel()
		lag, err := c.lag(ctx)
		up := 0.0
		if err == nil {
			up = 1
			ch <- prometheus.MustNewConstMetric(descLagEvents, prometheus.GaugeValue, float64(lag.Pending))
			ch <- prometheus.MustNewConstMetric(descLagSeconds, prometheus.GaugeValue, lag.Behind.Seconds())
			catching := 0.0
			if lag.CatchingUp {
				catching = 1
			}
			ch <- prometheus.MustNewConstMetric(descCatchingUp, prometheus.GaugeValue, catching)
			ch <- prometheus.MustNewConstMetric(descCatchUpRate, prometheus.GaugeValue, lag.CatchUpRate)
			ch <- prometheus.MustNewConstMetric(descCatchUpLeft, prometheus.GaugeValue, lag.CatchUpLeft.Seconds())
		}
		ch <- prometheus.MustNewConstMetric(descLagUp, prometheus.GaugeValue, up)
	}
}

// collectTally sends the figures folded from the log, once the tally has
// caught up with the log as it stood when it began reading it. Before
// that (a restarted process reading the log again from the start) only
// how far it has read is sent: counters lower than the last process's
// would read to Prometheus as resets, and increase() would count the
// whole replay as new purchases.
func (c *logCollector) collectTally(ch chan<- prometheus.Metric) {
	n := c.tally.Counts()
	ch <- prometheus.MustNewConstMetric(descLogSeq, prometheus.GaugeValue, float64(n.Seq))
	if !n.CaughtUp {
		ch <- prometheus.MustNewConstMetric(descCaughtUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descCaughtUp, prometheus.GaugeValue, 1)
	for _, s := range aggregate.Statuses() {
		ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(n.Jobs[s]), string(s))
	}
	counters := func(d *prometheus.Desc, m map[string]uint64, always ...string) {
		for _, k := range always {
			if _, ok := m[k]; !ok {
				m[k] = 0
			}
		}
		for k, v := range m {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), k)
		}
	}
	counters(descEvents, n.Events)
	counters(descSends, n.Sends, string(aggregate.ClassSuccess), string(aggregate.ClassUnknown))
	counters(descRotations, n.Rotations)
	counters(descReconciliations, n.Reconciliations, aggregate.VerdictCharged, aggregate.VerdictNotCharged)
	ch <- prometheus.MustNewConstMetric(descPurchases, prometheus.CounterValue, float64(n.Purchases))
	ch <- prometheus.MustNewConstMetric(descPages, prometheus.CounterValue, float64(n.ResultPages), "observation")
	ch <- prometheus.MustNewConstMetric(descPages, prometheus.CounterValue, float64(n.ChargedPages), "charged_no_result")
	ch <- prometheus.MustNewConstMetric(descDoubles, prometheus.GaugeValue, float64(n.DoubleCharges))
	counters(descChecks, n.Checks, aggregate.VerdictConfirmed, aggregate.VerdictDoubleCharge)
	ch <- prometheus.MustNewConstMetric(descAPIDoubles, prometheus.CounterValue, float64(n.APIDoubleCharges))
	ch <- prometheus.MustNewConstMetric(descUndecodable, prometheus.CounterValue, float64(n.Undecodable))
	ch <- prometheus.MustNewConstMetric(descHeld, prometheus.GaugeValue, float64(c.tally.Remembered()))
}
