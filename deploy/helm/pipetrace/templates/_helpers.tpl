{{/* OTLP headers as the OTel SDK's k=v,k=v */}}
{{- define "pipetrace.headers" -}}
{{- $pairs := list -}}
{{- range $k, $v := .Values.otlp.headers -}}
{{- $pairs = append $pairs (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}
