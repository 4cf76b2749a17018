package helm

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retryring/retryring/coordinator/admin"
	"github.com/retryring/retryring/internal/proc"
)

// podScript runs in a mount namespace of the pod's own (unshare --mount): it puts the pod's
// volume directory at the data volume's mountPath and gives the pod an /etc of its own: a tmpfs
// holding a link to every entry of the machine's /etc, except hosts, which links to the test's
// hosts file, and the directories where the pod's Secrets are mounted (/etc/retryring/...),
// which link to the test's copies of those Secrets. Only the pod's process sees any of it; the
// machine's /etc and /var/lib are untouched. A tmpfs over the mountPath's parent gives the data
// volume a point to land on without creating a directory on the machine.
//
// Arguments: hosts file, volume, mountPath, then pairs of (Secret copy, mount path) up to "--",
// then the command.
const podScript = `set -e
hosts=$1 volume=$2 mountpath=$3 etc=$4
shift 4
mount -t tmpfs tmpfs "$(dirname "$mountpath")"
mkdir -p "$mountpath"
mount --bind "$volume" "$mountpath"
mount --bind /etc "$etc"
mount -t tmpfs tmpfs /etc
for f in "$etc"/* "$etc"/.[!.]*; do
  if [ -e "$f" ] && [ "${f##*/}" != hosts ]; then ln -s "$f" "/etc/${f##*/}"; fi
done
ln -s "$hosts" /etc/hosts
while [ "$1" != -- ]; do
  mkdir -p "$(dirname "$2")"
  ln -s "$1" "$2"
  shift 2
done
shift
exec "$@"
`

// chartPods runs coordinator pods of the rendered StatefulSet as processes.
type chartPods struct {
	t         *testing.T
	group     *proc.Group
	c         container
	mountPath string
	httpPort  int
	readyPath string
	hosts     string // the hosts file every pod sees as /etc/hosts
	dir       string
	ips       map[string]string // pod name → its current IP
	procs     map[string]*proc.Process
	secrets   []secretMount // the Secrets the pods mount, written out from the rendering
	service   string        // the pod the client Service's name resolves to; "": not resolved
}

// clientService is the client Service's name, which --join and the workers dial.
const clientService = "retryring.retryring.svc.cluster.local"

// secretMount is a Secret volume of the pod, its keys written as files into dir.
type secretMount struct {
	dir, mountPath string
}

// writeHosts writes the pods' names and IPs into the hosts file in place (the same inode, which
// the pods' bind mounts show): a pod that came back at a new IP is found there under its name.
func (cp *chartPods) writeHosts() {
	cp.t.Helper()
	var b strings.Builder
	b.WriteString("127.0.0.1 localhost\n")
	names := make([]string, 0, len(cp.ips))
	for name := range cp.ips {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(&b, "%s %s.%s\n", cp.ips[name], name, podDomain)
	}
	// The client Service, as the pod behind it that the test names (kube-proxy would pick any
	// ready one).
	if cp.service != "" {
		fmt.Fprintf(&b, "%s %s\n", cp.ips[cp.service], clientService)
	}
	f, err := os.OpenFile(cp.hosts, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		cp.t.Fatal(err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		cp.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		cp.t.Fatal(err)
	}
}

// start launches pod name at ip with exactly the args and environment the StatefulSet gives it
// (env -i: nothing else), its volume being <dir>/volumes/<name>.
func (cp *chartPods) start(name, ip string) {
	cp.t.Helper()
	for _, port := range cp.c.Ports {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port.ContainerPort)))
		if err != nil {
			cp.t.Fatalf("port %d on %s is taken, the pod could not listen there: %v", port.ContainerPort, ip, err)
		}
		_ = l.Close()
	}
	cp.ips[name] = ip
	cp.writeHosts()
	args, env, err := pod{Name: name, IP: ip}.command(cp.c)
	if err != nil {
		cp.t.Fatal(err)
	}
	if args[0] != "coordinator" {
		cp.t.Fatalf("the container's args start with %q", args[0])
	}
	volume := filepath.Join(cp.dir, "volumes", name)
	if err := os.MkdirAll(volume, 0o755); err != nil {
		cp.t.Fatal(err)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		cp.t.Fatalf("unshare (util-linux) is needed to give each pod its /etc/hosts: %v", err)
	}
	etc := filepath.Join(cp.dir, "etc-"+name)
	if err := os.MkdirAll(etc, 0o755); err != nil {
		cp.t.Fatal(err)
	}
	full := []string{"--mount", "--propagation", "private", "/bin/sh", "-c", podScript, "pod", cp.hosts, volume, cp.mountPath, etc}
	for _, m := range cp.secrets {
		full = append(full, m.dir, m.mountPath)
	}
	full = append(full, "--", "env", "-i")
	full = append(full, env...)
	full = append(full, binary)
	full = append(full, args...)
	launch := len(cp.procs) + 1
	p, err := cp.group.Launch(proc.Spec{Name: fmt.Sprintf("%s-launch%d", name, launch), Path: unshare, Args: full})
	if err != nil {
		cp.t.Fatal(err)
	}
	cp.procs[name] = p
}

func (cp *chartPods) url(name, path string) string {
	return "http://" + net.JoinHostPort(cp.ips[name], strconv.Itoa(cp.httpPort)) + path
}

// ready asks the pod's readiness probe (its rendered path and port).
func (cp *chartPods) ready(ctx context.Context, name string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cp.url(name, cp.readyPath), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (cp *chartPods) view(ctx context.Context, name string) (admin.RingView, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var v admin.RingView
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cp.url(name, admin.PathRing), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("GET %s: %d", cp.url(name, admin.PathRing), resp.StatusCode)
	}
	return v, json.NewDecoder(resp.Body).Decode(&v)
}

// waitCluster waits until every pod of live is ready, they agree on a leader among them, and
// the leader's view lists every voter of live registered at its DNS names; it returns that view.
func (cp *chartPods) waitCluster(ctx context.Context, what string, live ...string) admin.RingView {
	cp.t.Helper()
	var last string
	for {
		v, ok, why := cp.settled(ctx, live)
		if ok {
			return v
		}
		last = why
		select {
		case <-ctx.Done():
			for _, name := range live {
				if p := cp.procs[name]; p != nil {
					cp.t.Logf("%s log tail:\n%s", name, p.Tail(30))
				}
			}
			cp.t.Fatalf("%s: %v; last: %s", what, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (cp *chartPods) settled(ctx context.Context, live []string) (admin.RingView, bool, string) {
	leader := ""
	for _, name := range live {
		if !cp.ready(ctx, name) {
			return admin.RingView{}, false, name + " not ready"
		}
		v, err := cp.view(ctx, name)
		if err != nil {
			return v, false, err.Error()
		}
		if leader == "" {
			leader = v.LeaderID
		}
		if v.LeaderID != leader || !slices.Contains(live, leader) {
			return v, false, fmt.Sprintf("%s sees leader %q", name, v.LeaderID)
		}
		// A follower forwards admin requests to the leader's admin address as its own
		// replicated state has it; until it has applied the leader's registration it
		// answers 503 no_leader, so every pod must see the leader's address.
		i := slices.IndexFunc(v.Coordinators, func(n admin.NodeView) bool { return n.ID == leader })
		if i < 0 || v.Coordinators[i].HTTPAddr != leader+"."+podDomain+":7480" {
			return v, false, fmt.Sprintf("%s has not applied leader %s's admin address", name, leader)
		}
	}
	v, err := cp.view(ctx, leader)
	if err != nil {
		return v, false, err.Error()
	}
	for _, name := range live {
		i := slices.IndexFunc(v.Coordinators, func(n admin.NodeView) bool { return n.ID == name })
		if i < 0 {
			return v, false, name + " not in the leader's view"
		}
		n := v.Coordinators[i]
		host := name + "." + podDomain
		if !n.Voter || n.RaftAddr != host+":7400" || n.RSocketAddr != host+":7878" || n.HTTPAddr != host+":7480" {
			return v, false, fmt.Sprintf("leader's view of %s: %+v", name, n)
		}
	}
	return v, true, ""
}

// TestStatefulSetCommandLines starts the three coordinators of the rendered StatefulSet with
// exactly the args and environment its pods get (node ids from the pod names retryring-0..2,
// peers and advertised addresses by their DNS names under the headless Service), kills the
// leader with SIGKILL, brings its pod back on the same volume at a new IP, as Kubernetes does,
// and checks that the cluster has a leader and the pod rejoined: it is ready, and once the
// leader is killed too, the two survivors, the rejoined one among them, elect a new leader.
//
// How the rendered names resolve here: every pod process runs in a mount namespace of its own
// (unshare --mount, which needs root, as CI has) where the test's hosts file is bind-mounted
// over /etc/hosts, mapping retryring-N.retryring-headless.retryring.svc.cluster.local to the
// pod's loopback IP; so the coordinators resolve the very names the chart renders, through the
// ordinary resolver, and see a changed IP when the file changes. The one value set for the
// test is coordinator.listenHost=$(POD_IP): in a cluster each pod has a network namespace of
// its own and the default binds every interface, while here the three share the machine's and
// must each bind their own IP (127.0.0.21-23; the pod comes back at 127.0.0.24).
func TestStatefulSetCommandLines(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs each pod in a mount namespace of its own (unshare --mount) and needs root, as `make test` in CI has")
	}
	ms := render(t, withAuth("--set", "coordinator.listenHost=$(POD_IP)")...)
	sts := find(t, ms, "StatefulSet", "retryring")
	c := container0(t, sts)
	dir := t.TempDir()
	cp := &chartPods{t: t, c: c, hosts: filepath.Join(dir, "hosts"), dir: dir, ips: map[string]string{}, procs: map[string]*proc.Process{},
		secrets: writeSecrets(t, ms, c, sts.Spec.Template.Spec, filepath.Join(dir, "secrets"))}
	if len(cp.secrets) == 0 {
		t.Fatal("the coordinators mount no Secret: the default values must render an authenticated cluster")
	}
	for _, vm := range c.VolumeMounts {
		if vm.Name == "data" {
			cp.mountPath = vm.MountPath
		}
	}
	if cp.mountPath == "" || filepath.Dir(cp.mountPath) == "/" {
		t.Fatalf("data volume mounted at %q: the test needs a path below a directory other than /", cp.mountPath)
	}
	cp.httpPort = portNamed(c, "http")
	cp.readyPath = c.ReadinessProbe.HTTPGet.Path
	if fmt.Sprint(c.ReadinessProbe.HTTPGet.Port) != "http" {
		t.Fatalf("readiness probe on port %v", c.ReadinessProbe.HTTPGet.Port)
	}
	g, err := proc.GroupIn(filepath.Join(dir, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	cp.group = g
	t.Cleanup(func() { _ = g.Close() })

	pods := []string{"retryring-0", "retryring-1", "retryring-2"}
	for i, name := range pods {
		cp.ips[name] = fmt.Sprintf("127.0.0.%d", 21+i)
	}
	for _, name := range pods {
		cp.start(name, cp.ips[name])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	v := cp.waitCluster(ctx, "three pods ready with one leader", pods...)
	first := v.LeaderID
	t.Logf("leader %s in term %d", first, v.RaftTerm)
	cp.checkAdminToken(ctx, pods[0])

	// The leader's pod dies (SIGKILL) and Kubernetes starts it again on its volume at a new IP.
	if err := cp.procs[first].Kill9(); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for _, name := range pods {
		if name != first {
			rest = append(rest, name)
		}
	}
	v = cp.waitCluster(ctx, "a new leader among the two others", rest...)
	t.Logf("after the kill: leader %s in term %d", v.LeaderID, v.RaftTerm)
	cp.start(first, "127.0.0.24")
	v = cp.waitCluster(ctx, first+" back at 127.0.0.24 and ready", pods...)
	term := v.RaftTerm

	// Only the rejoined pod and one other left: a leader needs the rejoined one's vote and log.
	second := v.LeaderID
	if second == first {
		second = rest[0]
	}
	if err := cp.procs[second].Kill9(); err != nil {
		t.Fatal(err)
	}
	var survivors []string
	for _, name := range pods {
		if name != second {
			survivors = append(survivors, name)
		}
	}
	v = cp.waitCluster(ctx, "a leader among "+strings.Join(survivors, " and "), survivors...)
	if v.RaftTerm < term {
		t.Fatalf("term went back from %d to %d", term, v.RaftTerm)
	}
	t.Logf("after killing %s too: leader %s in term %d with %s rejoined", second, v.LeaderID, v.RaftTerm, first)
}

// writeSecrets writes the keys of every Secret that c mounts (the rendered Secret, with the
// volume's items) into a directory of its own under dir, as the kubelet would.
func writeSecrets(t *testing.T, ms []manifest, c container, p podSpec, dir string) []secretMount {
	t.Helper()
	var out []secretMount
	for _, vm := range c.VolumeMounts {
		i := slices.IndexFunc(p.Volumes, func(v volume) bool { return v.Name == vm.Name && v.Secret != nil })
		if i < 0 {
			continue
		}
		v := p.Volumes[i]
		data, _ := find(t, ms, "Secret", v.Secret.SecretName).raw["stringData"].(map[string]any)
		keys := v.Secret.Items
		if len(keys) == 0 {
			for k := range data {
				keys = append(keys, keyToPath{Key: k, Path: k})
			}
		}
		d := filepath.Join(dir, vm.Name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			value, ok := data[k.Key].(string)
			if !ok {
				t.Fatalf("volume %s: key %s is not in the rendered Secret %s", vm.Name, k.Key, v.Secret.SecretName)
			}
			if err := os.WriteFile(filepath.Join(d, k.Path), []byte(value), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, secretMount{dir: d, mountPath: vm.MountPath})
	}
	return out
}

// checkAdminToken checks the admin token of ci/auth-values.yaml at pod name's admin port.
func (cp *chartPods) checkAdminToken(ctx context.Context, name string) {
	cp.t.Helper()
	token := filepath.Join(cp.dir, "ops.token")
	if err := os.WriteFile(token, []byte(authValuesAdminToken+"\n"), 0o600); err != nil {
		cp.t.Fatal(err)
	}
	checkAdminToken(ctx, cp.t, "http://"+net.JoinHostPort(cp.ips[name], strconv.Itoa(cp.httpPort)), token)
}

// TestStatefulSetScalesThroughJoin follows docs/operations.md's scaling steps with the pods'
// rendered command lines: three pods bootstrap from --peers; `helm upgrade` with coordinator.join
// set to the client Service's admin address and replicas 5 creates retryring-3 and -4 with empty
// volumes and rolls the three others onto the new args (highest first, each ready before the
// next), and all five end up voters registered at their DNS names (a joining pod's Raft address
// is its --raft-advertise: the bound one would be dialled by nobody). Then the shrink: `ctl
// remove-peer` retryring-4 and -3 with the admin token, the StatefulSet deletes them, and the
// three others keep a leader.
func TestStatefulSetScalesThroughJoin(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs each pod in a mount namespace of its own (unshare --mount) and needs root, as `make test` in CI has")
	}
	const join = clientService + ":7480"
	boot := render(t, withAuth("--set", "coordinator.listenHost=$(POD_IP)", "--set", "coordinator.join=")...)
	grown := render(t, withAuth("--set", "coordinator.listenHost=$(POD_IP)", "--set", "coordinator.join="+join, "--set", "coordinator.replicas=5")...)
	sts := find(t, boot, "StatefulSet", "retryring")
	dir := t.TempDir()
	cp := &chartPods{t: t, c: container0(t, sts), hosts: filepath.Join(dir, "hosts"), dir: dir, ips: map[string]string{},
		procs: map[string]*proc.Process{}, secrets: writeSecrets(t, boot, container0(t, sts), sts.Spec.Template.Spec, filepath.Join(dir, "secrets")),
		service: "retryring-0"}
	for _, vm := range cp.c.VolumeMounts {
		if vm.Name == "data" {
			cp.mountPath = vm.MountPath
		}
	}
	cp.httpPort = portNamed(cp.c, "http")
	cp.readyPath = cp.c.ReadinessProbe.HTTPGet.Path
	g, err := proc.GroupIn(filepath.Join(dir, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	cp.group = g
	t.Cleanup(func() { _ = g.Close() })

	pods := []string{"retryring-0", "retryring-1", "retryring-2", "retryring-3", "retryring-4"}
	for i, name := range pods {
		cp.ips[name] = fmt.Sprintf("127.0.0.%d", 31+i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, name := range pods[:3] {
		cp.start(name, cp.ips[name])
	}
	cp.waitCluster(ctx, "three pods bootstrapped from --peers", pods[:3]...)

	// helm upgrade: new pods at once (podManagementPolicy Parallel), the old ones rolled.
	cp.c = container0(t, find(t, grown, "StatefulSet", "retryring"))
	if v, ok := flagValue(cp.c.Args, "join"); !ok || v != join {
		t.Fatalf("the grown StatefulSet's args %v: no --join=%s", cp.c.Args, join)
	}
	for _, name := range pods[3:] {
		cp.start(name, cp.ips[name])
	}
	for _, name := range []string{"retryring-2", "retryring-1", "retryring-0"} {
		if err := cp.procs[name].Term(30 * time.Second); err != nil {
			t.Logf("%s: %v", name, err)
		}
		cp.start(name, cp.ips[name])
		cp.waitReady(ctx, name)
	}
	v := cp.waitCluster(ctx, "five voters after the upgrade", pods...)
	if len(v.Coordinators) != 5 {
		t.Fatalf("the leader's view lists %d coordinators after growing to 5: %+v", len(v.Coordinators), v.Coordinators)
	}

	// Shrink to 3: remove-peer the two highest, highest first, then the StatefulSet deletes them.
	token := filepath.Join(dir, "ops.token")
	if err := os.WriteFile(token, []byte(authValuesAdminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"retryring-4", "retryring-3"} {
		args := []string{"ctl", "remove-peer", name, "--coordinator", cp.url("retryring-0", ""), "--token-file", token}
		if out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput(); err != nil {
			t.Fatalf("retryring %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	for _, name := range pods[3:] {
		if err := cp.procs[name].Term(30 * time.Second); err != nil {
			t.Logf("%s: %v", name, err)
		}
	}
	v = cp.waitCluster(ctx, "three voters after the shrink", pods[:3]...)
	for _, n := range v.Coordinators {
		if !slices.Contains(pods[:3], n.ID) {
			t.Errorf("after remove-peer and the scale-down the leader still lists %+v", n)
		}
	}
}

// waitReady waits until pod name answers its readiness probe, as the StatefulSet controller does
// before it updates the next pod.
func (cp *chartPods) waitReady(ctx context.Context, name string) {
	cp.t.Helper()
	for !cp.ready(ctx, name) {
		select {
		case <-ctx.Done():
			cp.t.Fatalf("%s not ready: %v\n%s", name, ctx.Err(), cp.procs[name].Tail(30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
