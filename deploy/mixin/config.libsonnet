// The mixin's settings. Override any of them with
//   (import 'mixin.libsonnet') + { _config+:: { stratusSelector: 'job="ccm"' } }
// Thresholds and durations are the ones docs/operations.md explains.
{
  _config+:: {
    // Selects the stratus-ccm replicas' series (the chart's ServiceMonitor
    // and PodMonitor set job="stratus-ccm").
    stratusSelector: 'job="stratus-ccm"',
    // Labels that tell one deployment of stratus from another: every
    // aggregation keeps them (add cluster for a multi-cluster Prometheus).
    groupLabels: 'job',
    // Where each alert's runbook is; %s is the alert's name in lower case
    // (the anchor of its section in docs/operations.md).
    runbookURLPattern: 'https://github.com/stratus-ccm/stratus/blob/main/docs/operations.md#%s',
    // The window of every rate and quantile.
    rateWindow: '5m',
    // How often the groups are evaluated; null keeps Prometheus's
    // global evaluation_interval.
    ruleInterval: null,

    // How long each alert's condition must hold before it fires.
    alertFor: {
      StratusCloudBudgetExhausted: '15m',
      StratusCloudThrottled: '15m',
      StratusCloudUnreachable: '5m',
      StratusCloudErrors: '15m',
      StratusLoadBalancerProvisioningStuck: '1m',
      StratusLoadBalancerFailing: '1m',
      StratusNodeDeletionBlocked: '30m',
      StratusNodeDeletionsOverBudget: '0m',
      StratusNodesUninitialized: '1m',
      StratusNoLeader: '2m',
      StratusLeadershipFlapping: '0m',
      StratusPluginDisconnected: '2m',
      StratusWorkQueueGrowing: '15m',
    },
    // Thresholds.
    cloudErrorRatio: 0.1,  // of a provider's calls failing
    lbProvisioningStuckSeconds: 900,  // a load balancer provisioning this long
    lbFailingSeconds: 900,  // a load balancer failing this long
    nodeUninitializedSeconds: 600,  // a node uninitialized this long after its creation
    leaderTransitions: 4,  // more lease changes than this in leaderFlappingWindow
    leaderFlappingWindow: '1h',
    queueDepth: 100,  // items waiting in one controller's queue

    // The dashboard.
    dashboardUID: 'stratus-overview',
    dashboardTitle: 'stratus / overview',
    dashboardTags: ['stratus', 'kubernetes'],
    dashboardRefresh: '30s',
  },
}
