// The Grafana dashboard, written out as Grafana's JSON model (schemaVersion
// 39) without a library: rows of time series, each query a recording rule
// of rules.libsonnet where the alerts share it.
{
  grafanaDashboards+:: {
    local c = $._config,
    local s = c.stratusSelector,
    local ds = { type: 'prometheus', uid: '${datasource}' },
    local target(expr, legend) = { expr: expr, legendFormat: legend, datasource: ds },
    local panel(title, description, unit, targets) = {
      type: 'timeseries',
      title: title,
      description: description,
      datasource: ds,
      fieldConfig: { defaults: { unit: unit }, overrides: [] },
      options: { legend: { displayMode: 'list', placement: 'bottom' }, tooltip: { mode: 'multi' } },
      targets: [t { refId: std.char(65 + i) } for i in std.range(0, std.length(targets) - 1) for t in [targets[i]]],
    },
    local row(title) = { type: 'row', title: title, collapsed: false, panels: [] },

    // Rows of panels, laid out two to a line.
    local rows = [
      [
        row('Leader and providers'),
        panel('Leader', 'Replicas running the controllers (stratus_leader): 1 when all is well; and the leader changes the lease has recorded (with leader election).', 'short', [
          target('sum by (instance) (stratus_leader{%s})' % s, '{{instance}} leads'),
          target('max by (lease) (stratus_leader_lease_transitions{%s})' % s, '{{lease}} transitions'),
        ]),
        panel('Provider health', 'A provider in an outage (1: its last calls all failed transiently), and provider plugins not connected (1).', 'short', [
          target('max by (provider) (stratus_cloud_provider_down{%s})' % s, '{{provider}} down'),
          target('1 - min by (provider) (stratus_cloud_plugin_connected{%s})' % s, '{{provider}} plugin disconnected'),
        ]),
      ],
      [
        row('Cloud'),
        panel('Cloud requests by method and provider', 'Calls per second, retries included.', 'reqps', [
          target('sum by (provider, method) (stratus:cloud_requests:rate)', '{{provider}} {{method}}'),
        ]),
        panel('Cloud errors by method and provider', 'Calls per second that failed (error, transient error, throttled), and the share of a provider\'s calls that failed.', 'reqps', [
          target('sum by (provider, method, outcome) (stratus:cloud_requests:rate{outcome=~"error|transient_error|throttled"})', '{{provider}} {{method}} {{outcome}}'),
          target('stratus:cloud_request_errors:ratio', '{{provider}} share failing'),
        ]),
        panel('Budget use by priority', 'Tokens left in each provider\'s request budget, and calls waiting for it by priority class.', 'short', [
          target('max by (provider) (stratus_cloud_budget_available{%s})' % s, '{{provider}} tokens available'),
          target('stratus:cloud_budget_queued:sum', '{{provider}} {{priority}} waiting'),
        ]),
        panel('Budget waits by priority (p99)', 'How long calls waited for the request budget, by priority class.', 's', [
          target('stratus:cloud_budget_wait_seconds:p99', '{{provider}} {{priority}}'),
        ]),
        panel('Cloud request latency (p99)', 'Duration of cloud calls without the budget wait.', 's', [
          target('stratus:cloud_request_duration_seconds:p99', '{{provider}} {{method}}'),
        ]),
        panel('Throttled calls', 'Calls the cloud answered as throttled, per second.', 'reqps', [
          target('stratus:cloud_throttled:rate', '{{provider}}'),
        ]),
      ],
      [
        row('Load balancers'),
        panel('Load balancers by state', 'LoadBalancer Services by their LoadBalancerReady condition.', 'short', [
          target('sum by (provider, state) (stratus_service_load_balancers{%s})' % s, '{{provider}} {{state}}'),
        ]),
        panel('Load balancer provisioning latency (p90), oldest in state', 'From the first ensure to the ingress, and how long the oldest Service of each state has been in it.', 's', [
          target('stratus:service_provisioning_latency_seconds:p90', '{{provider}} p90'),
          target('max by (provider, state) (stratus_service_load_balancers_oldest_seconds{%s})' % s, '{{provider}} oldest {{state}}'),
        ]),
      ],
      [
        row('Nodes'),
        panel('Nodes by state', 'Nodes initialized and waiting for initialization.', 'short', [
          target('sum by (provider, state) (stratus_nodes{%s})' % s, '{{provider}} {{state}}'),
        ]),
        panel('Node initialization latency (p90), oldest uninitialized', 'From the node\'s creation to its initialization, and the age of the oldest node still uninitialized.', 's', [
          target('stratus:node_initial_sync_delay_seconds:p90', 'p90'),
          target('max by (provider) (stratus_nodes_oldest_seconds{%s, state="uninitialized"})' % s, '{{provider}} oldest uninitialized'),
        ]),
        panel('Deletion guard decisions', 'Node deletions held by the guard (by reason) and the lifecycle controller\'s decisions, per second.', 'ops', [
          target('stratus:node_deletion_blocked:rate', '{{provider}} held: {{reason}}'),
          target('stratus:node_lifecycle_decisions:rate', '{{provider}} {{decision}}'),
        ]),
      ],
      [
        row('Work queues'),
        panel('Queue depth per controller', 'Items waiting in each controller\'s work queue.', 'short', [
          target('stratus:workqueue_depth:sum', '{{name}}'),
        ]),
        panel('Queue latency per controller (p99)', 'How long items waited in the queue before a worker took them.', 's', [
          target('stratus:workqueue_queue_duration_seconds:p99', '{{name}}'),
        ]),
        panel('Reconcile errors per controller', 'Reconciles that ended in an error, per second.', 'ops', [
          target('sum by (controller) (rate(controller_runtime_reconcile_errors_total{%s}[%s]))' % [s, c.rateWindow], '{{controller}}'),
        ]),
        panel('Reconciles per controller', 'Reconciles per second by result.', 'ops', [
          target('sum by (controller, result) (rate(controller_runtime_reconcile_total{%s}[%s]))' % [s, c.rateWindow], '{{controller}} {{result}}'),
        ]),
      ],
    ],

    // Each row takes a line of height 1; its panels follow, two to a line of
    // height 8.
    local layout(rows) = std.foldl(
      function(acc, r)
        local panels = r[1:];
        local lines = std.ceil(std.length(panels) / 2);
        {
          y: acc.y + 1 + 8 * lines,
          out: acc.out + [r[0] { gridPos: { h: 1, w: 24, x: 0, y: acc.y } }] + [
            panels[i] { gridPos: { h: 8, w: 12, x: 12 * (i % 2), y: acc.y + 1 + 8 * std.floor(i / 2) } }
            for i in std.range(0, std.length(panels) - 1)
          ],
        },
      rows,
      { y: 0, out: [] }
    ).out,

    'stratus-overview.json': {
      uid: c.dashboardUID,
      title: c.dashboardTitle,
      tags: c.dashboardTags,
      schemaVersion: 39,
      editable: true,
      refresh: c.dashboardRefresh,
      time: { from: 'now-1h', to: 'now' },
      timezone: 'browser',
      templating: {
        list: [
          { name: 'datasource', label: 'Data source', type: 'datasource', query: 'prometheus', current: {}, hide: 0 },
        ],
      },
      panels: [p { id: i + 1 } for i in std.range(0, std.length(layout(rows)) - 1) for p in [layout(rows)[i]]],
    },
  },
}
