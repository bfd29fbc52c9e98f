{{/* The chart's name. */}}
{{- define "mcs-controller.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name of the release's objects. */}}
{{- define "mcs-controller.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "mcs-controller.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcs-controller.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "mcs-controller.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "mcs-controller.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "mcs-controller.serviceAccountName" -}}
{{- default (include "mcs-controller.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{- define "mcs-controller.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The restricted Pod Security Standard. */}}
{{- define "mcs-controller.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "mcs-controller.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
{{- end }}

{{- define "mcs-controller.clusterRoleName" -}}
{{- default (include "mcs-controller.fullname" .) .Values.rbac.clusterRoleName }}
{{- end }}

{{/* Refuses what mcs-controller would refuse at startup, saying why. */}}
{{- define "mcs-controller.validate" -}}
{{- $v := .Values }}
{{- if not $v.registryUrl }}
{{- fail "registryUrl is required: the registry's base URL, e.g. https://mcs-registry.mcs.svc:8080" }}
{{- end }}
{{- if hasPrefix "http://" $v.registryUrl }}
{{- if not $v.registryAllowInsecureHttp }}
{{- fail (printf "registryUrl %s is plain http://: the controller's registrations and exports would travel unencrypted and unauthenticated. Set registryAllowInsecureHttp=true to accept that (evaluation only), or use an https:// URL with registryTlsCa.configMapName" $v.registryUrl) }}
{{- end }}
{{- if $v.registryTlsCa.configMapName }}
{{- fail "registryTlsCa.configMapName is only used with an https:// registryUrl" }}
{{- end }}
{{- if $v.registryClientCert.secretName }}
{{- fail "registryClientCert.secretName needs an https:// registryUrl (client certificates are presented in the TLS handshake)" }}
{{- end }}
{{- else if hasPrefix "https://" $v.registryUrl }}
{{- if not $v.registryTlsCa.configMapName }}
{{- fail (printf "registryUrl %s is https:// and needs registryTlsCa.configMapName: a ConfigMap with the CA bundle that signed the registry's certificate" $v.registryUrl) }}
{{- end }}
{{- else }}
{{- fail (printf "registryUrl %s must start with https:// or http://" $v.registryUrl) }}
{{- end }}
{{- end }}

{{/* The objects of coredns.configure: `<fullname>-coredns`, short enough for a Job name with `-unconfigure`. */}}
{{- define "mcs-controller.corednsName" -}}
{{- printf "%s-coredns" (include "mcs-controller.fullname" . | trunc 42 | trimSuffix "-") }}
{{- end }}
