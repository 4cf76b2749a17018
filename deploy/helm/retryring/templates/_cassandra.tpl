{{/*
The Cassandra flags and Secret files the worker and the schema Job share, so that the Job applies
the schema to exactly the keyspace, hosts, TLS and datacenter the workers use. Called with
(dict "root" $ "login" <an auth block: username, passwordSecret>).
*/}}

{{/* cassandraFiles: the Secrets to mount, a YAML list of {volume, secret, path}. */}}
{{- define "retryring.cassandraFiles" -}}
{{- $cs := .root.Values.worker.cassandra -}}
{{- $files := list -}}
{{- if $cs.tls.caSecret }}{{ $files = append $files (dict "volume" "cassandra-ca" "secret" $cs.tls.caSecret "path" "/etc/retryring/cassandra-ca") }}{{ end -}}
{{- if $cs.tls.certSecret }}{{ $files = append $files (dict "volume" "cassandra-cert" "secret" $cs.tls.certSecret "path" "/etc/retryring/cassandra-cert") }}{{ end -}}
{{- if .login.passwordSecret.name }}{{ $files = append $files (dict "volume" "cassandra-password" "secret" .login.passwordSecret.name "path" "/etc/retryring/cassandra-password") }}{{ end -}}
{{- toYaml $files -}}
{{- end -}}

{{/* cassandraArgs: the container args, one "- --flag=value" line each. */}}
{{- define "retryring.cassandraArgs" -}}
{{- $cs := .root.Values.worker.cassandra -}}
- --cassandra={{ $cs.hosts }}
- --keyspace={{ $cs.keyspace }}
- --consistency={{ $cs.consistency }}
{{- with $cs.localDC }}
- --local-dc={{ . }}
{{- end }}
{{- if $cs.tls.caSecret }}
- --cassandra-ca=/etc/retryring/cassandra-ca/ca.crt
{{- end }}
{{- if $cs.tls.certSecret }}
- --cassandra-cert=/etc/retryring/cassandra-cert/tls.crt
- --cassandra-key=/etc/retryring/cassandra-cert/tls.key
{{- end }}
{{- with $cs.tls.serverName }}
- --cassandra-server-name={{ . }}
{{- end }}
{{- with .login.username }}
- --cassandra-username={{ . }}
{{- end }}
{{- if .login.passwordSecret.name }}
- --cassandra-password-file=/etc/retryring/cassandra-password/{{ .login.passwordSecret.key }}
{{- end }}
{{- end -}}
