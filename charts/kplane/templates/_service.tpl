{{/* What the six kplane services share: a Deployment around the
service's own flags, its ServiceAccount, PodDisruptionBudget and
HorizontalPodAutoscaler. Each service's <service>-deployment.yaml passes
the flags only it has. */}}

{{/* Where a service's bundle Secret is mounted: its files are what
kplane-up init exports (ca.crt, tls.crt, tls.key, kubeconfig, nats.nkey,
...). */}}
{{- define "kplane.bundleDir" -}}/etc/kplane{{- end -}}

{{/* A service's NATS credential flag: the NKey of its bundle, or what an
external NATS wants. */}}
{{- define "kplane.natsCredentialArg" -}}
{{- $root := index . 0 -}}
{{- $c := index . 1 -}}
{{- $ext := $root.Values.nats.external -}}
{{- if or (eq $root.Values.nats.mode "bundled") (eq $ext.credentials "nkey") -}}
--nats-nkey-file={{ include "kplane.bundleDir" . }}/nats.nkey
{{- else if eq $ext.credentials "creds" -}}
--nats-creds=/etc/kplane-nats/{{ $c }}.creds
{{- else -}}
--nats-token-file=/etc/kplane-nats/token
{{- end -}}
{{- end -}}

{{/* (dict "root" $ "component" "core" "args" "- --flag\n..."
["mounts" "- name: ...", "volumes" "- name: ...", "annotations" (dict)]): a
service's Deployment. */}}
{{- define "kplane.deployment" -}}
{{- $root := .root -}}
{{- $c := .component -}}
{{- $v := index $root.Values $c -}}
{{- $port := include "kplane.port" $c -}}
{{- $ext := $root.Values.nats.external -}}
{{- $natsSecret := and (eq $root.Values.nats.mode "external") (ne $ext.credentials "nkey") -}}
{{- $etcdTLS := and (has $c (list "core" "crd")) (eq $root.Values.etcd.mode "external") $root.Values.etcd.external.tls.existingSecret -}}
{{- $natsTLS := and (eq $root.Values.nats.mode "external") $ext.tls.existingSecret -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "kplane.componentName" (list $root $c) }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "kplane.labels" (list $root $c) | nindent 4 }}
spec:
  {{- if not $v.autoscaling.enabled }}
  replicas: {{ $v.replicas }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "kplane.selectorLabels" (list $root $c) | nindent 6 }}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      # A new replica is ready before an old one stops: the service never
      # has fewer replicas than asked during a rollout.
      maxSurge: 1
      maxUnavailable: 0
  template:
    metadata:
      labels:
        {{- include "kplane.labels" (list $root $c) | nindent 8 }}
        {{- with $v.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- $annotations := merge (dict) ($v.podAnnotations | default dict) (.annotations | default dict) }}
      {{- with $annotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "kplane.componentName" (list $root $c) }}
      # The services reach the API through the gateway with their own
      # certificates; a Kubernetes token would be a credential to the
      # host cluster that none of them uses.
      automountServiceAccountToken: false
      enableServiceLinks: false
      terminationGracePeriodSeconds: {{ $v.terminationGracePeriodSeconds }}
      {{- include "kplane.podScheduling" (list $root $v) | trim | nindent 6 }}
      topologySpreadConstraints:
        {{- if $v.topologySpreadConstraints }}
        {{- toYaml $v.topologySpreadConstraints | nindent 8 }}
        {{- else }}
        {{- range list "kubernetes.io/hostname" "topology.kubernetes.io/zone" }}
        - maxSkew: 1
          topologyKey: {{ . }}
          whenUnsatisfiable: ScheduleAnyway
          labelSelector:
            matchLabels:
              {{- include "kplane.selectorLabels" (list $root $c) | nindent 14 }}
        {{- end }}
        {{- end }}
      containers:
        - name: {{ $c }}
          image: {{ include "kplane.image" (list $root (printf "kplane-%s" $c)) }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args:
            - --listen-address=:{{ $port }}
            - --tls-cert-file={{ include "kplane.bundleDir" . }}/tls.crt
            - --tls-private-key-file={{ include "kplane.bundleDir" . }}/tls.key
            {{- .args | nindent 12 }}
            - --nats-url={{ include "kplane.natsURL" $root }}
            - {{ include "kplane.natsCredentialArg" (list $root $c) }}
            {{- if $natsTLS }}
            - --nats-ca-file=/etc/kplane-nats-tls/ca.crt
            {{- if $ext.tls.clientCertificate }}
            - --nats-client-cert-file=/etc/kplane-nats-tls/tls.crt
            - --nats-client-key-file=/etc/kplane-nats-tls/tls.key
            {{- end }}
            {{- end }}
            - --log-format={{ $root.Values.logFormat }}
            - --log-level={{ $root.Values.logLevel }}
            {{- with $root.Values.tracing }}
            {{- if .endpoint }}
            - --tracing-endpoint={{ .endpoint }}
            - --tracing-protocol={{ .protocol }}
            - --tracing-sampling-rate-per-million={{ .samplingRatePerMillion }}
            {{- end }}
            {{- end }}
            - --shutdown-delay-duration={{ $v.shutdownDelay }}
            {{- with $v.extraArgs }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            - name: https
              containerPort: {{ $port }}
              protocol: TCP
          {{- if eq $c "gateway" }}
          # The gateway authorizes /livez and /readyz like any path:
          # anonymous callers such as the kubelet are let in by authz
          # (system:public-info-viewer). Readiness may wait for authz, since
          # a gateway that cannot authorize serves no one but
          # system:masters; liveness must not, or an authz outage would
          # restart every gateway, so it only asks that the gateway accept
          # connections.
          startupProbe:
            tcpSocket:
              port: https
            periodSeconds: 5
            failureThreshold: 60
          livenessProbe:
            tcpSocket:
              port: https
            periodSeconds: 10
            timeoutSeconds: 5
            failureThreshold: 6
          {{- else }}
          # /livez and /readyz answer any client, no certificate needed.
          startupProbe:
            httpGet:
              path: /livez
              port: https
              scheme: HTTPS
            periodSeconds: 5
            failureThreshold: 60
          livenessProbe:
            httpGet:
              path: /livez
              port: https
              scheme: HTTPS
            periodSeconds: 10
            timeoutSeconds: 5
            failureThreshold: 6
          {{- end }}
          readinessProbe:
            httpGet:
              path: /readyz
              port: https
              scheme: HTTPS
            periodSeconds: 5
            timeoutSeconds: 3
            failureThreshold: 2
          resources:
            {{- toYaml $v.resources | nindent 12 }}
          securityContext:
            {{- toYaml $root.Values.containerSecurityContext | nindent 12 }}
          volumeMounts:
            - name: bundle
              mountPath: {{ include "kplane.bundleDir" . }}
              readOnly: true
            {{- if $natsSecret }}
            - name: nats-credentials
              mountPath: /etc/kplane-nats
              readOnly: true
            {{- end }}
            {{- if $etcdTLS }}
            - name: etcd-tls
              mountPath: /etc/kplane-etcd
              readOnly: true
            {{- end }}
            {{- if $natsTLS }}
            - name: nats-tls
              mountPath: /etc/kplane-nats-tls
              readOnly: true
            {{- end }}
            {{- with .mounts }}
            {{- . | nindent 12 }}
            {{- end }}
      volumes:
        # Files are root's, readable by the group the pod runs as (fsGroup).
        - name: bundle
          secret:
            secretName: {{ include "kplane.bundleSecret" (list $root $c) }}
            defaultMode: 0440
        {{- if $natsSecret }}
        - name: nats-credentials
          secret:
            secretName: {{ required "nats.external.existingSecret is required with nats.external.credentials creds or token" $ext.existingSecret }}
            defaultMode: 0440
            items:
              # A service sees its own credentials only.
              {{- if eq $ext.credentials "creds" }}
              - key: {{ $c }}.creds
                path: {{ $c }}.creds
              {{- else }}
              - key: token
                path: token
              {{- end }}
        {{- end }}
        {{- if $etcdTLS }}
        - name: etcd-tls
          secret:
            secretName: {{ $root.Values.etcd.external.tls.existingSecret }}
            defaultMode: 0440
        {{- end }}
        {{- if $natsTLS }}
        - name: nats-tls
          secret:
            secretName: {{ $ext.tls.existingSecret }}
            defaultMode: 0440
        {{- end }}
        {{- with .volumes }}
        {{- . | nindent 8 }}
        {{- end }}
{{- end -}}

{{/* (list $ "core"): a service's ServiceAccount. */}}
{{- define "kplane.serviceAccount" -}}
{{- $root := index . 0 -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "kplane.componentName" . }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "kplane.labels" . | nindent 4 }}
automountServiceAccountToken: false
{{- end -}}

{{/* (list $ "core" .Values.core.podDisruptionBudget): a
PodDisruptionBudget, unless disabled. */}}
{{- define "kplane.podDisruptionBudget" -}}
{{- $root := index . 0 -}}
{{- $c := index . 1 -}}
{{- $pdb := index . 2 -}}
{{- if $pdb.enabled }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "kplane.componentName" (list $root $c) }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "kplane.labels" (list $root $c) | nindent 4 }}
spec:
  maxUnavailable: {{ default 1 $pdb.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "kplane.selectorLabels" (list $root $c) | nindent 6 }}
{{- end }}
{{- end -}}

{{/* (list $ "core"): a service's HorizontalPodAutoscaler, when on. */}}
{{- define "kplane.autoscaler" -}}
{{- $root := index . 0 -}}
{{- $c := index . 1 -}}
{{- $a := (index $root.Values $c).autoscaling -}}
{{- if $a.enabled }}
{{- if gt (int $a.minReplicas) (int $a.maxReplicas) }}
{{- fail (printf "%s.autoscaling: minReplicas %d is above maxReplicas %d" $c (int $a.minReplicas) (int $a.maxReplicas)) }}
{{- end }}
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "kplane.componentName" (list $root $c) }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "kplane.labels" (list $root $c) | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "kplane.componentName" (list $root $c) }}
  minReplicas: {{ $a.minReplicas }}
  maxReplicas: {{ $a.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $a.targetCPUUtilizationPercentage }}
    {{- if $a.targetMemoryUtilizationPercentage }}
    - type: Resource
      resource:
        name: memory
        target:
          type: Utilization
          averageUtilization: {{ $a.targetMemoryUtilizationPercentage }}
    {{- end }}
{{- end }}
{{- end -}}
