{{/* Name of the chart's objects. */}}
{{- define "stratus.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "stratus.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "stratus.labels" -}}
{{ include "stratus.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "stratus.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "stratus.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "stratus.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace -}}
{{- end -}}

{{- define "stratus.cloudConfigSecret" -}}
{{- default (printf "%s-cloud-config" (include "stratus.fullname" .)) .Values.cloudConfig.existingSecret -}}
{{- end -}}

{{- define "stratus.hasCloudConfig" -}}
{{- if or .Values.cloudConfig.existingSecret .Values.cloudConfig.content -}}true{{- end -}}
{{- end -}}

{{/* The socket directory shared by the manager and its plugin sidecars. */}}
{{- define "stratus.pluginSocketDir" -}}/run/stratus{{- end -}}

{{/*
The ManagerConfig (--config) body: managerConfig, with one provider of type
plugin per entry of plugins appended to its providers. Empty when neither is
set.
*/}}
{{- define "stratus.managerConfig" -}}
{{- if or .Values.managerConfig .Values.plugins -}}
{{- $cfg := deepCopy .Values.managerConfig -}}
{{- $providers := default (list) $cfg.providers -}}
{{- $names := dict -}}
{{- range $i, $p := .Values.plugins -}}
{{- $name := required (printf "plugins[%d].name is required" $i) $p.name -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $name) -}}
{{- fail (printf "plugins[%d].name %q: must be a DNS label (it names the sidecar container and its socket)" $i $name) -}}
{{- end -}}
{{- if hasKey $names $name -}}
{{- fail (printf "plugins[%d].name %q: used twice" $i $name) -}}
{{- end -}}
{{- $_ := set $names $name true -}}
{{- $entry := deepCopy (default (dict) $p.providerConfig) -}}
{{- $_ := set $entry "name" $name -}}
{{- $_ := set $entry "type" "plugin" -}}
{{- $plugin := default (dict) $entry.plugin -}}
{{- $_ := set $plugin "address" (printf "unix://%s/%s.sock" (include "stratus.pluginSocketDir" $) $name) -}}
{{- $_ := set $entry "plugin" $plugin -}}
{{- $providers = append $providers $entry -}}
{{- end -}}
{{- if $providers -}}
{{- $_ := set $cfg "providers" $providers -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}
{{- end -}}

{{/* The ServiceAccount the ServiceMonitor and PodMonitor scrape as. */}}
{{- define "stratus.scraperName" -}}
{{- printf "%s-scraper" (include "stratus.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The scrape settings shared by the ServiceMonitor and the PodMonitor. */}}
{{- define "stratus.monitoringEndpoint" -}}
{{- $m := .Values.monitoring -}}
scheme: https
path: /metrics
interval: {{ $m.interval }}
authorization:
  type: Bearer
  credentials:
    name: {{ include "stratus.scraperName" . }}-token
    key: token
tlsConfig:
  {{- toYaml $m.tlsConfig | nindent 2 }}
relabelings:
  - action: replace
    targetLabel: job
    replacement: {{ $m.job }}
{{- end -}}
