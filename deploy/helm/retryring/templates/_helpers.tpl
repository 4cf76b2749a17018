{{/* The release's base name: the StatefulSet, the client Service and the PDB carry it. */}}
{{- define "retryring.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "retryring.headless" -}}
{{ include "retryring.fullname" . }}-headless
{{- end -}}

{{/* The DNS domain of the pods: <pod>.<this>. */}}
{{- define "retryring.podDomain" -}}
{{ include "retryring.headless" . }}.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}
{{- end -}}

{{/* id=raftaddr,... of every voter, by DNS name: the same list on every pod. */}}
{{- define "retryring.peers" -}}
{{- $full := include "retryring.fullname" . -}}
{{- $domain := include "retryring.podDomain" . -}}
{{- $peers := list -}}
{{- range $i := until (int .Values.coordinator.replicas) -}}
{{- $peers = append $peers (printf "%s-%d=%s-%d.%s:%d" $full $i $full $i $domain (int $.Values.coordinator.ports.raft)) -}}
{{- end -}}
{{- join "," $peers -}}
{{- end -}}

{{- define "retryring.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{- define "retryring.labels" -}}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "retryring.selector" -}}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "retryring.scrapeAnnotations" -}}
{{- if .root.Values.metrics.podAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end -}}

{{/* A Secret mounted as a directory (not subPath, so that edits of the Secret reach the files);
with items, only those keys. */}}
{{- define "retryring.secretVolume" -}}
- name: {{ .volume }}
  secret:
    secretName: {{ .secret }}
    defaultMode: 0440
    {{- with .items }}
    items:
      {{- range . }}
      - key: {{ . }}
        path: {{ . }}
      {{- end }}
    {{- end }}
{{- end -}}
