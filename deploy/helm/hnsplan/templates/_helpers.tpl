{{/*
hnsplan.namespace is where every namespaced object lives. It is fixed: the
admission policies match the agent's ServiceAccount by its full name,
system:serviceaccount:hnsplan-system:hnsplan-agent, and the agent reads its
plan from hnsplan-system.
*/}}
{{- define "hnsplan.namespace" -}}hnsplan-system{{- end -}}

{{/*
hnsplan.check refuses values the objects cannot honour, with what to set.
Every template includes it, so `helm template -s` of one file refuses too.
*/}}
{{- define "hnsplan.check" -}}
{{- $ns := include "hnsplan.namespace" . -}}
{{- $host := .Values.apiServer.host | toString -}}
{{- if not $host -}}
{{- fail "apiServer.host is not set: give the API server's address as the Windows nodes reach it, --set apiServer.host=HOST (and apiServer.port, default 443): the host of `kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}'`" -}}
{{- end -}}
{{- if or (contains "://" $host) (contains "/" $host) (regexMatch "\\s" $host) -}}
{{- fail (printf "apiServer.host %q: give the host alone (a name or an address), no scheme, path or space; the port is apiServer.port" $host) -}}
{{- end -}}
{{- if and (regexMatch "^[^:\\[]+:[0-9]+$" $host) -}}
{{- fail (printf "apiServer.host %q: give the port as apiServer.port, not in the host" $host) -}}
{{- end -}}
{{- if and .Values.namespace.create (eq .Release.Namespace $ns) -}}
{{- fail (printf "namespace.create is true and the release is in %s: Helm stores a release in its namespace before it creates any object, so %s must exist already, and then the chart cannot create it. Install into another namespace (-n kube-system), or set namespace.create=false and install with -n %s --create-namespace" $ns $ns $ns) -}}
{{- end -}}
{{- if and (not .Values.namespace.create) (ne .Release.Namespace $ns) -}}
{{- fail (printf "the release is in %s: with namespace.create=false install it into %s (-n %s --create-namespace), where its objects are; or set namespace.create=true to have this chart create %s" .Release.Namespace $ns $ns $ns) -}}
{{- end -}}
{{- $modes := list -}}
{{- if .Values.trustedKeys.authorizedKeys }}{{ $modes = append $modes "trustedKeys.authorizedKeys" }}{{ end -}}
{{- if .Values.trustedKeys.existingConfigMap }}{{ $modes = append $modes "trustedKeys.existingConfigMap" }}{{ end -}}
{{- if .Values.trustedKeys.file }}{{ $modes = append $modes "trustedKeys.file" }}{{ end -}}
{{- if gt (len $modes) 1 -}}
{{- fail (printf "%s: set one; keys in a ConfigMap beside the file would let its writers add keys the file does not trust, and the agent takes one source" (join " and " $modes)) -}}
{{- end -}}
{{- $n := 0 -}}
{{- range $i, $line := splitList "\n" (.Values.trustedKeys.authorizedKeys | toString) -}}
{{- $l := trim $line -}}
{{- if and $l (not (hasPrefix "#" $l)) -}}
{{- if not (regexMatch "^ssh-ed25519 [A-Za-z0-9+/]+={0,2}( .*)?$" $l) -}}
{{- fail (printf "trustedKeys.authorizedKeys line %d: %q is not an OpenSSH ed25519 public key (ssh-ed25519 AAAA... comment); the agent trusts ed25519 keys only" (add1 $i) (trunc 60 $l)) -}}
{{- end -}}
{{- $n = add1 $n -}}
{{- end -}}
{{- end -}}
{{- if and .Values.trustedKeys.authorizedKeys (eq $n 0) -}}
{{- fail "trustedKeys.authorizedKeys lists no key (only comments or blank lines): every plan would be refused; give at least one ssh-ed25519 key, or leave it empty" -}}
{{- end -}}
{{- with .Values.trustedKeys.file -}}
{{- if not (regexMatch "^([A-Za-z]:\\\\|\\\\\\\\)" .) -}}
{{- fail (printf "trustedKeys.file %q: give an absolute Windows path on the node (C:\\...)" .) -}}
{{- end -}}
{{- end -}}
{{- with .Values.nodeSelector -}}
{{- if hasKey . "kubernetes.io/os" -}}
{{- fail "nodeSelector: kubernetes.io/os is always windows (the agent is a Windows HostProcess pod): leave it out" -}}
{{- end -}}
{{- if hasKey . $.Values.agentLabel.key -}}
{{- fail (printf "nodeSelector: %s is agentLabel's key; set agentLabel.value instead" $.Values.agentLabel.key) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.image.digest (not (regexMatch "^sha256:[0-9a-f]{64}$" .Values.image.digest)) -}}
{{- fail (printf "image.digest %q: give sha256: and 64 lowercase hex digits" .Values.image.digest) -}}
{{- end -}}
{{- end -}}

{{/*
hnsplan.image is the agent's image reference: a digest pins it, else the tag
(the chart's appVersion by default).
*/}}
{{- define "hnsplan.image" -}}
{{- $name := printf "%s/%s" .Values.image.registry .Values.image.repository -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $name .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $name (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}
