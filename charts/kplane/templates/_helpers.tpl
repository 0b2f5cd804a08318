{{/* Names, labels and the addresses components reach each other at. */}}

{{- define "kplane.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every resource's name, cut at 45 characters so that the
longest suffix (-gateway-internal, 17) keeps names within 63. */}}
{{- define "kplane.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 45 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 45 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 45 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* (list $ "core"): the name of a component's resources. */}}
{{- define "kplane.componentName" -}}
{{- printf "%s-%s" (include "kplane.fullname" (index . 0)) (index . 1) -}}
{{- end -}}

{{- define "kplane.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* (list $ "core"): a component's selector labels. */}}
{{- define "kplane.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "kplane.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* (list $ "core"): a component's labels. */}}
{{- define "kplane.labels" -}}
{{- $root := index . 0 -}}
helm.sh/chart: {{ include "kplane.chart" $root }}
{{ include "kplane.selectorLabels" . }}
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
app.kubernetes.io/part-of: kplane
{{- end -}}

{{/* The services, in the order the chart renders them. */}}
{{- define "kplane.services" -}}
gateway authn authz core crd admission
{{- end -}}

{{/* A service's port: the same as make up's (deploy/launcher). */}}
{{- define "kplane.port" -}}
{{- get (dict "gateway" 6443 "core" 6444 "authn" 6450 "authz" 6460 "crd" 6470 "admission" 6480) . -}}
{{- end -}}

{{/* (list $ "core"): the DNS name of a component's Service. */}}
{{- define "kplane.host" -}}
{{- printf "%s.%s.svc" (include "kplane.componentName" .) (index . 0).Release.Namespace -}}
{{- end -}}

{{/* (list $ "kplane-core"): an image of the release; (list $ "etcd"
.Values.etcd.bundled.image) honours a component's own repository and tag. */}}
{{- define "kplane.image" -}}
{{- $root := index . 0 -}}
{{- $own := dict -}}
{{- if gt (len .) 2 }}{{ $own = index . 2 }}{{ end -}}
{{- $tag := default (default $root.Chart.AppVersion $root.Values.image.tag) $own.tag -}}
{{- $repo := $own.repository -}}
{{- if not $repo -}}
{{- $repo = printf "%s/%s" $root.Values.image.repository (index . 1) -}}
{{- if $root.Values.image.registry }}{{ $repo = printf "%s/%s" $root.Values.image.registry $repo }}{{ end -}}
{{- end -}}
{{- printf "%s:%s" $repo $tag -}}
{{- end -}}

{{/* The prefix of the certificate Secrets' names. */}}
{{- define "kplane.secretPrefix" -}}
{{- default (include "kplane.fullname" .) .Values.certificates.secretPrefix -}}
{{- end -}}

{{/* (list $ "core"): the Secret of a bundle (kplane-up init's names). */}}
{{- define "kplane.bundleSecret" -}}
{{- printf "%s-%s" (include "kplane.secretPrefix" (index . 0)) (index . 1) -}}
{{- end -}}

{{/* Where the gateway is reached from inside the cluster by the services
that read the API: a Service that keeps unready gateways (see
gateway-service.yaml). Their kubeconfigs name it. */}}
{{- define "kplane.internalServer" -}}
{{- printf "https://%s:%s" (include "kplane.host" (list . "gateway-internal")) (include "kplane.port" "gateway") -}}
{{- end -}}

{{/* The URL the admin kubeconfig names. */}}
{{- define "kplane.adminServer" -}}
{{- default (printf "https://%s:%d" (include "kplane.host" (list . "gateway")) (int .Values.gateway.service.port)) .Values.certificates.adminServer -}}
{{- end -}}

{{- define "kplane.natsURL" -}}
{{- if eq .Values.nats.mode "bundled" -}}
{{- printf "nats://%s:4222" (include "kplane.host" (list . "nats")) -}}
{{- else -}}
{{- required "nats.external.url is required with nats.mode external" .Values.nats.external.url -}}
{{- end -}}
{{- end -}}

{{/* etcd's client URLs, comma separated. */}}
{{- define "kplane.etcdServers" -}}
{{- if eq .Values.etcd.mode "bundled" -}}
{{- $urls := list -}}
{{- $name := include "kplane.componentName" (list . "etcd") -}}
{{- range $i := until (int .Values.etcd.bundled.replicas) -}}
{{- $urls = append $urls (printf "http://%s-%d.%s-peers.%s.svc:2379" $name $i $name $.Release.Namespace) -}}
{{- end -}}
{{- join "," $urls -}}
{{- else -}}
{{- if not .Values.etcd.external.endpoints }}{{ fail "etcd.external.endpoints is required with etcd.mode external" }}{{ end -}}
{{- join "," .Values.etcd.external.endpoints -}}
{{- end -}}
{{- end -}}

{{/* Ports of URLs, as a YAML list: what egress to an external etcd or
NATS is allowed on, their addresses being unknown here. */}}
{{- define "kplane.urlPorts" -}}
{{- range . }}
{{- $u := urlParse . }}
{{- $parts := splitList ":" $u.host }}
{{- if lt (len $parts) 2 }}{{ fail (printf "%s names no port" .) }}{{ end }}
- {{ last $parts }}
{{- end }}
{{- end -}}

{{/* (list $ .Values.core): the pod fields every component shares. */}}
{{- define "kplane.podScheduling" -}}
{{- $root := index . 0 -}}
{{- $v := index . 1 -}}
{{- with $root.Values.image.pullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- with $root.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
{{- end -}}

{{/* (list $ "etcd" .Values.etcd.bundled): a StatefulSet's affinity. */}}
{{- define "kplane.memberAffinity" -}}
{{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (include "kplane.selectorLabels" (list (index . 0) (index . 1)) | fromYaml)) -}}
{{- $v := index . 2 -}}
{{- if eq $v.podAntiAffinity "hard" }}
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - {{ toYaml $term | nindent 8 | trim }}
{{- else if eq $v.podAntiAffinity "soft" }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          {{- toYaml $term | nindent 10 }}
{{- end }}
{{- end -}}

{{/* The key of the NATS server's users in Secret <secretPrefix>-nats, as
kplane-up init names it. */}}
{{- define "kplane.natsAuthFile" -}}auth.conf{{- end -}}

{{/* The bundles kplane-up init writes, one Secret each. */}}
{{- define "kplane.bundles" -}}
{{- $b := concat (splitList " " (include "kplane.services" .)) (list "nats" "admin") -}}
{{- toYaml $b -}}
{{- end -}}

{{/* kplane-up init's command line: serving certificates valid for every
name a component's Service has, kubeconfigs pointing at the gateway. */}}
{{- define "kplane.initArgs" -}}
{{- $prefix := include "kplane.fullname" . -}}
{{- $ns := .Release.Namespace -}}
- init
- --data-dir=/var/lib/kplane
- --server={{ include "kplane.internalServer" . }}
- --admin-server={{ include "kplane.adminServer" . }}
{{- range list "" (printf ".%s" $ns) (printf ".%s.svc" $ns) (printf ".%s.svc.%s" $ns .Values.clusterDomain) }}
- --hostname={{ $prefix }}-{service}{{ . }}
{{- end }}
{{- range list "" (printf ".%s" $ns) (printf ".%s.svc" $ns) (printf ".%s.svc.%s" $ns .Values.clusterDomain) }}
- --gateway-hostname={{ include "kplane.componentName" (list $ "gateway-internal") }}{{ . }}
{{- end }}
{{- with .Values.certificates.adminServer }}
{{- /* The admin kubeconfig names the gateway so. */}}
- --gateway-hostname={{ regexReplaceAll ":[0-9]+$" (urlParse .).host "" | trimPrefix "[" | trimSuffix "]" }}
{{- end }}
{{- range .Values.certificates.gatewayHostnames }}
- --gateway-hostname={{ . }}
{{- end }}
- --secrets-namespace={{ $ns }}
- --secret-prefix={{ include "kplane.secretPrefix" . }}
{{- end -}}
