package app

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// reloadSpare is how many backends added by reloads get request metrics of their own
// (metrics.Options.Spare); later ones count under backend="router" until a restart.
const reloadSpare = 16

// reloadCollector exports the reloads: mcprouter_config_reloads_total{outcome}
// (success, failure: refused) and mcprouter_config_last_reload_success_timestamp_seconds
// (the start counts as the first success), read at scrape time.
type reloadCollector struct{ st *reloadState }

var (
	reloadsDesc = prometheus.NewDesc("mcprouter_config_reloads_total",
		"Configuration reloads (SIGHUP, or the file changed with reload.watch), by outcome: success, or failure (refused: the previous configuration kept running).",
		[]string{"outcome"}, nil)
	lastReloadDesc = prometheus.NewDesc("mcprouter_config_last_reload_success_timestamp_seconds",
		"When the running configuration was last applied: the start, or the last successful reload (Unix seconds).", nil, nil)
)

func (c reloadCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- reloadsDesc
	ch <- lastReloadDesc
}

func (c reloadCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(reloadsDesc, prometheus.CounterValue, float64(c.st.reloadsOK.Load()), "success")
	ch <- prometheus.MustNewConstMetric(reloadsDesc, prometheus.CounterValue, float64(c.st.reloadsBad.Load()), "failure")
	ch <- prometheus.MustNewConstMetric(lastReloadDesc, prometheus.GaugeValue, float64(c.st.lastSuccess.Load())/1e9)
}

// registerReloadMetrics adds the reload metrics to the admin registry (when metrics
// are on).
func (a *App) registerReloadMetrics() error {
	if a.Prometheus == nil {
		return nil
	}
	if err := a.Prometheus.Register(reloadCollector{&a.reloadState}); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}
