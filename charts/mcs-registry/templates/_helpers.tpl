{{/* The chart's name. */}}
{{- define "mcs-registry.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name of the release's objects. */}}
{{- define "mcs-registry.fullname" -}}
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

{{- define "mcs-registry.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcs-registry.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "mcs-registry.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "mcs-registry.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "mcs-registry.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mcs-registry.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "mcs-registry.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Whether the pools come from EndpointSlices (the registry reads the Kubernetes API). */}}
{{- define "mcs-registry.readsKubernetes" -}}
{{- if ne .Values.poolDiscovery.mode "registrations" }}true{{ end }}
{{- end }}

{{/* Refuses combinations the registry would refuse at startup, saying why. */}}
{{- define "mcs-registry.validate" -}}
{{- $v := .Values }}
{{- if and (eq $v.storage "memory") (gt (int $v.replicaCount) 1) }}
{{- fail (printf "replicaCount=%d with storage=memory: each replica would keep its own view of the registry; use storage=dynamodb for more than one replica" (int $v.replicaCount)) }}
{{- end }}
{{- if and (eq $v.storage "dynamodb") (not $v.dynamodb.table) }}
{{- fail "storage=dynamodb needs dynamodb.table (the DynamoDB table, --table)" }}
{{- end }}
{{- if and (eq $v.storage "memory") $v.migrate.enabled }}
{{- fail "migrate.enabled=true needs storage=dynamodb (mcs-admin migrate creates and migrates the DynamoDB table)" }}
{{- end }}
{{- if and (or $v.tls.clientCa.configMapName $v.tls.clientCa.secretName) (not $v.tls.secretName) }}
{{- fail "tls.clientCa needs tls.secretName: client certificates are asked for only on a TLS API port" }}
{{- end }}
{{- if and $v.tls.clientCa.configMapName $v.tls.clientCa.secretName }}
{{- fail "tls.clientCa: set configMapName or secretName, not both" }}
{{- end }}
{{- if and $v.tls.adminTls (not $v.tls.secretName) }}
{{- fail "tls.adminTls=true needs tls.secretName (the admin port serves the same certificate)" }}
{{- end }}
{{- if eq $v.authz.mode "spiffe" }}
{{- if not (or $v.tls.clientCa.configMapName $v.tls.clientCa.secretName) }}
{{- fail "authz.mode=spiffe needs a client CA (tls.clientCa.configMapName or tls.clientCa.secretName): callers are identified by their client certificates" }}
{{- end }}
{{- if not $v.authz.spiffeTrustDomain }}
{{- fail "authz.mode=spiffe needs authz.spiffeTrustDomain (the trust domain of callers' SPIFFE IDs)" }}
{{- end }}
{{- else if $v.authz.spiffeTrustDomain }}
{{- fail "authz.spiffeTrustDomain is only used with authz.mode=spiffe" }}
{{- end }}
{{- if ne $v.poolDiscovery.mode "registrations" }}
{{- range $k := list "routerNamespace" "routerService" "routerPortName" }}
{{- if not (index $v.poolDiscovery $k) }}
{{- fail (printf "poolDiscovery.mode=%s needs poolDiscovery.%s" $v.poolDiscovery.mode $k) }}
{{- end }}
{{- end }}
{{- else if or $v.poolDiscovery.routerNamespace $v.poolDiscovery.routerService $v.poolDiscovery.routerPortName $v.poolDiscovery.poolServiceSuffix }}
{{- fail "poolDiscovery.routerNamespace, routerService, routerPortName and poolServiceSuffix are only used with poolDiscovery.mode=mcs or karmada" }}
{{- end }}
{{- end }}

{{/* Environment shared by the registry and the migrate Job. */}}
{{- define "mcs-registry.storageArgs" -}}
- --storage={{ .Values.storage }}
{{- if eq .Values.storage "dynamodb" }}
- --table={{ .Values.dynamodb.table }}
{{- with .Values.dynamodb.region }}
- --region={{ . }}
{{- end }}
{{- with .Values.dynamodb.endpoint }}
- --dynamodb-endpoint={{ . }}
{{- end }}
{{- end }}
{{- end }}

{{- define "mcs-registry.env" -}}
{{- with .Values.extraEnv }}
env:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.extraEnvFrom }}
envFrom:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The restricted Pod Security Standard. */}}
{{- define "mcs-registry.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "mcs-registry.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
{{- end }}
