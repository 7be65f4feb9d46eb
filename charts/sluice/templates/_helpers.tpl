{{/*
Every object name is built here, from sluice.fullname: the release name, followed by
-<chart name> unless it already contains it; fullnameOverride replaces it, nameOverride the
chart name. Names are cut at 63 characters (Service names are DNS labels).
*/}}
{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sluice.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := include "sluice.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* <fullname>-<suffix>: (dict "root" . "suffix" "operator") */}}
{{- define "sluice.componentName" -}}
{{- printf "%s-%s" (include "sluice.fullname" .root) .suffix | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sluice.operatorName" -}}
{{- include "sluice.componentName" (dict "root" . "suffix" "operator") }}
{{- end }}
{{- define "sluice.webhooksName" -}}
{{- include "sluice.componentName" (dict "root" . "suffix" "webhooks") }}
{{- end }}
{{/* The scheduler ConfigMap the operator reads (--config-map-name). */}}
{{- define "sluice.schedulerConfigMap" -}}
{{- include "sluice.componentName" (dict "root" . "suffix" "scheduler") }}
{{- end }}
{{/* The operator's Lease (--lease-name): operator.leaseName, else <fullname>-operator. */}}
{{- define "sluice.leaseName" -}}
{{- .Values.operator.leaseName | default (include "sluice.operatorName" .) }}
{{- end }}
{{- define "sluice.operatorUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "sluice.operatorName" . }}
{{- end }}

{{/* Labels every object of the release carries. */}}
{{- define "sluice.labels" -}}
app.kubernetes.io/name: {{ include "sluice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "sluice.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The labels that select one component's pods: (dict "root" . "component" "operator") */}}
{{- define "sluice.selector" -}}
app.kubernetes.io/name: {{ include "sluice.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/*
A component's pod template metadata: its selector labels (which podLabels cannot
override) and podAnnotations, plus the given annotations.
(dict "root" . "component" "operator" "values" .Values.operator "annotations" (dict ...))
*/}}
{{- define "sluice.podMetadata" -}}
{{- $selector := include "sluice.selector" . | fromYaml -}}
labels: {{- merge $selector (.values.podLabels | default dict) | toYaml | nindent 2 }}
{{- $annotations := merge (.annotations | default dict) (.values.podAnnotations | default dict) }}
{{- with $annotations }}
annotations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
Where a component's pods may run: priorityClassName, nodeSelector, tolerations, affinity
(.affinity, the values' own or the component's default) and topologySpreadConstraints (a
constraint without labelSelector selects the component's pods).
*/}}
{{- define "sluice.podScheduling" -}}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .values.topologySpreadConstraints }}
{{- $selector := include "sluice.selector" . | fromYaml }}
{{- $constraints := list }}
{{- range .values.topologySpreadConstraints }}
{{- $constraint := deepCopy . }}
{{- if not $constraint.labelSelector }}
{{- $_ := set $constraint "labelSelector" (dict "matchLabels" $selector) }}
{{- end }}
{{- $constraints = append $constraints $constraint }}
{{- end }}
topologySpreadConstraints: {{- toYaml $constraints | nindent 2 }}
{{- end }}
{{- end }}

{{/*
A component's PodDisruptionBudget. A minAvailable as high as the replicas would block every
node drain, so it is refused.
*/}}
{{- define "sluice.podDisruptionBudget" -}}
{{- $pdb := .values.podDisruptionBudget }}
{{- if $pdb.enabled }}
{{- if and (not (kindIs "string" $pdb.minAvailable)) (ge (int $pdb.minAvailable) (int .values.replicas)) }}
{{- fail (printf "%s.podDisruptionBudget.minAvailable (%d) must be below %s.replicas (%d), or no node drain could ever evict one of its pods: lower it, add replicas, or set %s.podDisruptionBudget.enabled=false" .component (int $pdb.minAvailable) .component (int .values.replicas) .component) }}
{{- end }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "sluice.componentName" (dict "root" .root "suffix" .component) }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "sluice.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  minAvailable: {{ $pdb.minAvailable }}
  selector:
    matchLabels:
      {{- include "sluice.selector" . | nindent 6 }}
{{- end }}
{{- end }}

{{/*
The kinds of workload besides batch/v1 Job that sluice gates when their value
workloads.<key>.enabled is true (docs/workloads.md): each is one entry of the list, with the
API the webhooks' rules, the operator's watch and its RBAC name (scale: its /scale
subresource writes its size, and the validating webhook reviews it).
*/}}
{{- define "sluice.workloadKinds" -}}
{{- $known := list
  (dict "key" "jobset" "kind" "JobSet" "group" "jobset.x-k8s.io" "version" "v1alpha2" "plural" "jobsets")
  (dict "key" "trainjob" "kind" "TrainJob" "group" "trainer.kubeflow.org" "version" "v1alpha1" "plural" "trainjobs")
  (dict "key" "pytorchjob" "kind" "PyTorchJob" "group" "kubeflow.org" "version" "v1" "plural" "pytorchjobs" "scale" true)
  (dict "key" "mpijob" "kind" "MPIJob" "group" "kubeflow.org" "version" "v2beta1" "plural" "mpijobs")
  (dict "key" "rayjob" "kind" "RayJob" "group" "ray.io" "version" "v1" "plural" "rayjobs")
}}
{{- $enabled := list }}
{{- range $known }}
{{- if (index $.Values.workloads .key).enabled }}
{{- $enabled = append $enabled . }}
{{- end }}
{{- end }}
{{- toYaml $enabled }}
{{- end }}

{{/* The --workload-kind arguments of both components: Job, and every enabled kind. */}}
{{- define "sluice.workloadKindArgs" -}}
- --workload-kind=Job
{{- range (include "sluice.workloadKinds" . | fromYamlArray) }}
- --workload-kind={{ .kind }}
{{- end }}
{{- end }}
