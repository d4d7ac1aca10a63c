{{/*
Fixed object names: one operator per cluster, and the RBAC equal to deploy/base/rbac.yaml.
*/}}
{{- define "tenant-platform.name" -}}
tenant-platform-operator
{{- end -}}

{{/*
The operator's ServiceAccount: serviceAccount.name, or the fixed name. The RBAC subjects, the
Deployment and the admission fences of templates/rbac.yaml name it.
*/}}
{{- define "tenant-platform.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "tenant-platform.name" .) -}}
{{- end -}}

{{/*
This chart version's files on GitHub (the release tag), for NOTES.txt and the default runbook URL:
include "tenant-platform.source" (list . "docs/uninstall.md").
*/}}
{{- define "tenant-platform.source" -}}
https://github.com/tenancy-dev/tenant-platform-operator/blob/v{{ (index . 0).Chart.AppVersion }}/{{ index . 1 }}
{{- end -}}

{{- define "tenant-platform.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tenant-platform.name" . }}
{{- end -}}

{{- define "tenant-platform.labels" -}}
{{ include "tenant-platform.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | quote }}
{{- end -}}

{{- define "tenant-platform.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/*
True when the cluster serves the Prometheus Operator's API (or `helm template --api-versions
monitoring.coreos.com/v1` says so).
*/}}
{{- define "tenant-platform.monitoringAPI" -}}
{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" -}}true{{- end -}}
{{- end -}}

{{/*
A Prometheus duration with one unit (30s, 15m, 2h, 1d) as seconds, for comparisons in PromQL.
*/}}
{{- define "tenant-platform.seconds" -}}
{{- $d := toString . -}}
{{- $units := dict "s" 1 "m" 60 "h" 3600 "d" 86400 -}}
{{- $unit := substr (int (sub (len $d) 1)) (len $d) $d -}}
{{- if not (hasKey $units $unit) -}}
{{- fail (printf "duration %q must be a number followed by s, m, h or d" $d) -}}
{{- end -}}
{{- mul (int (trimSuffix $unit $d)) (get $units $unit) -}}
{{- end -}}

{{/*
True when runAsUser, runAsGroup and fsGroup are left to OpenShift's SCC (values: openshift).
*/}}
{{- define "tenant-platform.openshiftIDs" -}}
{{- $mode := .Values.openshift.adaptSecurityContext -}}
{{- if or (eq $mode "force") (and (eq $mode "auto") (.Capabilities.APIVersions.Has "security.openshift.io/v1")) -}}true{{- end -}}
{{- end -}}

{{/*
A security context from values (podSecurityContext or securityContext, passed as "context"),
without null entries, and without the IDs OpenShift assigns when openshiftIDs is true.
*/}}
{{- define "tenant-platform.securityContext" -}}
{{- $out := dict -}}
{{- range $k, $v := .context -}}
{{- if not (kindIs "invalid" $v) -}}
{{- $_ := set $out $k $v -}}
{{- end -}}
{{- end -}}
{{- if include "tenant-platform.openshiftIDs" .root -}}
{{- $out = omit $out "runAsUser" "runAsGroup" "fsGroup" -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}
