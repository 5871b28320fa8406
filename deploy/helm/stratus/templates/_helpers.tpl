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
