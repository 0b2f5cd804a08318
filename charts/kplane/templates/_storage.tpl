{{/* The flags core and crd share: etcd, the gateway's client certificate
and the API their controllers act through. */}}
{{- define "kplane.storage.args" -}}
- --client-ca-file={{ include "kplane.bundleDir" . }}/ca.crt
- --etcd-servers={{ include "kplane.etcdServers" . }}
- --etcd-prefix={{ .Values.etcd.prefix }}
{{- if and (eq .Values.etcd.mode "external") .Values.etcd.external.tls.existingSecret }}
- --etcd-cafile=/etc/kplane-etcd/ca.crt
{{- if .Values.etcd.external.tls.clientCertificate }}
- --etcd-certfile=/etc/kplane-etcd/tls.crt
- --etcd-keyfile=/etc/kplane-etcd/tls.key
{{- end }}
{{- end }}
- --api-kubeconfig={{ include "kplane.bundleDir" . }}/kubeconfig
- --admission
{{- end -}}
