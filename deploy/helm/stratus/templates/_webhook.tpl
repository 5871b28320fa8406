{{/* The webhook's certificate source: self-signed or cert-manager. */}}
{{- define "stratus.webhookCertificates" -}}
{{- $mode := .Values.webhook.certificates -}}
{{- if not (has $mode (list "auto" "cert-manager" "self-signed")) -}}
{{- fail (printf "webhook.certificates %q: want auto, cert-manager or self-signed" $mode) -}}
{{- end -}}
{{- if eq $mode "auto" -}}
{{- if .Capabilities.APIVersions.Has "cert-manager.io/v1" -}}cert-manager{{- else -}}self-signed{{- end -}}
{{- else -}}
{{- $mode -}}
{{- end -}}
{{- end -}}

{{/* The manager's webhook flags. */}}
{{- define "stratus.webhookArgs" -}}
{{- if not (has .Values.webhook.failurePolicy (list "Ignore" "Fail")) -}}
{{- fail (printf "webhook.failurePolicy %q: want Ignore or Fail" .Values.webhook.failurePolicy) -}}
{{- end -}}
- --webhooks=service-load-balancer
- --webhook-secure-port={{ .Values.webhook.port }}
- --webhook-tls-cert-file=/etc/stratus/webhook-tls/tls.crt
- --webhook-tls-private-key-file=/etc/stratus/webhook-tls/tls.key
{{- end -}}
