// Alerts. Each has a section of docs/operations.md, its runbook_url: what it
// means, how to confirm it, what to do, and why its threshold is what it is.
{
  prometheusAlerts+:: {
    local c = $._config,
    local g = c.groupLabels,
    local s = c.stratusSelector,
    local alert(name, severity, expr, summary, description) = {
      alert: name,
      expr: expr,
      'for': c.alertFor[name],
      labels: { severity: severity },
      annotations: {
        summary: summary,
        description: description,
        runbook_url: c.runbookURLPattern % std.asciiLower(name),
      },
    },
    groups+: [
      {
        name: 'stratus.alerts',
        [if c.ruleInterval != null then 'interval']: c.ruleInterval,
        rules: [
          alert('StratusCloudBudgetExhausted', 'warning',
                'sum by (%s, provider) (stratus:cloud_budget_queued:sum) > 0' % g,
                'Cloud calls of provider {{ $labels.provider }} keep waiting for its request budget.',
                'Calls to {{ $labels.provider }} have been queued for the request budget without a break for %s: stratus needs more cloud calls than the budget allows, and everything that needs the cloud is late.' % c.alertFor.StratusCloudBudgetExhausted),
          alert('StratusCloudThrottled', 'warning',
                'stratus:cloud_throttled:rate > 0',
                'The cloud throttles provider {{ $labels.provider }}.',
                'The cloud has answered calls of {{ $labels.provider }} as throttled (HTTP 429 or equivalent) for %s; each throttle pauses the provider\'s budget.' % c.alertFor.StratusCloudThrottled),
          alert('StratusCloudUnreachable', 'critical',
                'max by (%s, provider) (stratus_cloud_provider_down{%s}) == 1' % [g, s],
                'The cloud of provider {{ $labels.provider }} does not answer.',
                'Every call to {{ $labels.provider }} has failed with a transient or throttling error for %s: nodes are not initialized, load balancers not changed, and node deletions are held.' % c.alertFor.StratusCloudUnreachable),
          alert('StratusCloudErrors', 'warning',
                'stratus:cloud_request_errors:ratio > %g' % c.cloudErrorRatio,
                'Calls to provider {{ $labels.provider }} fail ({{ $value | humanizePercentage }}).',
                'More than %g%% of the calls to {{ $labels.provider }} failed with errors, transient errors or throttles for %s.' % [c.cloudErrorRatio * 100, c.alertFor.StratusCloudErrors]),
          alert('StratusLoadBalancerProvisioningStuck', 'warning',
                'max by (%s, provider) (stratus_service_load_balancers_oldest_seconds{%s, state="provisioning"}) > %d' % [g, s, c.lbProvisioningStuckSeconds],
                'A load balancer of provider {{ $labels.provider }} has been provisioning for {{ $value | humanizeDuration }}.',
                'At least one LoadBalancer Service served by {{ $labels.provider }} has had no ingress for more than %ds: its load balancer is provisioning and does not finish.' % c.lbProvisioningStuckSeconds),
          alert('StratusLoadBalancerFailing', 'warning',
                'max by (%s, provider) (stratus_service_load_balancers_oldest_seconds{%s, state="failing"}) > %d' % [g, s, c.lbFailingSeconds],
                'A load balancer of provider {{ $labels.provider }} has been failing for {{ $value | humanizeDuration }}.',
                'At least one LoadBalancer Service served by {{ $labels.provider }} has had its LoadBalancerReady condition at CloudError for more than %ds.' % c.lbFailingSeconds),
          alert('StratusNodeDeletionBlocked', 'warning',
                'sum by (%s, provider, reason) (stratus:node_deletion_blocked:rate{reason!="GracePeriod"}) > 0' % g,
                'The deletion guard of provider {{ $labels.provider }} holds node deletions ({{ $labels.reason }}).',
                'For %s the guard has held back the deletion of nodes whose machines look gone, for {{ $labels.reason }}: stratus does not trust what the cloud says, and nodes of deleted machines stay.' % c.alertFor.StratusNodeDeletionBlocked),
          alert('StratusNodeDeletionsOverBudget', 'critical',
                'sum by (%s, provider) (stratus:node_deletion_blocked:rate{reason="BudgetExhausted"}) > 0' % g,
                'Provider {{ $labels.provider }} wants to delete nodes faster than the deletion budget allows.',
                'The guard held node deletions because the deletion budget of {{ $labels.provider }} is spent: more machines look gone than the budget allows in its window. A mass deletion is either real or the cloud is wrong about its machines.'),
          alert('StratusNodesUninitialized', 'warning',
                'max by (%s, provider) (stratus_nodes_oldest_seconds{%s, state="uninitialized"}) > %d' % [g, s, c.nodeUninitializedSeconds],
                'A node of provider {{ $labels.provider }} has been uninitialized for {{ $value | humanizeDuration }}.',
                'At least one node of {{ $labels.provider }} still carries the node.cloudprovider.kubernetes.io/uninitialized taint %ds after its creation: no pod without a toleration is scheduled on it.' % c.nodeUninitializedSeconds),
          alert('StratusNoLeader', 'critical',
                |||
                  stratus:leader:sum < 1
                    or sum by (%(g)s) (up{%(s)s}) == 0
                ||| % { g: g, s: s },
                'No stratus-ccm replica runs the controllers.',
                'For %s no stratus-ccm replica has led, or none could be scraped: nodes, load balancers and routes are not reconciled.' % c.alertFor.StratusNoLeader),
          alert('StratusLeadershipFlapping', 'warning',
                |||
                  max by (%(g)s, lease) (max_over_time(stratus_leader_lease_transitions{%(s)s}[%(w)s]))
                    - min by (%(g)s, lease) (min_over_time(stratus_leader_lease_transitions{%(s)s}[%(w)s]))
                    > %(n)d
                ||| % { g: g, s: s, w: c.leaderFlappingWindow, n: c.leaderTransitions },
                'The stratus-ccm lease {{ $labels.lease }} changed hands {{ $value }} times in %s.' % c.leaderFlappingWindow,
                'Leadership moved more than %d times in %s: each move restarts the controllers and their caches.' % [c.leaderTransitions, c.leaderFlappingWindow]),
          alert('StratusPluginDisconnected', 'critical',
                'min by (%s, provider) (stratus_cloud_plugin_connected{%s}) == 0' % [g, s],
                'The provider plugin of {{ $labels.provider }} is disconnected.',
                'A stratus-ccm replica has had no connection to the plugin process serving {{ $labels.provider }} for %s; every call to it fails.' % c.alertFor.StratusPluginDisconnected),
          alert('StratusWorkQueueGrowing', 'warning',
                |||
                  stratus:workqueue_depth:sum > %(n)d
                    and sum by (%(g)s, name) (delta(workqueue_depth{%(s)s}[%(w)s])) > 0
                ||| % { g: g, s: s, w: c.rateWindow, n: c.queueDepth },
                'The work queue {{ $labels.name }} holds {{ $value }} items and grows.',
                'The queue of the {{ $labels.name }} controller has held more than %d items for %s and is still growing: the controller does not keep up.' % [c.queueDepth, c.alertFor.StratusWorkQueueGrowing]),
        ],
      },
    ],
  },
}
