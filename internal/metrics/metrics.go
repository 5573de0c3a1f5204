// Package metrics declares every ediwatch_* Prometheus metric in one place,
// registered on an injected registerer. Labels never carry patient data:
// sources, sinks, outcomes and reasons only.
package metrics

import "github.com/prometheus/client_golang/prometheus"

// Metrics holds all of ediwatch's metrics.
type Metrics struct {
	FilesListed     *prometheus.CounterVec   // source
	FilesDownloaded *prometheus.CounterVec   // source
	FilesSkipped    *prometheus.CounterVec   // source, reason
	FilesFailed     *prometheus.CounterVec   // source, reason
	BytesDownloaded *prometheus.CounterVec   // source
	PollDuration    *prometheus.HistogramVec // source
	PollErrors      *prometheus.CounterVec   // source, stage
	Sets            *prometheus.CounterVec   // outcome
	Unbalanced      prometheus.Counter
	X12Warnings     *prometheus.CounterVec // code: a leniency of the envelope reader
	PostProcessed   *prometheus.CounterVec // source, action
	// FilesDecryptFailed counts files refused by OpenPGP (internal/pgp
	// reasons: wrong_key, corrupt, unsigned, bad_signature, key_expired,
	// unknown_signer, not_encrypted).
	FilesDecryptFailed *prometheus.CounterVec // source, reason
	// SourceLastFile and SourceOverdue are the silence alarm of a source.
	SourceLastFile *prometheus.GaugeVec // source: unix seconds of its last new file
	SourceOverdue  *prometheus.GaugeVec // source: 1 once no new file came for longer than expect_every
	// PostProcessWaiting and PostProcessWaitingSeconds: files whose delete
	// or move waits for the standbys to hold their commit
	// (store.wait_for_standbys), as of the source's last poll, and for how
	// long post-processing has been held.
	PostProcessWaiting        *prometheus.GaugeVec // source
	PostProcessWaitingSeconds *prometheus.GaugeVec // source
	// StoreFailovers counts the times a new connection reached another
	// PostgreSQL server than the last (a promoted standby, a restore).
	StoreFailovers prometheus.Counter

	Deliveries      *prometheus.CounterVec   // sink, outcome
	DeliveryLatency *prometheus.HistogramVec // sink
	// DeliveryAttempts counts requests made, by what came back.
	DeliveryAttempts *prometheus.CounterVec // sink, class: 2xx, 3xx, 4xx, 5xx, network, timeout, unsent
	BreakerState     *prometheus.GaugeVec   // sink: 0 closed, 1 half-open, 2 open
	LeaseLost        prometheus.Counter
	// SinkDisabled is 1 while a sink is disabled (a 410 Gone, or an
	// operator), as the store records it for every replica.
	SinkDisabled *prometheus.GaugeVec // sink

	OutboxPending       *prometheus.GaugeVec // sink
	OutboxDead          *prometheus.GaugeVec // sink: the DLQ depth
	OutboxOldestPending *prometheus.GaugeVec // sink, seconds
	BuildInfo           *prometheus.GaugeVec // version, goversion
	Divergence          prometheus.Gauge     // 1 when the last reconciliation diverged
}

// New creates the metrics and registers them on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		FilesListed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ediwatch_files_listed_total",
			Help: "Files seen in source listings that match the include globs."}, []string{"source"}),
		FilesDownloaded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ediwatch_files_downloaded_total",
			Help: "Files downloaded into the spool."}, []string{"source"}),
		FilesSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ediwatch_files_skipped_total",
			Help: "Listed files not downloaded, by reason (final, unstable, backoff, failed, limit, vanished, incomplete, replaced; and, for entries that are not regular files, directory, symlink, special), at each listing."}, []string{"source", "reason"}),
		FilesFailed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ediwatch_files_failed_total",
			Help: "Files not ingested, by reason (download, ingest, too_large, gave_up)."}, []string{"source", "reason"}),
		BytesDownloaded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ediwatch_downloaded_bytes_total",
			Help: "Bytes downloaded into the spool."}, []string{"source"}),
		PollDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ediwatch_poll_duration_seconds",
			Help: "Duration of one poll of one source directory.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)},
			[]string{"source"}),
		PollErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ediwatch_poll_errors_total",
			Help: "Poll errors, by stage (connect, list, download, ingest, post_process)."}, []string{"source", "stage"}),
		Sets: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ediwatch_transaction_sets_total",
			Help: "Transaction sets ingested, by outcome (processed, duplicate, business_duplicate, conflict, rejected); conflict counts key conflicts and effect conflicts (a business key with other content)."},
			[]string{"outcome"}),
		Unbalanced: prometheus.NewCounter(prometheus.CounterOpts{Name: "ediwatch_unbalanced_remittances_total",
			Help: "835 transaction sets whose amounts do not balance."}),
		PostProcessed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ediwatch_files_post_processed_total",
			Help: "Files deleted or moved after ingest."}, []string{"source", "action"}),
	}
	m.X12Warnings = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ediwatch_x12_warnings_total",
		Help: "Envelope warnings in ingested files, by code: what the reader tolerated and a strict partner may reject (README, X12 warnings)."},
		[]string{"code"})
	reg.MustRegister(m.X12Warnings)
	m.SourceLastFile = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ediwatch_source_last_file_timestamp_seconds",
		Help: "When the source's last new file was recorded (ingested or rejected), by any replica; 0 before its first."}, []string{"source"})
	m.SourceOverdue = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ediwatch_source_overdue",
		Help: "1 once the source has sent no new file for longer than its expect_every (counted from its last file, or from this process's start before any)."}, []string{"source"})
	m.PostProcessWaiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ediwatch_postprocess_waiting",
		Help: "Files whose delete or move waits for the standbys to hold the commit that recorded them (store.wait_for_standbys), as of the source's last poll."}, []string{"source"})
	m.PostProcessWaitingSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ediwatch_postprocess_waiting_seconds",
		Help: "How long the source's deletes and moves have waited for the standbys; 0 while they do not."}, []string{"source"})
	m.StoreFailovers = prometheus.NewCounter(prometheus.CounterOpts{Name: "ediwatch_store_failovers_total",
		Help: "Times a new connection reached another PostgreSQL server than the last one (a standby promoted by a failover, or another cluster); the pollers then check the files they knew against the store again."})
	m.Deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ediwatch_deliveries_total",
		Help: "Delivery attempts, by sink and outcome (delivered, retry, dead, snoozed, gone: a 410 that disabled the sink)."}, []string{"sink", "outcome"})
	m.DeliveryLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ediwatch_delivery_duration_seconds",
		Help: "Duration of one delivery attempt.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}, []string{"sink"})
	m.DeliveryAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ediwatch_delivery_attempts_total",
		Help: "Delivery requests made (not a breaker snooze), by sink and class: the status class (2xx, 3xx, 4xx, 5xx), network (no response), timeout (the sink's timeout expired) or unsent (the request could not be built)."},
		[]string{"sink", "class"})
	reg.MustRegister(m.DeliveryAttempts)
	m.BreakerState = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ediwatch_circuit_breaker_state",
		Help: "Circuit breaker state per sink: 0 closed, 1 half-open, 2 open."}, []string{"sink"})
	m.LeaseLost = prometheus.NewCounter(prometheus.CounterOpts{Name: "ediwatch_outbox_lease_lost_total",
		Help: "Outbox transitions refused because the row's lease had passed to another relay."})
	m.SinkDisabled = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ediwatch_sink_disabled",
		Help: "1 while the sink is disabled (its receiver answered 410 Gone, or an operator disabled it): its rows wait undelivered until `ediwatch sink enable`."}, []string{"sink"})
	reg.MustRegister(m.SinkDisabled)
	m.OutboxPending = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ediwatch_outbox_pending",
		Help: "Outbox rows waiting for delivery (pending or in flight), per sink."}, []string{"sink"})
	m.OutboxDead = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ediwatch_outbox_dead",
		Help: "Dead-lettered outbox rows awaiting an operator (DLQ depth), per sink."}, []string{"sink"})
	m.OutboxOldestPending = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ediwatch_outbox_oldest_pending_seconds",
		Help: "Age of the oldest undelivered outbox row, per sink."}, []string{"sink"})
	m.BuildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ediwatch_build_info",
		Help: "Always 1; labels name the build."}, []string{"version", "goversion"})
	m.Divergence = prometheus.NewGauge(prometheus.GaugeOpts{Name: "ediwatch_reconciliation_divergence",
		Help: "1 when the last reconciliation (last 24h) found a divergence, else 0."})
	reg.MustRegister(m.Divergence)
	m.FilesDecryptFailed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ediwatch_files_decrypt_failed_total",
		Help: "Files rejected by OpenPGP decryption or verification, by reason (wrong_key, corrupt, unsigned, bad_signature, key_expired, unknown_signer, not_encrypted, too_large); nothing of them is posted."},
		[]string{"source", "reason"})
	reg.MustRegister(m.FilesDecryptFailed)
	reg.MustRegister(m.Deliveries, m.DeliveryLatency, m.BreakerState, m.LeaseLost,
		m.OutboxPending, m.OutboxDead, m.OutboxOldestPending, m.BuildInfo)
	reg.MustRegister(m.FilesListed, m.FilesDownloaded, m.FilesSkipped, m.FilesFailed, m.BytesDownloaded,
		m.PollDuration, m.PollErrors, m.Sets, m.Unbalanced, m.PostProcessed, m.SourceLastFile, m.SourceOverdue,
		m.PostProcessWaiting, m.PostProcessWaitingSeconds, m.StoreFailovers)
	return m
}

// Init creates the labelled series of the configured sources and sinks at
// zero, so /metrics shows them (and alerts can use them) before their
// first event.
func (m *Metrics) Init(sources, sinks []string) {
	for _, s := range sources {
		m.FilesListed.WithLabelValues(s)
		m.SourceLastFile.WithLabelValues(s)
		m.SourceOverdue.WithLabelValues(s)
		m.PostProcessWaiting.WithLabelValues(s)
		m.PostProcessWaitingSeconds.WithLabelValues(s)
		m.FilesDownloaded.WithLabelValues(s)
		m.BytesDownloaded.WithLabelValues(s)
		for _, stage := range []string{"lease", "list", "ledger", "download", "ingest", "post_process", "standbys"} {
			m.PollErrors.WithLabelValues(s, stage)
		}
		for _, r := range []string{"download", "ingest", "too_large", "gave_up"} {
			m.FilesFailed.WithLabelValues(s, r)
		}
	}
	for _, o := range []string{"processed", "duplicate", "business_duplicate", "conflict", "rejected"} {
		m.Sets.WithLabelValues(o)
	}
	for _, s := range sinks {
		for _, o := range []string{"delivered", "retry", "dead", "snoozed"} {
			m.Deliveries.WithLabelValues(s, o)
		}
		for _, c := range []string{"2xx", "3xx", "4xx", "5xx", "network", "timeout"} {
			m.DeliveryAttempts.WithLabelValues(s, c)
		}
		m.SinkDisabled.WithLabelValues(s)
		m.Deliveries.WithLabelValues(s, "gone")
		m.OutboxPending.WithLabelValues(s)
		m.OutboxDead.WithLabelValues(s)
		m.OutboxOldestPending.WithLabelValues(s)
	}
}
