{{/*
Names. The base name is "coredns" (not the chart's name) so that a release
made with the coredns chart keeps its object names and Deployment selector
when it is upgraded to this chart. Values files may refer to these
templates by name (e.g. in topologySpreadConstraints), as with that chart.
*/}}
{{- define "coredns.name" -}}
{{- .Values.nameOverride | default "coredns" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "coredns.fullname" -}}
{{- $name := include "coredns.name" . -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "coredns.k8sapplabel" -}}
{{- .Values.k8sAppLabelOverride | default "coredns" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "coredns.deploymentName" -}}
{{- .Values.deployment.name | default (include "coredns.fullname" .) -}}
{{- end -}}

{{- define "coredns.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "coredns.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{- define "coredns.clusterRoleName" -}}
{{- if and .Values.clusterRole .Values.clusterRole.nameOverride -}}
{{- .Values.clusterRole.nameOverride -}}
{{- else -}}
{{- include "coredns.fullname" . -}}
{{- end -}}
{{- end -}}

{{/*
Labels, as YAML maps. "suffix" is "" for the DNS objects and "-autoscaler"
for the autoscaler's. Chart labels win over customLabels, so that a custom
label can never break a selector.
*/}}
{{- define "coredns.selectorLabels" -}}
{{- $ctx := index . 0 -}}
{{- $suffix := index . 1 -}}
{{- $l := dict "app.kubernetes.io/instance" $ctx.Release.Name "app.kubernetes.io/name" (printf "%s%s" (include "coredns.name" $ctx) $suffix) -}}
{{- if $ctx.Values.isClusterService -}}
{{- $_ := set $l "k8s-app" (printf "%s%s" (include "coredns.k8sapplabel" $ctx) $suffix) -}}
{{- end -}}
{{- toYaml $l -}}
{{- end -}}

{{- define "coredns.objectLabels" -}}
{{- $ctx := index . 0 -}}
{{- $l := include "coredns.selectorLabels" . | fromYaml -}}
{{- $_ := set $l "app.kubernetes.io/managed-by" $ctx.Release.Service -}}
{{- $_ := set $l "helm.sh/chart" (printf "%s-%s" $ctx.Chart.Name ($ctx.Chart.Version | replace "+" "_")) -}}
{{- if $ctx.Values.isClusterService -}}
{{- $_ := set $l "kubernetes.io/cluster-service" "true" -}}
{{- $_ := set $l "kubernetes.io/name" "CoreDNS" -}}
{{- end -}}
{{- if gt (len .) 2 -}}
{{- $l = merge $l (index . 2) -}}
{{- end -}}
{{- toYaml (merge $l (deepCopy ($ctx.Values.customLabels | default dict))) -}}
{{- end -}}

{{/*
metadata.annotations (at the indentation of metadata's fields):
customAnnotations under the object's own, which win; nothing when both are
empty. Call as {{- include "coredns.annotations" (list . OWN) }}.
*/}}
{{- define "coredns.annotations" -}}
{{- $ctx := index . 0 -}}
{{- $a := merge (deepCopy (index . 1 | default dict)) (deepCopy ($ctx.Values.customAnnotations | default dict)) -}}
{{- if $a -}}
{{- printf "\n  annotations:\n%s" (toYaml $a | indent 4) -}}
{{- end -}}
{{- end -}}

{{/*
The ports the server blocks listen on, as JSON: {"53": {"udp": true,
"tcp": true, "servicePort": 53, "nodePort": 0, "hostPort": 0}, ...}.
A port serves UDP when one of its zones is plain DNS (no scheme or
dns://), TCP when such a zone has use_tcp or a zone is tls://, grpc:// or
https://, and UDP when nothing else applies. servicePort is the first
block's; nodePort and hostPort the last block's that sets them.
*/}}
{{- define "coredns.portMap" -}}
{{- $ports := dict -}}
{{- range $srv := .Values.servers -}}
{{- $key := toString ($srv.port | default 53) -}}
{{- if not (hasKey $ports $key) -}}
{{- $_ := set $ports $key (dict "udp" false "tcp" false "servicePort" ($srv.servicePort | default $srv.port | default 53) "nodePort" 0 "hostPort" 0) -}}
{{- end -}}
{{- $p := get $ports $key -}}
{{- range $z := $srv.zones -}}
{{- $scheme := $z.scheme | default "" -}}
{{- if or (eq $scheme "") (eq $scheme "dns://") -}}
{{- $_ := set $p "udp" true -}}
{{- if $z.use_tcp -}}{{- $_ := set $p "tcp" true -}}{{- end -}}
{{- else if has $scheme (list "tls://" "grpc://" "https://") -}}
{{- $_ := set $p "tcp" true -}}
{{- end -}}
{{- end -}}
{{- if not (or $p.udp $p.tcp) -}}
{{- $_ := set $p "udp" true -}}
{{- end -}}
{{- if $srv.nodePort -}}{{- $_ := set $p "nodePort" $srv.nodePort -}}{{- end -}}
{{- if $srv.hostPort -}}{{- $_ := set $p "hostPort" $srv.hostPort -}}{{- end -}}
{{- end -}}
{{- toJson $ports -}}
{{- end -}}

{{/*
The metrics port of each prometheus plugin (the port of its address,
9153 when it has none), as a JSON list of strings.
*/}}
{{- define "coredns.metricsPorts" -}}
{{- $out := list -}}
{{- range $srv := .Values.servers -}}
{{- range $pl := $srv.plugins -}}
{{- if eq $pl.name "prometheus" -}}
{{- $addr := toString ($pl.parameters | default ":9153") -}}
{{- $out = append $out (regexSplit ":" $addr -1 | last) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson (uniq $out) -}}
{{- end -}}

{{/*
The Corefile: extraConfig's directives, then one block per server.
*/}}
{{- define "coredns.corefile" -}}
{{- range $name, $conf := .Values.extraConfig }}
{{ $name }}{{ if and $conf $conf.parameters }} {{ $conf.parameters }}{{ end }}
{{- end }}
{{- range $srv := .Values.servers }}
{{- $keys := list -}}
{{- range $z := $srv.zones -}}
{{- $keys = append $keys (printf "%s%s" ($z.scheme | default "") ($z.zone | default ".")) -}}
{{- end -}}
{{- if not $keys -}}{{- $keys = list "." -}}{{- end -}}
{{- if $srv.port -}}
{{- $withPort := list -}}
{{- range $k := $keys -}}{{- $withPort = append $withPort (printf "%s:%v" $k $srv.port) -}}{{- end -}}
{{- $keys = $withPort -}}
{{- end }}
{{ join " " $keys }} {
{{- range $pl := $srv.plugins }}
    {{ $pl.name }}{{ with $pl.parameters }} {{ . }}{{ end }}{{ with $pl.configBlock }} {
{{ . | indent 8 }}
    }{{ end }}
{{- end }}
}
{{- end }}
{{- end -}}
