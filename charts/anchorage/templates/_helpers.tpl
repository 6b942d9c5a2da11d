{{/* Shared names, labels and security contexts of the Anchorage chart. */}}

{{/* Name prefix of every object: fullnameOverride, else the release name when it contains the chart's name
(nameOverride), else "<release>-<name>" — so the default release "anchorage" keeps the names "anchorage-*", and
two releases (or this chart as a subchart of a parent's release) never share a name. */}}
{{- define "anchorage.fullname" -}}
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

{{/* The trials namespace (cluster-scoped, so one per release): trials.namespace, else "<release namespace>-trials"
when the release's prefix is its namespace's name (the default install: anchorage-trials), else
"<release namespace>-<fullname>-trials". */}}
{{- define "anchorage.trialsNamespace" -}}
{{- $fullname := include "anchorage.fullname" . -}}
{{- $namespace := .Release.Namespace | default "default" -}}
{{- if .Values.trials.namespace -}}
{{- .Values.trials.namespace -}}
{{- else if eq $fullname $namespace -}}
{{- printf "%s-trials" $namespace | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s-trials" $namespace $fullname | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "anchorage.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/part-of: anchorage
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of a component: the gateway's must match the operator's gateway_selector. */}}
{{- define "anchorage.selector" -}}
app.kubernetes.io/name: {{ include "anchorage.fullname" .root }}-{{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{/* The gateway URL of the agents: operator.gateway.url, else this release's gateway Service. */}}
{{- define "anchorage.gatewayUrl" -}}
{{- $service := printf "http://%s-gateway.%s.svc:%v/v1" (include "anchorage.fullname" .) .Release.Namespace .Values.gateway.service.port -}}
{{- .Values.operator.gateway.url | default $service -}}
{{- end -}}

{{/* The gateway's admin listener (/admin/v1, /metrics, /healthz): operator.gateway.adminUrl, else this release's
gateway Service on its admin port (9090, which the trials' NetworkPolicy does not open to agents). */}}
{{- define "anchorage.gatewayAdminUrl" -}}
{{- $service := printf "http://%s-gateway.%s.svc:9090" (include "anchorage.fullname" .) .Release.Namespace -}}
{{- .Values.operator.gateway.adminUrl | default $service -}}
{{- end -}}

{{/* The image: global.imageRegistry (a parent chart's mirror) replaces the repository's registry. */}}
{{- define "anchorage.image" -}}
{{- include "anchorage.imageOf" (dict "root" . "image" .Values.image) -}}
{{- end -}}

{{/* An image reference from an image block {repository, tag, digest} ("image" of the dict; "root" the chart's
context): global.imageRegistry replaces the repository's registry, a digest wins over the tag, the tag defaults
to the chart's appVersion. */}}
{{- define "anchorage.imageOf" -}}
{{- $root := .root -}}
{{- $image := .image -}}
{{- $repository := $image.repository -}}
{{- with ($root.Values.global | default dict).imageRegistry -}}
{{- $parts := splitList "/" $repository -}}
{{- if and (gt (len $parts) 1) (or (contains "." (first $parts)) (contains ":" (first $parts)) (eq (first $parts) "localhost")) -}}
{{- $repository = join "/" (rest $parts) -}}
{{- end -}}
{{- $repository = printf "%s/%s" (trimSuffix "/" .) $repository -}}
{{- end -}}
{{- if $image.digest -}}
{{ $repository }}@{{ $image.digest }}
{{- else -}}
{{ $repository }}:{{ default $root.Chart.AppVersion $image.tag }}
{{- end -}}
{{- end -}}

{{/* Names of the pull secrets (a JSON list): imagePullSecrets and global.imagePullSecrets (names or {name: ...}). The
chart's pods list them, and the operator gets them (--image-pull-secret) for every pod it creates. */}}
{{- define "anchorage.imagePullSecretNames" -}}
{{- $names := list -}}
{{- range (concat (.Values.imagePullSecrets | default list) ((.Values.global | default dict).imagePullSecrets | default list)) -}}
{{- if kindIs "map" . }}{{- $names = append $names .name -}}{{- else }}{{- $names = append $names . -}}{{- end -}}
{{- end -}}
{{- $names | uniq | toJson -}}
{{- end -}}

{{/* Pull secrets of the chart's pods. */}}
{{- define "anchorage.imagePullSecrets" -}}
{{- with (include "anchorage.imagePullSecretNames" . | fromJsonArray) }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end -}}
{{- end -}}

{{/* The ServiceAccount of the pods of the trials namespace (store.serviceAccount): its name, or empty for none. */}}
{{- define "anchorage.storeServiceAccount" -}}
{{- if .Values.store.serviceAccount.create -}}
{{ default (printf "%s-store-client" (include "anchorage.fullname" .)) .Values.store.serviceAccount.name }}
{{- else -}}
{{ .Values.store.serviceAccount.name }}
{{- end -}}
{{- end -}}

{{- define "anchorage.operatorServiceAccount" -}}
{{- if .Values.operator.serviceAccount.create -}}
{{ default (printf "%s-operator" (include "anchorage.fullname" .)) .Values.operator.serviceAccount.name }}
{{- else -}}
{{ required "operator.serviceAccount.name is required when operator.serviceAccount.create is false" .Values.operator.serviceAccount.name }}
{{- end -}}
{{- end -}}

{{/* "true" when the operator runs with kopf peering (operator.peering.enabled), else empty. */}}
{{- define "anchorage.peering" -}}
{{- if and .Values.operator.enabled .Values.operator.peering.enabled -}}true{{- end -}}
{{- end -}}

{{/* "true" when the operator serves every namespace (operator.clusterWide), else empty. */}}
{{- define "anchorage.clusterWide" -}}
{{- if .Values.operator.clusterWide -}}true{{- end -}}
{{- end -}}

{{/* "true" when the operator reports objects in namespaces it does not serve (operator.reportUnserved; never
cluster-wide, where it serves them all), else empty. */}}
{{- define "anchorage.reportUnserved" -}}
{{- if and .Values.operator.reportUnserved (not .Values.operator.clusterWide) -}}true{{- end -}}
{{- end -}}

{{/* Namespaces the operator watches (JSON list): watchNamespaces (default: the release's) plus the trials namespace;
[] when it serves every namespace (operator.clusterWide). */}}
{{- define "anchorage.watchedNamespaces" -}}
{{- if .Values.operator.clusterWide -}}
{{- list | toJson -}}
{{- else -}}
{{- $watch := .Values.operator.watchNamespaces | default (list .Release.Namespace) -}}
{{- append $watch (include "anchorage.trialsNamespace" .) | uniq | sortAlpha | toJson -}}
{{- end -}}
{{- end -}}

{{/* The application rules of the operator (watched namespaces' Roles, or the ClusterRole of operator.clusterWide):
tests/charts/test_chart_rbac.py derives them from operator/anchorage/controller. */}}
{{- define "anchorage.applicationRules" -}}
# Trials and ScoringRuns: watched, read and created (campaigns create Trials, finished Trials create ScoringRuns);
# patched only to add and remove the operator's finalizer anchorage.dev/stop-jobs (controller/finalizers.py: their
# Jobs run in the trials namespace, where no ownerReference reaches); their status is written.
- apiGroups: [anchorage.dev]
  resources: [trials, scoringruns]
  verbs: [get, list, watch, create, patch]
# VerificationCampaigns: handled (kopf annotates them and holds its finalizer), and read by a ScoringRun's campaignRef.
- apiGroups: [anchorage.dev]
  resources: [verificationcampaigns]
  verbs: [get, list, watch, patch]
- apiGroups: [anchorage.dev]
  resources: [trials/status, scoringruns/status, verificationcampaigns/status]
  verbs: [patch]
# The operator's own Events: phase changes and failures of campaigns, Trials and ScoringRuns.
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- end -}}

{{/* Security contexts of the chart's own pods (operator, gateway, helm test): the values podSecurityContext and
containerSecurityContext (a key set to null is left out, e.g. runAsUser where the platform assigns user ids). */}}
{{- define "anchorage.podSecurityContext" -}}
{{- toYaml .Values.podSecurityContext -}}
{{- end -}}

{{- define "anchorage.containerSecurityContext" -}}
{{- toYaml .Values.containerSecurityContext -}}
{{- end -}}

{{/* Store environment: S3 endpoint (the S3 client's only) and region (credentials come by envFrom of
store.credentialsSecret, or from the operator's ServiceAccount). */}}
{{- define "anchorage.storeEnv" -}}
{{- with .Values.store.endpointUrl }}
- name: AWS_ENDPOINT_URL_S3
  value: {{ . | quote }}
{{- end }}
{{- with .Values.store.region }}
- name: AWS_DEFAULT_REGION
  value: {{ . | quote }}
{{- end }}
{{- end -}}
