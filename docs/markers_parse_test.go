package docs

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

const sample = "# Title\n" +
	"## In production\n" +
	"<!-- runnable: certs -->\n" +
	"```\nopenssl version\n```\n" +
	"<!-- runnable: cluster background -->\n" +
	"```sh\nretryring coordinator &\n```\n" +
	"text\n" +
	"<!-- runnable: check retry=30s timeout=10s -->\n" +
	"```\ncurl -s x\n```\n" +
	"## Deploy\n" +
	"<!-- rendered: install: needs Kubernetes -->\n" +
	"````\nhelm install r deploy/helm/retryring\n````\n" +
	"```yaml\na: 1\n```\n" +
	"```\nunmarked command\n```\n"

func TestParseBlocksReadsMarkers(t *testing.T) {
	blocks, err := parseBlocks("x.md", sample)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		name, lang, h2, text string
		mode                 blockMode
		retry, limit         time.Duration
		line                 int
	}
	var have []got
	for _, b := range blocks {
		have = append(have, got{b.name, b.lang, b.h2, b.text, b.mode, b.retry, b.limit, b.line})
	}
	want := []got{
		{"certs", "", "In production", "openssl version\n", runnable, 0, defaultLimit, 4},
		{"cluster", "sh", "In production", "retryring coordinator &\n", background, 0, defaultLimit, 8},
		{"check", "", "In production", "curl -s x\n", runnable, 30 * time.Second, 10 * time.Second, 13},
		{"install", "", "Deploy", "helm install r deploy/helm/retryring\n", rendered, 0, 0, 18},
		{"", "yaml", "Deploy", "a: 1\n", unmarked, 0, 0, 21},
		{"", "", "Deploy", "unmarked command\n", unmarked, 0, 0, 24},
	}
	if !reflect.DeepEqual(have, want) {
		t.Fatalf("blocks:\n got %+v\nwant %+v", have, want)
	}
	if blocks[3].reason != "needs Kubernetes" {
		t.Errorf("reason %q", blocks[3].reason)
	}
}

func TestParseBlocksRefusesBadMarkers(t *testing.T) {
	for _, tc := range []struct{ markdown, says string }{
		{"<!-- runnable: a -->\nprose\n```\nx\n```\n", `x.md:1: the marker of "a" must be on the line right before`},
		{"<!-- runnable: a -->", `the marker of "a" is the file's last line`},
		{"<!-- runnable: a later -->\n```\nx\n```\n", `unknown option "later"`},
		{"<!-- runnable: a retry=soon -->\n```\nx\n```\n", `retry="soon" is not a positive duration`},
		{"<!-- runnable: a background retry=1s -->\n```\nx\n```\n", "a background block cannot be retried"},
		{"<!-- runnable: A_b -->\n```\nx\n```\n", "with a NAME of [a-z0-9-]"},
		{"<!-- rendered: a -->\n```\nx\n```\n", "write <!-- rendered: NAME: REASON -->"},
		{"<!-- runnable: a -->\n```\nx\n```\n<!-- runnable: a -->\n```\ny\n```\n", `x.md:5: block name "a" is already used on line 1`},
		{"<!-- runnable: a -->\n```\nx\n", "x.md:2: the fence opened here is never closed"},
	} {
		_, err := parseBlocks("x.md", tc.markdown)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q: error %v, want one saying %q", tc.markdown, err, tc.says)
		}
	}
}

func TestUnmarkedCommandsInCoveredSections(t *testing.T) {
	blocks, err := parseBlocks("x.md", sample+"## In production again\n```bash\nls\n```\n")
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, b := range unmarkedCommands(blocks, []string{"Deploy", "In production"}) {
		lines = append(lines, b.line)
	}
	if want := []int{24, 28}; !reflect.DeepEqual(lines, want) {
		t.Fatalf("unmarked command blocks on lines %v, want %v (the yaml block is not a command)", lines, want)
	}
	if got := unmarkedCommands(blocks, []string{"TLS"}); len(got) != 0 {
		t.Fatalf("outside the covered sections: %v", got)
	}
}

func TestHostsForMapsCertificateNames(t *testing.T) {
	blocks := []block{{text: `-extfile <(printf '%s\n' 'subjectAltName=DNS:c1.retryring.svc,DNS:*.h.svc,IP:10.0.0.1')`},
		{text: "subjectAltName=DNS:b.example.,DNS:c1.retryring.svc"}}
	want := "127.0.0.1 localhost\n::1 localhost\n127.0.0.1 b.example\n127.0.0.1 c1.retryring.svc\n"
	if got := hostsFor(blocks); got != want {
		t.Fatalf("hosts:\n%s\nwant:\n%s", got, want)
	}
}

func TestShellLinesJoinsContinuations(t *testing.T) {
	got := shellLines("# a comment\nhelm install r c \\\n  -f v.yaml   # values\n\nkubectl get x\n")
	want := []string{"helm install r c   -f v.yaml", "kubectl get x"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q, want %q", got, want)
	}
}

func TestHelmTemplateArgs(t *testing.T) {
	inRepo := func(p string) bool {
		return p == "deploy/helm/retryring/ci/tls-values.yaml" || p == "deploy/helm/retryring"
	}
	for _, tc := range []struct{ line, want string }{
		{"helm install retryring deploy/helm/retryring --namespace retryring --create-namespace -f my-values.yaml",
			"template retryring deploy/helm/retryring --namespace retryring -f deploy/helm/retryring/ci/tls-values.yaml"},
		{"helm upgrade --install retryring deploy/helm/retryring --wait --timeout 5m --atomic --values deploy/helm/retryring/ci/tls-values.yaml",
			"template retryring deploy/helm/retryring -f deploy/helm/retryring/ci/tls-values.yaml"},
	} {
		args, err := helmTemplateArgs(strings.Fields(tc.line), inRepo)
		if err != nil || strings.Join(args, " ") != tc.want {
			t.Errorf("%q: %q, %v; want %q", tc.line, strings.Join(args, " "), err, tc.want)
		}
	}
	for _, line := range []string{"helm uninstall retryring", "helm install r c -f", "helm"} {
		if _, err := helmTemplateArgs(strings.Fields(line), inRepo); err == nil {
			t.Errorf("%q accepted", line)
		}
	}
}

func TestParseSecretLine(t *testing.T) {
	s, err := parseSecretLine(strings.Fields("kubectl -n retryring create secret tls t --cert=c.crt --key=c.key"))
	if err != nil || !s.tls || !reflect.DeepEqual(s.keys, []string{"tls.crt", "tls.key"}) || !reflect.DeepEqual(s.files, []string{"c.crt", "c.key"}) {
		t.Fatalf("tls secret: %+v, %v", s, err)
	}
	s, err = parseSecretLine(strings.Fields("kubectl create secret generic g --namespace ns --from-file=token=admin.token --from-file=dir/tokens.yaml --from-literal=a=b"))
	if err != nil || !reflect.DeepEqual(s.keys, []string{"token", "tokens.yaml", "a"}) || !reflect.DeepEqual(s.files, []string{"admin.token", "dir/tokens.yaml"}) {
		t.Fatalf("generic secret: %+v, %v", s, err)
	}
	for _, tc := range []struct{ line, says string }{
		{"kubectl delete secret x", "kubectl create secret tls|generic NAME"},
		{"kubectl create secret tls t --cert=c.crt", "give --cert=FILE and --key=FILE"},
		{"kubectl create secret generic g", "no --from-file or --from-literal"},
		{"kubectl create secret generic g --from-env-file=e", "kubectl flag --from-env-file=e"},
		{"kubectl create secret docker-registry g --from-literal=a=b", "tls or generic"},
	} {
		if _, err := parseSecretLine(strings.Fields(tc.line)); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q: %v, want an error saying %q", tc.line, err, tc.says)
		}
	}
}
