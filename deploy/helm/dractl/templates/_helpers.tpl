{{/* An image reference from .Values.images: include "dractl.image" (list . "driver") */}}
{{- define "dractl.image" -}}
{{- $root := index . 0 -}}
{{- $img := index $root.Values.images (index . 1) -}}
{{ $img.repository }}:{{ $img.tag }}
{{- end -}}

{{/* The dractl-scheduler image of the cluster's Kubernetes minor
(.Capabilities.KubeVersion; a provider's "37+" is 37): dractl-scheduler
is built for each minor below (kube-scheduler of that minor, which its
version-skew policy lets run against its own minor's kube-apiserver and
the next's only), and any other minor fails the render with the list.
Chart.yaml's kubeVersion is the same range. */}}
{{- define "dractl.schedulerImage" -}}
{{- $supported := list "1.37" "1.38" -}}
{{- $kv := .Capabilities.KubeVersion -}}
{{- $minor := printf "%s.%s" $kv.Major (trimSuffix "+" $kv.Minor) -}}
{{- if not (has $minor $supported) -}}
{{- fail (printf "dractl-scheduler: no image for Kubernetes %s (%s); the chart installs on Kubernetes %s" $minor $kv.Version (join ", " $supported)) -}}
{{- end -}}
{{- $img := .Values.images.scheduler -}}
{{- $tag := $img.tag -}}
{{- if ne $minor "1.37" -}}
{{- $tag = index ($img.minorTags | default dict) $minor | default "" -}}
{{- if not $tag -}}
{{- fail (printf "images.scheduler.minorTags: no tag for Kubernetes %s" $minor) -}}
{{- end -}}
{{- end -}}
{{ $img.repository }}:{{ $tag }}
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

{{/* The Lease the scheduler's replicas elect through, "namespace/name",
or "" without leader election, with kube-scheduler's defaults for what the
configuration leaves out (leaderElect true, kube-system/kube-scheduler). */}}
{{- define "dractl.schedulerLease" -}}
{{- $cfg := include "dractl.schedulerConfig" . | fromYaml -}}
{{- if hasKey $cfg "Error" -}}
{{- fail (printf "scheduler: the KubeSchedulerConfiguration is not YAML: %s" (get $cfg "Error")) -}}
{{- end -}}
{{- $le := get $cfg "leaderElection" | default dict -}}
{{- if or (not (hasKey $le "leaderElect")) (get $le "leaderElect") -}}
{{ get $le "resourceNamespace" | default "kube-system" }}/{{ get $le "resourceName" | default "kube-scheduler" }}
{{- end -}}
{{- end -}}

{{/* Fails unless the configuration and scheduler.replaceKubeScheduler
agree, so that the chart never starts a second active scheduler of one
name: a profile named default-scheduler (a lone profile without a name is
one) only in place of kube-scheduler, which then elects through
kube-scheduler's own Lease (a kube-scheduler still running stands by);
beside kube-scheduler, never its Lease (one of the two would stand by for
good); more than one replica only with leader election. */}}
{{- define "dractl.schedulerCheck" -}}
{{- $cfg := include "dractl.schedulerConfig" . | fromYaml -}}
{{- $lease := include "dractl.schedulerLease" . -}}
{{- $profiles := get $cfg "profiles" | default (list dict) -}}
{{- $serves := false -}}
{{- range $profiles -}}
{{- if eq (get . "schedulerName" | default "default-scheduler") "default-scheduler" -}}
{{- $serves = true -}}
{{- end -}}
{{- end -}}
{{- $replace := .Values.scheduler.replaceKubeScheduler -}}
{{- if and $serves (not $replace) -}}
{{- fail "scheduler: the configuration has a profile named default-scheduler, which kube-scheduler serves; beside it, two schedulers would place the same pods. Use a profile of another name (the default configuration's is dractl), or stop kube-scheduler and set scheduler.replaceKubeScheduler=true (see the chart's README)" -}}
{{- end -}}
{{- if and $replace (not $serves) -}}
{{- fail "scheduler.replaceKubeScheduler is true, but no profile of the configuration is default-scheduler: with kube-scheduler stopped, pods that name no scheduler would never be scheduled (scheduler.profile=config-two-profiles.yaml keeps the stock plugin for them)" -}}
{{- end -}}
{{- if and $replace (ne $lease "kube-system/kube-scheduler") -}}
{{- fail (printf "scheduler.replaceKubeScheduler: the configuration elects through %q; in place of kube-scheduler it must elect through kube-scheduler's Lease kube-system/kube-scheduler, so that a kube-scheduler still running stands by instead of scheduling beside it" (default "no Lease" $lease)) -}}
{{- end -}}
{{- if and (not $replace) (eq $lease "kube-system/kube-scheduler") -}}
{{- fail "scheduler: beside kube-scheduler the configuration must not elect through kube-scheduler's Lease kube-system/kube-scheduler: one of the two would stand by for good (the default configuration's Lease is dractl-scheduler)" -}}
{{- end -}}
{{- if and (gt (int .Values.scheduler.replicas) 1) (not $lease) -}}
{{- fail (printf "scheduler.replicas is %d, but the configuration does not elect a leader: every replica would schedule" (int .Values.scheduler.replicas)) -}}
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

{{/* The pod spec's line putting a pod on its node's network
(hostNetwork), or nothing: include "dractl.hostNetwork" . */}}
{{- define "dractl.hostNetwork" -}}
{{- if .Values.hostNetwork -}}
hostNetwork: true
{{- end -}}
{{- end -}}

{{/* A container's environment entries naming kube-apiserver's address
(apiServer), or nothing: the in-cluster client configuration reads
these two variables, which the kubelet otherwise sets to the kubernetes
Service's. */}}
{{- define "dractl.apiServerEnv" -}}
{{- if .Values.apiServer.host -}}
{{- if not .Values.apiServer.port -}}
{{- fail "apiServer.host is set, apiServer.port is not" -}}
{{- end -}}
- name: KUBERNETES_SERVICE_HOST
  value: {{ .Values.apiServer.host | quote }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ .Values.apiServer.port | quote }}
{{- end -}}
{{- end -}}

{{/* The driver's flags naming the kubelet's plugin directories under
driver.kubeletRootDir, or nothing where that is the kubelet's default,
which is the driver's too. */}}
{{- define "dractl.kubeletDirArgs" -}}
{{- if ne .Values.driver.kubeletRootDir "/var/lib/kubelet" -}}
- --registrar-dir={{ .Values.driver.kubeletRootDir }}/plugins_registry
- --plugin-dir={{ .Values.driver.kubeletRootDir }}/plugins/gpu.dractl.dev
{{- end -}}
{{- end -}}

{{/* The volume mounts of a driver's node directories (driver.*Dir), each
at its host path. */}}
{{- define "dractl.driverMounts" -}}
- name: plugins-registry
  mountPath: {{ .Values.driver.kubeletRootDir }}/plugins_registry
- name: plugins
  mountPath: {{ .Values.driver.kubeletRootDir }}/plugins
- name: cdi
  mountPath: {{ .Values.driver.cdiDir }}
- name: state
  mountPath: {{ .Values.driver.stateDir }}
{{- end -}}

{{/* The volumes of a driver's node directories. */}}
{{- define "dractl.driverVolumes" -}}
- name: plugins-registry
  hostPath:
    path: {{ .Values.driver.kubeletRootDir }}/plugins_registry
    type: DirectoryOrCreate
- name: plugins
  hostPath:
    path: {{ .Values.driver.kubeletRootDir }}/plugins
    type: DirectoryOrCreate
- name: cdi
  hostPath:
    path: {{ .Values.driver.cdiDir }}
    type: DirectoryOrCreate
- name: state
  hostPath:
    path: {{ .Values.driver.stateDir }}
    type: DirectoryOrCreate
{{- end -}}
