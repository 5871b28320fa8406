// The stratus monitoring mixin: alerts, recording rules and a Grafana
// dashboard for stratus-ccm, in the monitoring-mixins convention. make
// generate renders it into generated/ (and the Helm chart's files/).
(import 'config.libsonnet') +
(import 'rules.libsonnet') +
(import 'alerts.libsonnet') +
(import 'dashboards.libsonnet')
