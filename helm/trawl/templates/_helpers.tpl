{{/*
Names. The full name prefixes every object: with release "trawl" the shards are
trawl-shard-zone-a, trawl-shard-zone-b, ... as DESIGN.md names them.
*/}}
{{- define "trawl.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "trawl.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 32 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 32 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 32 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{/* Truncated to 32 so a StatefulSet name, <fullname>-shard-zone-<zone of up to 8>, stays within the 52 characters that leave room for its pods' controller-revision-hash label (63). */}}

{{- define "trawl.routerName" -}}{{ include "trawl.fullname" . }}-router{{- end -}}
{{- define "trawl.shardName" -}}{{ include "trawl.fullname" . }}-shard{{- end -}}
{{- define "trawl.headlessName" -}}{{ include "trawl.fullname" . }}-shard-headless{{- end -}}
{{- define "trawl.tlsSecretName" -}}
{{- if .Values.tls.certManager.enabled -}}{{ include "trawl.fullname" . }}-tls{{- else -}}{{ .Values.tls.existingSecret }}{{- end -}}
{{- end -}}
{{- define "trawl.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}{{ default (include "trawl.fullname" .) .Values.serviceAccount.name }}{{- else -}}{{ default "default" .Values.serviceAccount.name }}{{- end -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "trawl.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "trawl.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: trawl
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "trawl.selectorLabels" -}}
app.kubernetes.io/name: {{ include "trawl.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Selector labels of one component: router or shard. */}}
{{- define "trawl.componentSelector" -}}
{{ include "trawl.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
The stable DNS name and gRPC port of pod <index> of one zone's StatefulSet,
through the headless Service: <fullname>-shard-zone-<zone>-<index>.<headless>.
<namespace>.svc.cluster.local:<grpcPort>. Arguments: ctx, zone (its name),
index (a number, or "$(POD_INDEX)" for the kubelet to expand in a pod's args).
The router's --shard flags and the shards' --peers and --advertise-addr all
come from here, so they cannot disagree.
*/}}
{{- define "trawl.replicaAddr" -}}
{{- printf "%s-zone-%s-%v.%s.%s.svc.cluster.local:%d" (include "trawl.shardName" .ctx) .zone .index (include "trawl.headlessName" .ctx) .ctx.Release.Namespace (int .ctx.Values.shards.grpcPort) -}}
{{- end -}}

{{/*
The router's --shard flags, rendered from shards.count and shards.zones so there
is no hand-kept address list: shard i is pod i of every zone's StatefulSet,
reached through the headless Service's stable DNS name.
*/}}
{{- define "trawl.shardFlags" -}}
{{- range $i := until (int .Values.shards.count) }}
{{- $addrs := list -}}
{{- range $.Values.shards.zones }}
{{- $addrs = append $addrs (include "trawl.replicaAddr" (dict "ctx" $ "zone" .name "index" $i)) -}}
{{- end }}
- --shard=shard-{{ $i }}={{ join "," $addrs }}
{{- end }}
{{- end -}}

{{/*
A shard pod's --peers: pod <index> of every zone (itself included), the
members of shard <index>'s consensus group. The index is left to the kubelet
as $(POD_INDEX) (the pod's apps.kubernetes.io/pod-index label through the
downward API), so one pod template serves every pod of the StatefulSet.
*/}}
{{- define "trawl.shardPeers" -}}
{{- $addrs := list -}}
{{- range .Values.shards.zones }}
{{- $addrs = append $addrs (include "trawl.replicaAddr" (dict "ctx" $ "zone" .name "index" "$(POD_INDEX)")) -}}
{{- end }}
{{- join "," $addrs -}}
{{- end -}}

{{/* Where the TLS Secret is mounted; flags point at its tls.crt, tls.key, ca.crt. */}}
{{- define "trawl.tlsDir" -}}/etc/trawl/tls{{- end -}}

{{- define "trawl.tlsVolume" -}}
{{- if .Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ include "trawl.tlsSecretName" . }}
    items:
      - {key: tls.crt, path: tls.crt}
      - {key: tls.key, path: tls.key}
      - {key: ca.crt, path: ca.crt}
{{- end }}
{{- end -}}

{{- define "trawl.tlsVolumeMount" -}}
{{- if .Values.tls.enabled }}
- name: tls
  mountPath: {{ include "trawl.tlsDir" . }}
  readOnly: true
{{- end }}
{{- end -}}

{{/*
A quantity such as 512Mi, 2Gi, 1G or 536870912 in MiB (rounded down), so
GOMEMLIMIT can be set below the memory limit.
*/}}
{{- define "trawl.quantityMiB" -}}
{{- $q := toString . -}}
{{- $units := dict "Ki" 0.0009765625 "Mi" 1.0 "Gi" 1024.0 "Ti" 1048576.0 "k" 0.00095367431640625 "M" 0.95367431640625 "G" 953.67431640625 "T" 953674.31640625 -}}
{{- $mib := 0.0 -}}
{{- $matched := false -}}
{{- range $suffix, $factor := $units }}
{{- if and (not $matched) (hasSuffix $suffix $q) (regexMatch "^[0-9.]+$" (trimSuffix $suffix $q)) }}
{{- $mib = mulf (trimSuffix $suffix $q | float64) $factor -}}
{{- $matched = true -}}
{{- end }}
{{- end }}
{{- if not $matched }}
{{- if not (regexMatch "^[0-9]+$" $q) }}{{ fail (printf "cannot read memory quantity %q: use Ki, Mi, Gi, Ti, k, M, G, T or bytes" $q) }}{{ end }}
{{- $mib = divf ($q | float64) 1048576.0 -}}
{{- end }}
{{- floor $mib | int64 -}}
{{- end -}}

{{/*
GOMAXPROCS from the CPU limit (the downward API rounds it up to whole cores) and
GOMEMLIMIT at 90 % of the memory limit, so the Go GC works harder before the
kernel's OOM killer steps in. Argument: the container's resources.
*/}}
{{- define "trawl.goEnv" -}}
- name: GOMAXPROCS
  valueFrom:
    resourceFieldRef:
      resource: limits.cpu
      divisor: "1"
{{- with .limits }}{{ with .memory }}
- name: GOMEMLIMIT
  value: {{ printf "%dMiB" (div (mul (include "trawl.quantityMiB" .) 9) 10) | quote }}
{{- end }}{{ end }}
{{- end -}}

{{/* Shard memory: vectorsPerShard x dim x 4 B x headroom + base, in MiB. */}}
{{- define "trawl.shardMemoryMiB" -}}
{{- $s := .Values.shards -}}
{{- /* ivf keeps int8 codes beside the floats: dim bytes a row plus ~250 of
norms, row maps and list slack (1 768 measured at 1536-D, docs/ivf.md). A
rebuild's second copy of the codes fits in the headroom. */ -}}
{{- $rowBytes := mul (int64 $s.dim) 4 -}}
{{- if eq $s.index "ivf" }}{{ $rowBytes = add $rowBytes (int64 $s.dim) 256 }}{{ end -}}
{{- $bytes := mul (int64 $s.vectorsPerShard) $rowBytes -}}
{{- $withHeadroom := div (mul $bytes (int64 $s.memoryHeadroomPercent)) 100 -}}
{{- add (div (add $withHeadroom 1048575) 1048576) (int64 $s.memoryBaseMi) -}}
{{- end -}}

{{/* Shard resources: the values, with memory filled in from the formula where unset. */}}
{{- define "trawl.shardResources" -}}
{{- $r := deepCopy .Values.shards.resources -}}
{{- $mem := printf "%sMi" (include "trawl.shardMemoryMiB" .) -}}
{{- $requests := default dict $r.requests -}}
{{- $limits := default dict $r.limits -}}
{{- if not (hasKey $limits "memory") }}{{ $_ := set $limits "memory" (default $mem $requests.memory) }}{{ end -}}
{{- if not (hasKey $requests "memory") }}{{ $_ := set $requests "memory" $limits.memory }}{{ end -}}
{{- $_ := set $r "requests" $requests -}}
{{- $_ := set $r "limits" $limits -}}
{{- toYaml $r -}}
{{- end -}}

{{- define "trawl.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{/* Security context shared by every container: the image is non-root and has no shell. */}}
{{- define "trawl.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "trawl.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/*
Checks no schema can express; they fail the install with a message.
*/}}
{{- define "trawl.validate" -}}
{{- if and .Values.tls.enabled (not .Values.tls.certManager.enabled) (not .Values.tls.existingSecret) -}}
{{- fail "tls.enabled needs tls.existingSecret or tls.certManager.enabled" -}}
{{- end -}}
{{- if and .Values.tls.certManager.enabled (not .Values.tls.enabled) -}}
{{- fail "tls.certManager.enabled needs tls.enabled" -}}
{{- end -}}
{{- if and .Values.tls.certManager.enabled (not .Values.tls.certManager.issuerRef.name) -}}
{{- fail "tls.certManager.enabled needs tls.certManager.issuerRef.name" -}}
{{- end -}}
{{- $seen := dict -}}
{{- range .Values.shards.zones -}}
{{- if hasKey $seen .name }}{{ fail (printf "shards.zones: zone %q appears twice" .name) }}{{ end -}}
{{- $_ := set $seen .name true -}}
{{- end -}}
{{- $colls := dict -}}
{{- range .Values.collections -}}
{{- if hasKey $colls .name }}{{ fail (printf "collections: %q appears twice" .name) }}{{ end -}}
{{- $_ := set $colls .name true -}}
{{- end -}}
{{- $n := len (default list .Values.collections) -}}
{{- if gt $n (int .Values.router.maxCollections) -}}
{{- fail (printf "collections lists %d, more than router.maxCollections (%d)" $n (int .Values.router.maxCollections)) -}}
{{- end -}}
{{- include "trawl.validateRemoval" . -}}
{{- end -}}

{{/*
An upgrade that would delete shard pods still holding data fails, unless
shards.confirmRemoval says they were drained first: a lower shards.count
deletes shard-<count>.. (their slots would go missing from every answer),
a zone left out of shards.zones deletes a replica of every shard (two of
three and the groups lose their majority). The installed StatefulSets are
read with lookup, which is empty under helm template and dry runs.
*/}}
{{- define "trawl.validateRemoval" -}}
{{- if and .Release.IsUpgrade (not .Values.shards.confirmRemoval) -}}
{{- $zones := dict -}}
{{- range .Values.shards.zones }}{{ $_ := set $zones .name true }}{{ end -}}
{{- $sets := lookup "apps/v1" "StatefulSet" .Release.Namespace "" -}}
{{- range (default list $sets.items) -}}
{{- $l := .metadata.labels | default dict -}}
{{- if and (eq (index $l "app.kubernetes.io/instance" | default "") $.Release.Name) (eq (index $l "app.kubernetes.io/component" | default "") "shard") -}}
{{- $zone := index $l "trawl.dev/zone" | default "" -}}
{{- if not (hasKey $zones $zone) -}}
{{- fail (printf "shards.zones leaves out zone %q, whose pods are a replica of every shard: first `router admin remove-replica` each of them (docs/operations.md), then upgrade with shards.confirmRemoval=true" $zone) -}}
{{- end -}}
{{- $had := int .spec.replicas -}}
{{- if gt $had (int $.Values.shards.count) -}}
{{- fail (printf "shards.count %d is below the %d shards installed: first `router admin drain` shard-%d..shard-%d until `router admin slots` shows them empty (docs/operations.md), then upgrade with shards.confirmRemoval=true" (int $.Values.shards.count) $had (int $.Values.shards.count) (sub $had 1)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
One entry of .Values.collections as --ensure-collection takes it,
NAME=DIM:METRIC:QUANTIZATION:INDEX, every setting written out with the API's
defaults for those left out; ivf keeps int8 codes, so it implies int8.
*/}}
{{- define "trawl.collectionSpec" -}}
{{- $index := default "flat" .index -}}
{{- $quant := default "none" .quantization -}}
{{- if eq $index "ivf" }}{{ $quant = "int8" }}{{ end -}}
{{ .name }}={{ .dimension }}:{{ default "cosine" .metric }}:{{ $quant }}:{{ $index }}
{{- end -}}

{{/* The PVC backups are kept in: backups.persistence.existingClaim or the chart's. */}}
{{- define "trawl.backupClaim" -}}
{{- .Values.backups.persistence.existingClaim | default (printf "%s-backups" (include "trawl.fullname" .)) -}}
{{- end }}

{{/* "true" when backups are kept on a volume (enabled, no S3 bucket), else empty. */}}
{{- define "trawl.backupVolume" -}}
{{- if and .Values.backups.enabled (not .Values.backups.s3.endpoint) -}}true{{- end -}}
{{- end }}
