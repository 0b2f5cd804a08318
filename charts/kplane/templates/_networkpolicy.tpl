{{/* NetworkPolicy pieces: who talks to whom is DESIGN.md's request path.
Every policy denies what its rules do not name, in and out. */}}

{{/* (list $ "core"): a rule's peer, the pods of a component. */}}
{{- define "kplane.peer" -}}
podSelector:
  matchLabels:
    {{- include "kplane.selectorLabels" . | nindent 4 }}
{{- end -}}

{{- define "kplane.egress.dns" -}}
- ports:
    - protocol: UDP
      port: 53
    - protocol: TCP
      port: 53
{{- end -}}

{{/* Egress to NATS: its pods when bundled; an external server's port
anywhere, its address being unknown here. */}}
{{- define "kplane.egress.nats" -}}
{{- if eq .Values.nats.mode "bundled" -}}
- to:
    - {{ include "kplane.peer" (list . "nats") | nindent 6 | trim }}
  ports:
    - protocol: TCP
      port: 4222
{{- else -}}
- ports:
    {{- range (include "kplane.urlPorts" (list (include "kplane.natsURL" .)) | fromYamlArray) }}
    - protocol: TCP
      port: {{ . }}
    {{- end }}
{{- end }}
{{- end -}}

{{/* Egress to the API: the gateway. */}}
{{- define "kplane.egress.gateway" -}}
- to:
    - {{ include "kplane.peer" (list . "gateway") | nindent 6 | trim }}
  ports:
    - protocol: TCP
      port: {{ include "kplane.port" "gateway" }}
{{- end -}}

{{/* Egress to etcd, as kplane.egress.nats. */}}
{{- define "kplane.egress.etcd" -}}
{{- if eq .Values.etcd.mode "bundled" -}}
- to:
    - {{ include "kplane.peer" (list . "etcd") | nindent 6 | trim }}
  ports:
    - protocol: TCP
      port: 2379
{{- else -}}
- ports:
    {{- range (include "kplane.urlPorts" .Values.etcd.external.endpoints | fromYamlArray) | uniq }}
    - protocol: TCP
      port: {{ . }}
    {{- end }}
{{- end }}
{{- end -}}

{{/* (dict "root" $ "component" "core" "ingress" "..." "egress" "..."): a
component's NetworkPolicy, its rules followed by the operator's extra
ones. */}}
{{- define "kplane.networkPolicy" -}}
{{- $root := .root -}}
{{- $c := .component -}}
{{- $extra := dict -}}
{{- with (index $root.Values $c).networkPolicy }}{{ $extra = . }}{{ end -}}
{{- $ingress := trim (default "" .ingress) -}}
{{- with $extra.extraIngress }}{{ $ingress = printf "%s\n%s" $ingress (toYaml .) | trim }}{{ end -}}
{{- if $root.Values.networkPolicy.enabled }}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "kplane.componentName" (list $root $c) }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "kplane.labels" (list $root $c) | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "kplane.selectorLabels" (list $root $c) | nindent 6 }}
  policyTypes:
    - Ingress
    - Egress
  {{- if $ingress }}
  ingress:
    {{- $ingress | nindent 4 }}
  {{- else }}
  # Nothing calls it.
  ingress: []
  {{- end }}
  egress:
    {{- .egress | trim | nindent 4 }}
    {{- with $extra.extraEgress }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}
{{- end -}}
