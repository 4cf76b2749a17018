package helm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The parts of the Kubernetes objects the tests read, by their API field names.
type (
	manifest struct {
		APIVersion string   `yaml:"apiVersion"`
		Kind       string   `yaml:"kind"`
		Metadata   metadata `yaml:"metadata"`
		Spec       spec     `yaml:"spec"`
		Data       map[string]string
		// raw is the whole document, for checks of fields not modelled here.
		raw map[string]any
	}
	metadata struct {
		Name        string            `yaml:"name"`
		Labels      map[string]string `yaml:"labels"`
		Annotations map[string]string `yaml:"annotations"`
	}
	spec struct {
		// Workloads.
		Replicas             *int              `yaml:"replicas"`
		ServiceName          string            `yaml:"serviceName"`
		PodManagementPolicy  string            `yaml:"podManagementPolicy"`
		Selector             selector          `yaml:"selector"`
		Template             podTemplate       `yaml:"template"`
		VolumeClaimTemplates []pvcTemplate     `yaml:"volumeClaimTemplates"`
		MaxUnavailable       any               `yaml:"maxUnavailable"`
		ClusterIP            string            `yaml:"clusterIP"`
		PublishNotReady      bool              `yaml:"publishNotReadyAddresses"`
		Ports                []servicePort     `yaml:"ports"`
		Type                 string            `yaml:"type"`
		Groups               []ruleGroup       `yaml:"groups"`
		ServiceSelector      map[string]string `yaml:"-"`
	}
	selector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	podTemplate struct {
		Metadata metadata `yaml:"metadata"`
		Spec     podSpec  `yaml:"spec"`
	}
	podSpec struct {
		TerminationGracePeriodSeconds *int        `yaml:"terminationGracePeriodSeconds"`
		Containers                    []container `yaml:"containers"`
		Volumes                       []volume    `yaml:"volumes"`
	}
	container struct {
		Name           string        `yaml:"name"`
		Image          string        `yaml:"image"`
		Args           []string      `yaml:"args"`
		Env            []envVar      `yaml:"env"`
		Ports          []portSpec    `yaml:"ports"`
		ReadinessProbe *probe        `yaml:"readinessProbe"`
		LivenessProbe  *probe        `yaml:"livenessProbe"`
		VolumeMounts   []volumeMount `yaml:"volumeMounts"`
	}
	envVar struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	}
	portSpec struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	}
	probe struct {
		HTTPGet *struct {
			Path   string `yaml:"path"`
			Port   any    `yaml:"port"`
			Scheme string `yaml:"scheme"`
		} `yaml:"httpGet"`
	}
	volumeMount struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
		SubPath   string `yaml:"subPath"`
	}
	volume struct {
		Name   string `yaml:"name"`
		Secret *struct {
			SecretName string      `yaml:"secretName"`
			Items      []keyToPath `yaml:"items"`
		} `yaml:"secret"`
	}
	keyToPath struct {
		Key  string `yaml:"key"`
		Path string `yaml:"path"`
	}
	pvcTemplate struct {
		Metadata metadata `yaml:"metadata"`
	}
	servicePort struct {
		Name       string `yaml:"name"`
		Port       int    `yaml:"port"`
		TargetPort any    `yaml:"targetPort"`
	}
	ruleGroup struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert string `yaml:"alert"`
			Expr  string `yaml:"expr"`
		} `yaml:"rules"`
	}
)

// release is what the tests render: release name and namespace, so that pods are retryring-0..2.
const (
	releaseName = "retryring"
	namespace   = "retryring"
)

// render runs `helm template` on the chart with extra arguments (-f FILE, --set k=v) and parses
// every document back.
func render(t testing.TB, extra ...string) []manifest {
	t.Helper()
	out, err := helmTemplate(t, extra...)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := parseManifests(out)
	if err != nil {
		t.Fatalf("helm template %v: %v", extra, err)
	}
	return ms
}

// helmTemplate runs `helm template` and returns its output, or an error carrying helm's stderr.
func helmTemplate(t testing.TB, extra ...string) ([]byte, error) {
	t.Helper()
	args := append([]string{"template", releaseName, chartDir(), "--namespace", namespace}, extra...)
	cmd := exec.Command(helmPath(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

func parseManifests(b []byte) ([]manifest, error) {
	var out []manifest
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var node yaml.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var m manifest
		if err := node.Decode(&m); err != nil {
			return nil, err
		}
		if err := node.Decode(&m.raw); err != nil {
			return nil, err
		}
		if m.Kind == "" { // an empty document (a template that rendered nothing)
			continue
		}
		if m.Kind == "Service" {
			var s struct {
				Spec struct {
					Selector map[string]string `yaml:"selector"`
				} `yaml:"spec"`
			}
			if err := node.Decode(&s); err != nil {
				return nil, err
			}
			m.Spec.ServiceSelector = s.Spec.Selector
		}
		out = append(out, m)
	}
}

// find returns the one object of kind and name, failing the test when there is none.
func find(t testing.TB, ms []manifest, kind, name string) manifest {
	t.Helper()
	for _, m := range ms {
		if m.Kind == kind && m.Metadata.Name == name {
			return m
		}
	}
	var have []string
	for _, m := range ms {
		have = append(have, m.Kind+"/"+m.Metadata.Name)
	}
	t.Fatalf("no %s %q rendered; have %v", kind, name, have)
	return manifest{}
}

// pod is what a container of a pod gets from the kubelet: its args with $(VAR) expanded from its
// environment, and the environment itself (downward API fields filled in).
type pod struct {
	Name, IP string
}

// command returns the args and environment c gets in pod p, the way the kubelet makes them:
// env entries in order, fieldRef values from the pod, $(VAR) references to earlier entries
// expanded, then $(VAR) in args expanded from the whole environment. Any other source (a Secret
// key, a ConfigMap) fails: the tests render values that use none.
func (p pod) command(c container) (args, env []string, err error) {
	vars := map[string]string{}
	for _, e := range c.Env {
		var v string
		switch {
		case e.ValueFrom == nil:
			v = expand(e.Value, vars)
		case e.ValueFrom.FieldRef != nil:
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.name":
				v = p.Name
			case "metadata.namespace":
				v = namespace
			case "status.podIP":
				v = p.IP
			default:
				return nil, nil, fmt.Errorf("env %s: fieldRef %s not emulated", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		default:
			return nil, nil, fmt.Errorf("env %s: a source the test does not emulate", e.Name)
		}
		vars[e.Name] = v
		env = append(env, e.Name+"="+v)
	}
	for _, a := range c.Args {
		args = append(args, expand(a, vars))
	}
	return args, env, nil
}

// expand replaces $(NAME) by NAME's value when defined and $$ by $, leaving any other text (an
// undefined $(NAME) included) as it is: Kubernetes' rule for args and env values.
func expand(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// flagValue returns the value of --name=value in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}
