// Package dashboards holds what operators import to watch mcprouter: Grafana dashboards
// (*.json) and a Prometheus scrape configuration example (prometheus.yml). See README.md.
//
// Its tests start a real router in front of a real backend, drive traffic through them,
// and check the dashboards against the router's /metrics output, so that a renamed or
// removed metric fails the build instead of leaving an empty panel; they also load the
// router's live status page in headless Chromium and check that it moves under load.
package dashboards
