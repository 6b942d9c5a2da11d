{{/* Shared names, labels and security contexts of the Anchorage chart. */}}

{{- define "anchorage.fullname" -}}
{{- default "anchorage" .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
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

{{- define "anchorage.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{- define "anchorage.operatorServiceAccount" -}}
{{- if .Values.operator.serviceAccount.create -}}
{{ default (printf "%s-operator" (include "anchorage.fullname" .)) .Values.operator.serviceAccount.name }}
{{- else -}}
{{ required "operator.serviceAccount.name is required when operator.serviceAccount.create is false" .Values.operator.serviceAccount.name }}
{{- end -}}
{{- end -}}

{{/* Namespaces the operator watches: watchNamespaces (default: the release's) plus the trials namespace. */}}
{{/* "true" when the operator runs with kopf peering (operator.peering.enabled), else empty. */}}
{{- define "anchorage.peering" -}}
{{- if and .Values.operator.enabled .Values.operator.peering.enabled -}}true{{- end -}}
{{- end -}}

{{- define "anchorage.watchedNamespaces" -}}
{{- $watch := .Values.operator.watchNamespaces | default (list .Release.Namespace) -}}
{{- append $watch .Values.trials.namespace | uniq | sortAlpha | toJson -}}
{{- end -}}

{{- define "anchorage.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10004
runAsGroup: 10004
fsGroup: 10004
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "anchorage.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Store environment: S3 endpoint and region (credentials come by envFrom of store.credentialsSecret). */}}
{{- define "anchorage.storeEnv" -}}
{{- with .Values.store.endpointUrl }}
- name: AWS_ENDPOINT_URL
  value: {{ . | quote }}
{{- end }}
{{- with .Values.store.region }}
- name: AWS_DEFAULT_REGION
  value: {{ . | quote }}
{{- end }}
{{- end -}}
