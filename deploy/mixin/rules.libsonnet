// Recording rules: what the dashboard and the alerts share.
{
  prometheusRules+:: {
    local c = $._config,
    local g = c.groupLabels,
    groups+: [
      {
        name: 'stratus.rules',
        [if c.ruleInterval != null then 'interval']: c.ruleInterval,
        rules: [
          {
            record: 'stratus:cloud_requests:rate',
            expr: 'sum by (%s, provider, method, outcome) (rate(stratus_cloud_requests_total{%s}[%s]))' % [g, c.stratusSelector, c.rateWindow],
          },
          {
            // Calls that failed because of the provider (an error, a
            // transient error, a throttle) over all calls.
            record: 'stratus:cloud_request_errors:ratio',
            expr: |||
              sum by (%(g)s, provider) (stratus:cloud_requests:rate{outcome=~"error|transient_error|throttled"})
                / sum by (%(g)s, provider) (stratus:cloud_requests:rate)
            ||| % { g: g },
          },
          {
            record: 'stratus:cloud_request_duration_seconds:p99',
            expr: 'histogram_quantile(0.99, sum by (%s, provider, method, le) (rate(stratus_cloud_request_duration_seconds_bucket{%s}[%s])))' % [g, c.stratusSelector, c.rateWindow],
          },
          {
            record: 'stratus:cloud_throttled:rate',
            expr: 'sum by (%s, provider) (rate(stratus_cloud_throttled_total{%s}[%s]))' % [g, c.stratusSelector, c.rateWindow],
          },
          {
            record: 'stratus:cloud_budget_wait_seconds:p99',
            expr: 'histogram_quantile(0.99, sum by (%s, provider, priority, le) (rate(stratus_cloud_budget_wait_seconds_bucket{%s}[%s])))' % [g, c.stratusSelector, c.rateWindow],
          },
          {
            record: 'stratus:cloud_budget_queued:sum',
            expr: 'sum by (%s, provider, priority) (stratus_cloud_budget_queued{%s})' % [g, c.stratusSelector],
          },
          {
            record: 'stratus:service_provisioning_latency_seconds:p90',
            expr: 'histogram_quantile(0.9, sum by (%s, provider, le) (rate(stratus_service_provisioning_latency_seconds_bucket{%s}[%s])))' % [g, c.stratusSelector, c.rateWindow],
          },
          {
            record: 'stratus:node_initial_sync_delay_seconds:p90',
            expr: 'histogram_quantile(0.9, sum by (%s, le) (rate(node_controller_initial_node_sync_delay_seconds_bucket{%s}[%s])))' % [g, c.stratusSelector, c.rateWindow],
          },
          {
            record: 'stratus:node_deletion_blocked:rate',
            expr: 'sum by (%s, provider, reason) (rate(stratus_node_deletion_blocked_total{%s}[%s]))' % [g, c.stratusSelector, c.rateWindow],
          },
          {
            record: 'stratus:node_lifecycle_decisions:rate',
            expr: 'sum by (%s, provider, decision) (rate(stratus_node_lifecycle_decisions_total{%s}[%s]))' % [g, c.stratusSelector, c.rateWindow],
          },
          {
            record: 'stratus:workqueue_depth:sum',
            expr: 'sum by (%s, name) (workqueue_depth{%s})' % [g, c.stratusSelector],
          },
          {
            record: 'stratus:workqueue_queue_duration_seconds:p99',
            expr: 'histogram_quantile(0.99, sum by (%s, name, le) (rate(workqueue_queue_duration_seconds_bucket{%s}[%s])))' % [g, c.stratusSelector, c.rateWindow],
          },
          {
            // Replicas running the controllers: 1 when all is well.
            record: 'stratus:leader:sum',
            expr: 'sum by (%s) (stratus_leader{%s})' % [g, c.stratusSelector],
          },
        ],
      },
    ],
  },
}
