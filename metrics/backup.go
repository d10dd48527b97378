package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func gaugeValue(g prometheus.Gauge) float64 {
	var m dto.Metric
	if g.Write(&m) != nil {
		return 0
	}
	return m.GetGauge().GetValue()
}

// Backup operations (the operation label).
const (
	BackupOp  = "backup"
	RestoreOp = "restore"
)

// Backups are the router's backup and restore series: how long each
// took, the bytes written or read, and when each collection was last
// backed up successfully (what the chart's alert on a missed schedule
// reads).
type Backups struct {
	duration    *prometheus.HistogramVec
	bytes       *prometheus.CounterVec
	lastSuccess *prometheus.GaugeVec
}

// NewBackups registers the backup series on reg, each operation's at zero.
func NewBackups(reg prometheus.Registerer) *Backups {
	m := &Backups{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "trawl_backup_duration_seconds",
			Help:    "Time a backup or restore of one collection took, by operation and outcome (ok or failed).",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 16), // 0.1 s .. ~55 min
		}, []string{"operation", "outcome"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trawl_backup_bytes_total",
			Help: "Bytes of backup files written (backup) or read (restore) by successful operations, by operation.",
		}, []string{"operation"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "trawl_backup_last_success_timestamp_seconds",
			Help: "Unix time of the last successful backup of a collection through this router.",
		}, []string{"collection"}),
	}
	reg.MustRegister(m.duration, m.bytes, m.lastSuccess)
	for _, op := range []string{BackupOp, RestoreOp} {
		m.bytes.WithLabelValues(op)
		for _, o := range []string{"ok", "failed"} {
			m.duration.WithLabelValues(op, o)
		}
	}
	return m
}

// Seen sets collection's last success from a backup found on storage
// (at start: the newest complete one), unless a later one is recorded.
func (m *Backups) Seen(collection string, at time.Time) {
	if m == nil {
		return
	}
	g := m.lastSuccess.WithLabelValues(collection)
	if v := float64(at.Unix()); v > gaugeValue(g) {
		g.Set(v)
	}
}

// MaxAge exports the age a collection's last successful backup may reach
// before the chart's TrawlBackupTooOld alert fires (--backup-max-age),
// as trawl_backup_max_age_seconds; zero exports nothing.
func MaxAge(reg prometheus.Registerer, d time.Duration) {
	if d <= 0 {
		return
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "trawl_backup_max_age_seconds",
		Help: "How old the last successful backup of a collection may be before it is overdue (--backup-max-age).",
	})
	g.Set(d.Seconds())
	reg.MustRegister(g)
}

// Observe records one operation on collection that took d and moved
// bytes; err nil is a success. A nil *Backups records nothing.
func (m *Backups) Observe(op, collection string, d time.Duration, bytes int64, err error, now time.Time) {
	if m == nil {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = "failed"
	}
	m.duration.WithLabelValues(op, outcome).Observe(d.Seconds())
	if err != nil {
		return
	}
	m.bytes.WithLabelValues(op).Add(float64(bytes))
	if op == BackupOp {
		m.lastSuccess.WithLabelValues(collection).Set(float64(now.Unix()))
	}
}
