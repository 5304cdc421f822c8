package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Account is one API account's spend and limiter figures at scrape time,
// as every worker shares them (engine.AccountStatuses).
type Account struct {
	Name string
	// SpentPages and SpentMicros are today's (UTC) billed pages and
	// money, counted when a search starts and corrected by its outcome.
	SpentPages  int
	SpentMicros int64
	// BudgetPages and BudgetMicros are the daily budgets; 0 for none.
	BudgetPages  int
	BudgetMicros int64
	// InFlight are searches running now; MaxInFlight the cap (0: none).
	InFlight    int
	MaxInFlight int
	// Waiting counts jobs held back by the account's limits, by reason
	// (in_flight, rate, paused, budget, refused).
	Waiting map[string]int
	// Paused is set while the API has asked the account to slow down.
	Paused bool
	// LimitsRefused is set while the account's stored limits are refused:
	// engines keep the limits applied before, or hold new purchases.
	LimitsRefused bool
}

var (
	descAcctPages       = desc("serpent_account_spent_pages", "Billed pages counted against the account's budget today (UTC), in flight included.", "account")
	descAcctMicros      = desc("serpent_account_spent_micros", "Money counted against the account's budget today (UTC), in millionths of the currency.", "account")
	descAcctBudgetPages = desc("serpent_account_budget_pages", "The account's daily budget in billed pages (0: none).", "account")
	descAcctBudgetMoney = desc("serpent_account_budget_micros", "The account's daily budget in millionths of the currency (0: none).", "account")
	descAcctInFlight    = desc("serpent_account_in_flight", "Searches of the account running now, across every worker.", "account")
	descAcctMaxInFlight = desc("serpent_account_max_in_flight", "The account's cap on searches in flight (0: none).", "account")
	descAcctWaiting     = desc("serpent_account_waiting_jobs", "Jobs held back by the account's limits, by reason (in_flight, rate, paused, budget, refused).", "account", "reason")
	descAcctPaused      = desc("serpent_account_paused", "1 while the API has asked the account to slow down (429, Retry-After), else 0.", "account")
	descAcctRefused     = desc("serpent_account_limits_refused", "1 while the account's limits in serp_accounts are refused (the engines keep the limits applied before, or hold new purchases), else 0.", "account")
	descAcctUp          = desc("serpent_accounts_up", "1 if the accounts' shared state could be read at this scrape, else 0.")
)

// accountCollector reads the accounts at scrape time.
type accountCollector struct {
	read func(ctx context.Context) ([]Account, error)
}

func (c *accountCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAcctPages, descAcctMicros, descAcctBudgetPages, descAcctBudgetMoney,
		descAcctInFlight, descAcctMaxInFlight, descAcctWaiting, descAcctPaused, descAcctRefused, descAcctUp} {
		ch <- d
	}
}

func (c *accountCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), accountsTimeout)
	defer cancel()
	accts, err := c.read(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descAcctUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descAcctUp, prometheus.GaugeValue, 1)
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, a := range accts {
		gauge(descAcctPages, float64(a.SpentPages), a.Name)
		gauge(descAcctMicros, float64(a.SpentMicros), a.Name)
		gauge(descAcctBudgetPages, float64(a.BudgetPages), a.Name)
		gauge(descAcctBudgetMoney, float64(a.BudgetMicros), a.Name)
		gauge(descAcctInFlight, float64(a.InFlight), a.Name)
		gauge(descAcctMaxInFlight, float64(a.MaxInFlight), a.Name)
		for _, why := range waitReasons {
			gauge(descAcctWaiting, float64(a.Waiting[why]), a.Name, why)
		}
		paused := 0.0
		if a.Paused {
			paused = 1
		}
		gauge(descAcctPaused, paused, a.Name)
		refused := 0.0
		if a.LimitsRefused {
			refused = 1
		}
		gauge(descAcctRefused, refused, a.Name)
	}
}

// waitReasons are the reasons a job waits for its account, always
// reported so that a dashboard sees zeros rather than gaps.
var waitReasons = []string{"in_flight", "rate", "paused", "budget", "refused"}

// accountsTimeout bounds the accounts read of one scrape.
const accountsTimeout = 2 * time.Second
