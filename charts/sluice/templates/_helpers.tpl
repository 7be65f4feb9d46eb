{{/* Labels every object of the release carries. */}}
{{- define "sluice.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{- define "sluice.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "sluice.operatorName" -}}{{ .Release.Name }}-operator{{- end }}
{{- define "sluice.webhooksName" -}}{{ .Release.Name }}-webhooks{{- end }}
{{- define "sluice.operatorUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "sluice.operatorName" . }}
{{- end }}

{{- define "sluice.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
