{{- define "gpu-gang.schedulerConfig" -}}
{{- if and (not .Values.topology.levels) (not .Values.topology.preset) }}
{{- fail "set topology.preset or topology.levels" }}
{{- end -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  qps: {{ .Values.scheduler.clientQPS }}
  burst: {{ .Values.scheduler.clientBurst }}
  contentType: application/vnd.kubernetes.protobuf
leaderElection:
  leaderElect: true
  resourceNamespace: {{ .Release.Namespace }}
  resourceName: gpu-gang-scheduler
profiles:
  - schedulerName: {{ .Values.scheduler.schedulerName }}
    plugins:
      multiPoint:
        enabled:
          - name: RailFence
        disabled:
          - name: DefaultPreemption
      queueSort:
        enabled:
          - name: Coscheduling
        disabled:
          - name: "*"
      preEnqueue:
        enabled:
          - name: Coscheduling
      preFilter:
        enabled:
          - name: RailFence
          - name: GPUFleet
          - name: Coscheduling
      filter:
        enabled:
          - name: GPUFleet
          - name: Coscheduling
      postFilter:
        enabled:
          - name: Coscheduling
      preScore:
        enabled:
          - name: Coscheduling
      score:
        enabled:
          - name: Coscheduling
            weight: {{ .Values.scheduler.packingWeight }}
      reserve:
        enabled:
          - name: Coscheduling
      permit:
        enabled:
          - name: Coscheduling
    pluginConfig:
      - name: Coscheduling
        args:
          apiVersion: kubescheduler.config.k8s.io/v1
          kind: CoschedulingArgs
          permitWaitingTimeSeconds: {{ .Values.timeouts.permitWaitingTimeSeconds }}
          podGroupBackoffSeconds: {{ .Values.timeouts.podGroupBackoffSeconds }}
          podGroupMaxBackoffSeconds: {{ .Values.timeouts.podGroupMaxBackoffSeconds }}
          claimReleaseGraceSeconds: {{ .Values.timeouts.claimReleaseGraceSeconds }}
          {{- if .Values.topology.levels }}
          topologyLevels:
            {{- toYaml .Values.topology.levels | nindent 12 }}
          {{- else }}
          topologyPreset: {{ .Values.topology.preset }}
          {{- end }}
      - name: GPUFleet
        args:
          apiVersion: kubescheduler.config.k8s.io/v1
          kind: GPUFleetArgs
          unlabelledNodes: {{ .Values.gpuFleet.unlabelledNodes }}
          capacityTypeLabels:
            {{- toYaml .Values.gpuFleet.capacityTypeLabels | nindent 12 }}
{{- end -}}
