{{/* An image reference from .Values.images: include "dractl.image" (list . "driver") */}}
{{- define "dractl.image" -}}
{{- $root := index . 0 -}}
{{- $img := index $root.Values.images (index . 1) -}}
{{ $img.repository }}:{{ $img.tag }}
{{- end -}}

{{/* The scheduler's KubeSchedulerConfiguration. */}}
{{- define "dractl.schedulerConfig" -}}
{{- if .Values.scheduler.config -}}
{{ .Values.scheduler.config }}
{{- else -}}
{{- $file := printf "files/scheduler/%s" .Values.scheduler.profile -}}
{{- $cfg := .Files.Get $file -}}
{{- if not $cfg -}}
{{- fail (printf "scheduler.profile: no %s in the chart" $file) -}}
{{- end -}}
{{ $cfg }}
{{- end -}}
{{- end -}}

{{/* Replicas of one controller on different nodes where the cluster has
them: a node lost takes the leader, not its standby too. Takes the pod
template's labels: include "dractl.spread" (dict "app.kubernetes.io/name" "dractl-monitor") */}}
{{- define "dractl.spread" -}}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- toYaml . | nindent 12 }}
{{- end -}}
