{{/*
Authentication: worker tokens, admin tokens and the cluster secret are required. They come from a
Secret the operator made (auth.existingSecret) or from values (rendered into <fullname>-auth). None
is ever generated here: a randAlphaNum or lookup secret changes on every `helm template` or GitOps
sync, which would lock the workers and the operators out at the next sync.
*/}}

{{/* The Secret that holds the auth files: the operator's, or the one this chart renders. */}}
{{- define "retryring.authSecret" -}}
{{- if .Values.auth.existingSecret -}}
{{ .Values.auth.existingSecret }}
{{- else -}}
{{ include "retryring.fullname" . }}-auth
{{- end -}}
{{- end -}}

{{/* "true" when the pods run with authentication, "" for auth.insecureNoAuthentication. */}}
{{- define "retryring.authOn" -}}
{{- if not .Values.auth.insecureNoAuthentication -}}true{{- end -}}
{{- end -}}

{{/* The ring of this release's workers, as token new --ring takes it. */}}
{{- define "retryring.ring" -}}
{{ .Values.worker.region }}/{{ .Values.worker.cluster }}/{{ .Values.worker.service }}
{{- end -}}

{{/*
checkAuth fails the rendering unless authentication is fully configured one way: an existing
Secret, every value, or the explicit opt-out. The message says how to make each piece.
*/}}
{{- define "retryring.checkAuth" -}}
{{- $a := .Values.auth -}}
{{- $inline := dict "auth.workerTokens" $a.workerTokens "auth.adminTokens" $a.adminTokens "auth.clusterSecret" $a.clusterSecret -}}
{{- if .Values.worker.enabled }}{{ $_ := set $inline "auth.workerToken" $a.workerToken }}{{ end -}}
{{- $given := list -}}
{{- $missing := list -}}
{{- range $k, $v := $inline }}{{ if $v }}{{ $given = append $given $k }}{{ else }}{{ $missing = append $missing $k }}{{ end }}{{ end -}}
{{- if $a.insecureNoAuthentication -}}
{{- if or $a.existingSecret $given -}}
{{- if $a.existingSecret }}{{ $given = prepend $given "auth.existingSecret" }}{{ end -}}
{{- fail (printf "auth.insecureNoAuthentication is true and %s set too: drop one or the other" (join ", " $given)) -}}
{{- end -}}
{{- else if $a.existingSecret -}}
{{- if $given -}}
{{- fail (printf "auth.existingSecret (%s) and %s are both set: the Secret holds every key (worker-tokens.yaml, admin-tokens.yaml, cluster-secret, worker-token); drop the values" $a.existingSecret (join ", " $given)) -}}
{{- end -}}
{{- else if $missing -}}
{{- $ns := .Release.Namespace -}}
{{- fail (printf `authentication is on and %s not set: the coordinators need worker tokens, an admin token and a cluster secret. Make them:
  retryring token new --ring %s --name %s --out worker-token --append-to worker-tokens.yaml   # this ring's worker token and its line
  retryring token new --name ops --out ops.token --append-to admin-tokens.yaml   # an admin token: ops.token is yours, for retryring ctl --token-file
  retryring token new --out cluster-secret   # the secret the coordinators share (the printed line is not needed)
  kubectl -n %s create secret generic retryring-auth --from-file=worker-tokens.yaml --from-file=admin-tokens.yaml --from-file=cluster-secret --from-file=worker-token
then install with --set auth.existingSecret=retryring-auth, or give the four as values auth.workerTokens, auth.adminTokens, auth.clusterSecret and auth.workerToken (for a token you already have, printf '%%s\n' "$TOKEN" | retryring token hash prints its hash). docs/operations.md, "Deploy", says more. A throwaway cluster that anyone who reaches it may control: auth.insecureNoAuthentication=true` (join ", " $missing) (include "retryring.ring" .) .Values.worker.service $ns) -}}
{{- end -}}
{{- end -}}
