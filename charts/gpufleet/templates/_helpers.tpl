{{/*
The chart name, or nameOverride.
*/}}
{{- define "gpufleet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of the resources: fullnameOverride, or the release name followed by the chart
name unless the release name already contains it. Truncated to 63 characters (DNS label).
*/}}
{{- define "gpufleet.fullname" -}}
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

{{/*
The chart label value: name-version.
*/}}
{{- define "gpufleet.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every resource of the chart.
*/}}
{{- define "gpufleet.labels" -}}
helm.sh/chart: {{ include "gpufleet.chart" . }}
{{ include "gpufleet.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: gpufleet
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Labels selecting the operator pods. Never change these in an upgrade: a Deployment's
selector is immutable.
*/}}
{{- define "gpufleet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpufleet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The ServiceAccount the operator runs as.
*/}}
{{- define "gpufleet.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gpufleet.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The operator image: repository@digest when a digest is set, else repository:tag (the tag
defaults to the chart's appVersion).
*/}}
{{- define "gpufleet.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The leader election Lease's name.
*/}}
{{- define "gpufleet.leaseName" -}}
{{- default (include "gpufleet.fullname" .) .Values.leaderElection.leaseName }}
{{- end }}

{{/*
Rules on namespaced resources: exactly what `gpufleet run` uses, nothing more. It never
reads Secrets or ConfigMaps and never deletes a pool or a Pod. Granted cluster-wide by the
ClusterRole, or per watched namespace by a Role.
*/}}
{{- define "gpufleet.namespacedRules" -}}
# Pools are watched; patch only removes the finalizer gpufleet 0.1 added (the operator
# keeps no finalizer or state on a pool now).
- apiGroups: ["gpufleet.dev"]
  resources: ["inferencepools"]
  verbs: ["get", "list", "watch", "patch"]
# One status write (a merge patch) per pass.
- apiGroups: ["gpufleet.dev"]
  resources: ["inferencepools/status"]
  verbs: ["get", "patch"]
# Children carry an ownerReference with blockOwnerDeletion: clusters running the
# OwnerReferencesPermissionEnforcement admission plugin ask for update on this subresource.
- apiGroups: ["gpufleet.dev"]
  resources: ["inferencepools/finalizers"]
  verbs: ["update"]
# Per tier a Deployment and a Service, per pool an HTTPRoute, applied server-side (create +
# patch). A deleted pool's children go by garbage collection; delete is for the children of
# a tier removed from a pool that lives on (and its route when routing is removed), which
# would otherwise keep holding GPUs.
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: ["gateway.networking.k8s.io"]
  resources: ["httproutes"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
# Counts Ready and unschedulable (FailedScheduling) replicas; patch only sets
# controller.kubernetes.io/pod-deletion-cost before a tier shrinks, so the idlest pod goes.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "patch"]
# Events for every scaling and routing decision.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{/*
Rules on cluster-scoped resources, read-only.
*/}}
{{- define "gpufleet.clusterRules" -}}
# Node pools: which GPU nodes exist and what they offer.
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["get", "list", "watch"]
# Kopf discovers its resources; the operator checks whether the Gateway API CRDs exist.
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["get", "list", "watch"]
{{- if .Values.watchNamespaces }}
# Kopf, confined to namespaces, lists and watches them (their names) to serve each watched
# namespace once it exists; cluster-wide it does not.
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["list", "watch"]
{{- end }}
{{- end }}

{{/*
Refuse combinations the schema cannot express.
*/}}
{{- define "gpufleet.validate" -}}
{{- if and (not .Values.leaderElection.enabled) (gt (int .Values.replicaCount) 1) }}
{{- fail (printf "replicaCount is %d but leaderElection.enabled is false: replicas without leader election would reconcile the same pools at once; set replicaCount to 1 or enable leader election" (int .Values.replicaCount)) }}
{{- end }}
{{- if and (not .Values.leaderElection.enabled) (gt (int .Values.sharding.shards) 1) }}
{{- fail (printf "sharding.shards is %d but leaderElection.enabled is false: the shards are Leases; enable leader election or set sharding.shards to 1" (int .Values.sharding.shards)) }}
{{- end }}
{{- if and .Values.serviceMonitor.enabled .Values.podMonitor.enabled }}
{{- fail "serviceMonitor.enabled and podMonitor.enabled are both true: Prometheus would scrape the operator twice; enable one" }}
{{- end }}
{{- end }}
