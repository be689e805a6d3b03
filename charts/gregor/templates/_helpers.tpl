{{/* Names, labels and computed values shared by the templates. */}}

{{- define "gregor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gregor.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gregor.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "gregor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component (operator, zookeeper). */}}
{{- define "gregor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gregor.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "gregor.operator.fullname" -}}
{{- printf "%s-operator" (include "gregor.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gregor.operator.serviceAccountName" -}}
{{- if .Values.operator.serviceAccount.create -}}
{{- default (include "gregor.operator.fullname" .) .Values.operator.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.operator.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "gregor.zookeeper.fullname" -}}
{{- printf "%s-zookeeper" (include "gregor.fullname" .) | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{- define "gregor.image" -}}
{{- printf "%s:%s" .image.repository (default .root.Chart.AppVersion .image.tag) -}}
{{- end -}}

{{/* The ZooKeeper connect string brokers and the operator use, chroot included. */}}
{{- define "gregor.zookeeper.connect" -}}
{{- if .Values.zookeeper.enabled -}}
{{- $name := include "gregor.zookeeper.fullname" . -}}
{{- $hosts := list -}}
{{- range $i := until (int .Values.zookeeper.replicas) -}}
{{- $hosts = append $hosts (printf "%s-%d.%s-headless.%s.svc:2181" $name $i $name $.Release.Namespace) -}}
{{- end -}}
{{- printf "%s%s" (join "," $hosts) .Values.zookeeper.chroot -}}
{{- else -}}
{{- required "zookeeper.external.connect is required when zookeeper.enabled is false" .Values.zookeeper.external.connect -}}
{{- end -}}
{{- end -}}

{{/*
Topology spread and node affinity of one component over brokers.zones: pinned to the
listed zones (node affinity) and spread evenly across them (maxSkew 1, hard) and across
nodes (soft). .root is the chart context, .selector the pod selector labels.
*/}}
{{- define "gregor.zoneSpread" -}}
{{- $key := .root.Values.brokers.rackTopologyKey -}}
{{- $zones := .root.Values.brokers.zones -}}
topologySpreadConstraints:
{{- if gt (len $zones) 1 }}
  - maxSkew: 1
    topologyKey: {{ $key }}
    whenUnsatisfiable: DoNotSchedule
    labelSelector:
      matchLabels:
        {{- .selector | nindent 8 }}
{{- else if eq (len $zones) 0 }}
  - maxSkew: 1
    topologyKey: {{ $key }}
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- .selector | nindent 8 }}
{{- end }}
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- .selector | nindent 8 }}
affinity:
  {{- if $zones }}
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions:
            - key: {{ $key }}
              operator: In
              values:
                {{- toYaml $zones | nindent 16 }}
  {{- end }}
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- .selector | nindent 14 }}
{{- end -}}
