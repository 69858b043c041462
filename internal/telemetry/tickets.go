package telemetry

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultTicketScan bounds one scrape of the tickets bucket: at most this many entries
// are read; past it the gauges report the first ones seen and the scrape counts an error.
const DefaultTicketScan = 100_000

// ticketCollector computes the open-ticket gauges on scrape from the tickets KV bucket.
// The bucket holds only open tickets (a resolved ticket is deleted), so its live entries
// are the open tickets and the oldest creation time among them gives the age of the oldest.
type ticketCollector struct {
	kv      jetstream.KeyValue
	timeout time.Duration
	limit   int
	now     func() time.Time

	open, oldest *prometheus.Desc
	errs         prometheus.Counter
}

// RegisterTickets adds the awaken_tickets_open and awaken_tickets_oldest_age_seconds
// gauges, computed on each scrape from kv (the tickets bucket). The cost of a scrape is
// one watcher over the bucket's current values — bounded by timeout and by
// [DefaultTicketScan] entries — and nothing is computed between scrapes. Register it in
// one process per deployment (the gate's), so the gauge is not reported several times.
func (m *Metrics) RegisterTickets(kv jetstream.KeyValue, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	c := &ticketCollector{
		kv: kv, timeout: timeout, limit: DefaultTicketScan,
		now:    time.Now,
		open:   prometheus.NewDesc(MetricTicketsOpen, "Resume tickets currently open (calls parked for approval, a schedule or a client result).", nil, nil),
		oldest: prometheus.NewDesc(MetricTicketOldestAge, "Age in seconds of the oldest open resume ticket (0 when none is open).", nil, nil),
		errs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricTicketsScrape,
			Help: "Scrapes of the tickets bucket that failed or were cut short (timeout, scan limit).",
		}),
	}
	err := m.reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		// A restarted stack on the same registry: the new bucket handle replaces the old.
		m.reg.Unregister(are.ExistingCollector)
		err = m.reg.Register(c)
	}
	return err
}

// Describe implements prometheus.Collector.
func (c *ticketCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.open
	ch <- c.oldest
	c.errs.Describe(ch)
}

// Collect implements prometheus.Collector; it is called on every scrape.
func (c *ticketCollector) Collect(ch chan<- prometheus.Metric) {
	n, oldest, err := c.scan()
	if err != nil {
		c.errs.Inc()
	}
	age := 0.0
	if n > 0 {
		age = max(c.now().Sub(oldest).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
	c.errs.Collect(ch)
}

// errScanLimit reports a scrape cut short by the entry limit.
var errScanLimit = errors.New("telemetry: tickets scan limit reached")

// scan reads the bucket's current values once: the count and the oldest creation time.
func (c *ticketCollector) scan() (n int, oldest time.Time, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	w, err := c.kv.WatchAll(ctx, jetstream.IgnoreDeletes(), jetstream.MetaOnly())
	if err != nil {
		return 0, oldest, err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return n, oldest, errors.New("telemetry: tickets watcher closed")
			}
			if e == nil {
				return n, oldest, nil // every current value has been delivered
			}
			n++
			if oldest.IsZero() || e.Created().Before(oldest) {
				oldest = e.Created()
			}
			if n >= c.limit {
				return n, oldest, errScanLimit
			}
		case <-ctx.Done():
			return n, oldest, ctx.Err()
		}
	}
}
