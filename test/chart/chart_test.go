package chart

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	monv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

func TestLintStrict(t *testing.T) {
	for _, f := range append([]string{""}, ciValues(t)...) {
		name := "no-values"
		if f != "" {
			name = caseName(f)
		}
		t.Run(name, func(t *testing.T) {
			args := []string{"lint", "--strict", chartDir(t), "--namespace", namespace, "--kube-version", kubeVersion}
			if f != "" {
				args = append(args, "--values", f)
			}
			run(t, tool(t, "helm", args...))
		})
	}
}

// TestMatrix renders every ci/ values file, decodes each object strictly,
// checks what a schema cannot see, and compares with the golden file.
func TestMatrix(t *testing.T) {
	for _, f := range ciValues(t) {
		t.Run(caseName(f), func(t *testing.T) {
			out := render(t, []string{f})
			objs := decodeAll(t, out)
			checkInvariants(t, objs)
			golden(t, caseName(f), out)
		})
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".yaml")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `go test ./... -update` in test/chart to create it)", err)
	}
	if !bytes.Equal(want, []byte(got)) {
		t.Errorf("rendered chart differs from %s; review the change with `git diff` after `go test ./... -update`:\n%s", path, firstDiff(string(want), got))
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + strconv.Itoa(i+1) + ":\n- " + x + "\n+ " + y
		}
	}
	return ""
}

// pods is a pod a workload would create: its labels (for StatefulSets with
// apps.kubernetes.io/pod-index, which the controller adds) and its spec.
type pod struct {
	owner  string
	labels labels.Set
	spec   *corev1.PodSpec
}

func podsOf(objs []object) []pod {
	var pods []pod
	for _, d := range ofKind[*appsv1.Deployment](objs) {
		pods = append(pods, pod{"Deployment/" + d.Name, labels.Set(d.Spec.Template.Labels), &d.Spec.Template.Spec})
	}
	for _, s := range ofKind[*appsv1.StatefulSet](objs) {
		for i := 0; i < int(*s.Spec.Replicas); i++ {
			l := labels.Merge(s.Spec.Template.Labels, labels.Set{"apps.kubernetes.io/pod-index": strconv.Itoa(i)})
			pods = append(pods, pod{"StatefulSet/" + s.Name, l, &s.Spec.Template.Spec})
		}
	}
	for _, j := range ofKind[*batchv1.Job](objs) {
		pods = append(pods, pod{"Job/" + j.Name, labels.Set(j.Spec.Template.Labels), &j.Spec.Template.Spec})
	}
	return pods
}

func selected(t *testing.T, what string, sel *metav1.LabelSelector, pods []pod) []pod {
	t.Helper()
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		t.Fatalf("%s: empty selector selects everything", what)
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var out []pod
	for _, p := range pods {
		if s.Matches(p.labels) {
			out = append(out, p)
		}
	}
	return out
}

func hasPort(spec *corev1.PodSpec, port string) bool {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if p.Name == port || strconv.Itoa(int(p.ContainerPort)) == port {
				return true
			}
		}
	}
	return false
}

func checkInvariants(t *testing.T, objs []object) {
	t.Helper()
	seen := map[string]bool{}
	for _, o := range objs {
		key := o.kind + "/" + o.name
		if seen[key] {
			t.Errorf("%s rendered twice", key)
		}
		seen[key] = true
		if errs := validation.IsDNS1123Subdomain(o.name); len(errs) > 0 {
			t.Errorf("%s: bad name: %v", key, errs)
		}
	}
	pods := podsOf(objs)

	// Workloads: selectors match their own pod template.
	for _, d := range ofKind[*appsv1.Deployment](objs) {
		checkSelectorMatchesTemplate(t, "Deployment/"+d.Name, d.Spec.Selector, d.Spec.Template.Labels)
		checkPodSpec(t, "Deployment/"+d.Name, &d.Spec.Template.Spec, nil)
	}
	for _, j := range ofKind[*batchv1.Job](objs) {
		checkPodSpec(t, "Job/"+j.Name, &j.Spec.Template.Spec, nil)
	}
	services := map[string]*corev1.Service{}
	for _, s := range ofKind[*corev1.Service](objs) {
		services[s.Name] = s
	}
	for _, s := range ofKind[*appsv1.StatefulSet](objs) {
		what := "StatefulSet/" + s.Name
		checkSelectorMatchesTemplate(t, what, s.Spec.Selector, s.Spec.Template.Labels)
		checkPodSpec(t, what, &s.Spec.Template.Spec, s.Spec.VolumeClaimTemplates)
		// serviceName must be the headless Service that gives pods stable DNS.
		svc, ok := services[s.Spec.ServiceName]
		switch {
		case !ok:
			t.Errorf("%s: serviceName %q is not a rendered Service", what, s.Spec.ServiceName)
		case svc.Spec.ClusterIP != corev1.ClusterIPNone:
			t.Errorf("%s: Service %s is not headless", what, svc.Name)
		case !svc.Spec.PublishNotReadyAddresses:
			t.Errorf("%s: Service %s must publish not-ready addresses (loading shards must resolve)", what, svc.Name)
		case !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(s.Spec.Template.Labels)):
			t.Errorf("%s: headless Service %s does not select its pods", what, svc.Name)
		}
		if s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
			t.Errorf("%s: podManagementPolicy %q, want Parallel", what, s.Spec.PodManagementPolicy)
		}
	}

	// Services select pods and target ports those pods have.
	for _, s := range services {
		var matched []pod
		for _, p := range pods {
			if len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(p.labels) {
				matched = append(matched, p)
			}
		}
		if len(matched) == 0 {
			t.Errorf("Service/%s selects no pod", s.Name)
		}
		for _, port := range s.Spec.Ports {
			if errs := validation.IsValidPortName(port.Name); len(errs) > 0 {
				t.Errorf("Service/%s port %q: %v", s.Name, port.Name, errs)
			}
			for _, p := range matched {
				if !hasPort(p.spec, port.TargetPort.String()) {
					t.Errorf("Service/%s targets port %s that %s lacks", s.Name, port.TargetPort.String(), p.owner)
				}
			}
		}
	}

	// PDBs select pods; the per-shard ones exactly one pod per zone.
	zones := len(ofKind[*appsv1.StatefulSet](objs))
	for _, b := range ofKind[*policyv1.PodDisruptionBudget](objs) {
		what := "PodDisruptionBudget/" + b.Name
		if (b.Spec.MinAvailable == nil) == (b.Spec.MaxUnavailable == nil) {
			t.Errorf("%s: set exactly one of minAvailable and maxUnavailable", what)
		}
		matched := selected(t, what, b.Spec.Selector, pods)
		if len(matched) == 0 {
			t.Errorf("%s selects no pod", what)
		}
		if _, perShard := b.Spec.Selector.MatchLabels["apps.kubernetes.io/pod-index"]; perShard {
			owners := map[string]bool{}
			for _, p := range matched {
				owners[p.owner] = true
			}
			if len(matched) != zones || len(owners) != zones {
				t.Errorf("%s selects %d pods of %d StatefulSets, want one per zone (%d)", what, len(matched), len(owners), zones)
			}
		}
	}
	// A pod under two PDBs cannot be evicted at all.
	for _, p := range pods {
		n := 0
		for _, b := range ofKind[*policyv1.PodDisruptionBudget](objs) {
			if len(selected(t, b.Name, b.Spec.Selector, []pod{p})) > 0 {
				n++
			}
		}
		if n > 1 {
			t.Errorf("a pod of %s is covered by %d PodDisruptionBudgets", p.owner, n)
		}
	}

	checkRouterShards(t, objs, services)
	checkShardPeers(t, objs)
	checkTLS(t, objs)
	checkMonitoring(t, objs, services, pods)
}

func checkSelectorMatchesTemplate(t *testing.T, what string, sel *metav1.LabelSelector, tmpl map[string]string) {
	t.Helper()
	if len(selected(t, what, sel, []pod{{labels: labels.Set(tmpl)}})) != 1 {
		t.Errorf("%s: selector %v does not match its pod template labels %v", what, sel, tmpl)
	}
}

func checkPodSpec(t *testing.T, what string, spec *corev1.PodSpec, claims []corev1.PersistentVolumeClaim) {
	t.Helper()
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	for _, c := range claims {
		volumes[c.Name] = corev1.Volume{Name: c.Name}
	}
	if spec.SecurityContext == nil || spec.SecurityContext.RunAsNonRoot == nil || !*spec.SecurityContext.RunAsNonRoot {
		t.Errorf("%s: pods must run as non-root", what)
	}
	for _, c := range spec.Containers {
		cw := what + " container " + c.Name
		names := map[string]bool{}
		for _, p := range c.Ports {
			if errs := validation.IsValidPortName(p.Name); len(errs) > 0 {
				t.Errorf("%s: port name %q: %v", cw, p.Name, errs)
			}
			if names[p.Name] {
				t.Errorf("%s: port name %q twice", cw, p.Name)
			}
			names[p.Name] = true
		}
		for kind, probe := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
			if probe == nil {
				// A Job's pod serves nothing and ends: no probe.
				if !strings.HasPrefix(what, "Job/") && (kind != "startup" || strings.Contains(what, "StatefulSet")) {
					t.Errorf("%s: no %s probe", cw, kind)
				}
				continue
			}
			if probe.HTTPGet == nil {
				t.Errorf("%s: %s probe is not HTTP (kubelet gRPC probes cannot do mTLS)", cw, kind)
				continue
			}
			if !hasPort(&corev1.PodSpec{Containers: []corev1.Container{c}}, probe.HTTPGet.Port.String()) {
				t.Errorf("%s: %s probe port %s is not a container port", cw, kind, probe.HTTPGet.Port.String())
			}
		}
		if l := c.LivenessProbe; l != nil && int(l.PeriodSeconds)*int(l.FailureThreshold) < 60 {
			t.Errorf("%s: liveness probe restarts after %d s; restarts hurt more than they heal", cw, l.PeriodSeconds*l.FailureThreshold)
		}
		for _, list := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := list[r]; !ok {
					t.Errorf("%s: resources lack %s in requests or limits", cw, r)
				}
			}
		}
		for _, m := range c.VolumeMounts {
			if _, ok := volumes[m.Name]; !ok {
				t.Errorf("%s: mounts volume %q that the pod lacks", cw, m.Name)
			}
		}
		env := map[string]bool{}
		for _, e := range c.Env {
			env[e.Name] = true
		}
		if !env["GOMAXPROCS"] || !env["GOMEMLIMIT"] {
			t.Errorf("%s: GOMAXPROCS and GOMEMLIMIT must follow from the resources", cw)
		}
	}
}

// checkRouterShards: the router's --shard flags name shard-0..N-1, and shard i
// lists pod i of every zone's StatefulSet through the headless Service.
func checkRouterShards(t *testing.T, objs []object, services map[string]*corev1.Service) {
	t.Helper()
	deps := ofKind[*appsv1.Deployment](objs)
	if len(deps) != 1 {
		t.Fatalf("want one router Deployment, got %d", len(deps))
	}
	args := deps[0].Spec.Template.Spec.Containers[0].Args
	sets := ofKind[*appsv1.StatefulSet](objs)
	var shardFlags []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--shard="); ok {
			shardFlags = append(shardFlags, v)
		}
	}
	if len(sets) == 0 {
		t.Fatal("no shard StatefulSet")
	}
	n := int(*sets[0].Spec.Replicas)
	if len(shardFlags) != n {
		t.Fatalf("router has %d --shard flags for %d shards", len(shardFlags), n)
	}
	for i, f := range shardFlags {
		name, addrs, _ := strings.Cut(f, "=")
		if name != "shard-"+strconv.Itoa(i) {
			t.Errorf("--shard %d is named %q", i, name)
		}
		list := strings.Split(addrs, ",")
		if len(list) != len(sets) {
			t.Errorf("%s has %d replicas, want one per zone (%d)", name, len(list), len(sets))
		}
		for j, s := range sets {
			if int(*s.Spec.Replicas) != n {
				t.Errorf("StatefulSet/%s has %d replicas, want %d", s.Name, *s.Spec.Replicas, n)
			}
			grpc := services[s.Spec.ServiceName].Spec.Ports[0]
			want := s.Name + "-" + strconv.Itoa(i) + "." + s.Spec.ServiceName + "." + namespace + ".svc.cluster.local:" + strconv.Itoa(int(grpc.Port))
			if grpc.Name != "grpc" || j >= len(list) || list[j] != want {
				t.Errorf("%s replica %d: got %v, want %s", name, j, list, want)
			}
		}
	}
}

// checkShardPeers: every pod i of every zone, with its env expanded as the
// kubelet does, gets --peers equal to the router's replica list for shard-i
// (pod i of every zone, same order), --advertise-addr its own entry in that
// list, --max-leader-silence and the raft timeouts, and --data-dir on the
// pod's data volume (the PVC when persistence is on).
func checkShardPeers(t *testing.T, objs []object) {
	t.Helper()
	routerShards := map[string]string{}
	for _, a := range ofKind[*appsv1.Deployment](objs)[0].Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--shard="); ok {
			name, addrs, _ := strings.Cut(v, "=")
			routerShards[name] = addrs
		}
	}
	for _, s := range ofKind[*appsv1.StatefulSet](objs) {
		c := s.Spec.Template.Spec.Containers[0]
		claims := map[string]bool{}
		for _, pvc := range s.Spec.VolumeClaimTemplates {
			claims[pvc.Name] = true
		}
		for i := 0; i < int(*s.Spec.Replicas); i++ {
			what := "StatefulSet/" + s.Name + " pod " + strconv.Itoa(i)
			flags := map[string]string{}
			for _, a := range expandEnv(t, c, s.Name+"-"+strconv.Itoa(i), i) {
				name, val, _ := strings.Cut(a, "=")
				flags[name] = val
			}
			peers, want := flags["--peers"], routerShards["shard-"+strconv.Itoa(i)]
			if peers == "" || peers != want {
				t.Errorf("%s: --peers %q, want the router's shard-%d replicas %q", what, peers, i, want)
			}
			if adv := flags["--advertise-addr"]; !slices.Contains(strings.Split(peers, ","), adv) {
				t.Errorf("%s: --advertise-addr %q is not one of its --peers %q", what, adv, peers)
			}
			for _, f := range []string{"--max-leader-silence", "--raft-heartbeat-timeout", "--raft-election-timeout"} {
				if flags[f] == "" {
					t.Errorf("%s: no %s", what, f)
				}
			}
			dir, mounted := flags["--data-dir"], false
			for _, m := range c.VolumeMounts {
				if m.MountPath == dir && m.Name == "data" {
					mounted = true
					if len(s.Spec.VolumeClaimTemplates) > 0 && !claims[m.Name] {
						t.Errorf("%s: --data-dir %s is not on the PVC", what, dir)
					}
				}
			}
			if !mounted {
				t.Errorf("%s: --data-dir %q is not the mounted data volume", what, dir)
			}
		}
	}
}

// checkTLS: with TLS on, every pod mounts a Secret with exactly the keys
// cert-manager writes, and the flags point at files in that mount.
func checkTLS(t *testing.T, objs []object) {
	t.Helper()
	certSecrets := map[string]bool{}
	for _, c := range ofKind[*cmv1.Certificate](objs) {
		certSecrets[c.Spec.SecretName] = true
		if len(c.Spec.DNSNames) == 0 || c.Spec.IssuerRef.Name == "" {
			t.Errorf("Certificate/%s: no dnsNames or issuer", c.Name)
		}
	}
	specs := map[string]*corev1.PodSpec{}
	for _, d := range ofKind[*appsv1.Deployment](objs) {
		specs["Deployment/"+d.Name] = &d.Spec.Template.Spec
	}
	for _, s := range ofKind[*appsv1.StatefulSet](objs) {
		specs["StatefulSet/"+s.Name] = &s.Spec.Template.Spec
	}
	for what, spec := range specs {
		c := spec.Containers[0]
		files := map[string]bool{} // mounted TLS files
		for _, v := range spec.Volumes {
			if v.Secret == nil || v.Name != "tls" {
				continue
			}
			var keys []string
			for _, it := range v.Secret.Items {
				keys = append(keys, it.Key)
				if it.Key != it.Path {
					t.Errorf("%s: secret key %s mounted as %s", what, it.Key, it.Path)
				}
			}
			if !reflect.DeepEqual(keys, []string{"tls.crt", "tls.key", "ca.crt"}) {
				t.Errorf("%s: TLS secret keys %v, want tls.crt, tls.key, ca.crt", what, keys)
			}
			if len(certSecrets) > 0 && !certSecrets[v.Secret.SecretName] {
				t.Errorf("%s: mounts secret %s, which no Certificate writes", what, v.Secret.SecretName)
			}
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name {
					for _, k := range keys {
						files[m.MountPath+"/"+k] = true
					}
				}
			}
		}
		for _, a := range c.Args {
			flag, val, _ := strings.Cut(a, "=")
			if strings.HasPrefix(flag, "--tls-") && !files[val] {
				t.Errorf("%s: %s points at %s, which is not a mounted TLS file", what, flag, val)
			}
		}
		if len(certSecrets) > 0 && len(files) == 0 {
			t.Errorf("%s: a Certificate is rendered but the pod mounts no TLS", what)
		}
	}
}

func checkMonitoring(t *testing.T, objs []object, services map[string]*corev1.Service, pods []pod) {
	t.Helper()
	for _, sm := range ofKind[*monv1.ServiceMonitor](objs) {
		var matched []*corev1.Service
		for _, s := range services {
			if sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector); err == nil && sel.Matches(labels.Set(s.Labels)) {
				matched = append(matched, s)
			}
		}
		if len(matched) == 0 {
			t.Errorf("ServiceMonitor/%s selects no Service", sm.Name)
		}
		for _, ep := range sm.Spec.Endpoints {
			for _, s := range matched {
				found := false
				for _, p := range s.Spec.Ports {
					found = found || p.Name == ep.Port
				}
				if !found {
					t.Errorf("ServiceMonitor/%s scrapes port %q that Service/%s lacks", sm.Name, ep.Port, s.Name)
				}
			}
		}
	}
	for _, pr := range ofKind[*monv1.PrometheusRule](objs) {
		raw, err := os.ReadFile(filepath.Join(chartDir(t), "rules", "trawl-alerts.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var file monv1.PrometheusRuleSpec
		if err := yaml.UnmarshalStrict(raw, &file); err != nil {
			t.Fatalf("rules file: %v", err)
		}
		if !reflect.DeepEqual(file, pr.Spec) {
			t.Errorf("PrometheusRule/%s differs from rules/trawl-alerts.yaml", pr.Name)
		}
	}
	for _, cm := range ofKind[*corev1.ConfigMap](objs) {
		raw, err := os.ReadFile(filepath.Join(chartDir(t), "dashboards", "trawl.json"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(cm.Data["trawl.json"]) != strings.TrimSpace(string(raw)) {
			t.Errorf("ConfigMap/%s differs from dashboards/trawl.json", cm.Name)
		}
		if cm.Labels["grafana_dashboard"] != "1" {
			t.Errorf("ConfigMap/%s lacks the Grafana sidecar label", cm.Name)
		}
	}
	for _, np := range ofKind[*networkingv1.NetworkPolicy](objs) {
		targets := selected(t, "NetworkPolicy/"+np.Name, &np.Spec.PodSelector, pods)
		if len(targets) == 0 {
			t.Errorf("NetworkPolicy/%s selects no pod", np.Name)
		}
		// Raft traffic: the replicas of a shard reach each other on the gRPC port.
		shardToShard := false
		for _, rule := range np.Spec.Ingress {
			grpc := false
			for _, port := range rule.Ports {
				grpc = grpc || port.Port.String() == "grpc"
			}
			for _, peer := range rule.From {
				if peer.PodSelector != nil && grpc {
					for _, p := range selected(t, "NetworkPolicy peer", peer.PodSelector, pods) {
						shardToShard = shardToShard || strings.HasPrefix(p.owner, "StatefulSet/")
					}
				}
			}
		}
		if len(targets) > 0 && strings.HasPrefix(targets[0].owner, "StatefulSet/") && !shardToShard {
			t.Errorf("NetworkPolicy/%s does not admit shard pods to the shards' gRPC port: raft traffic between replicas is blocked", np.Name)
		}
		for _, rule := range np.Spec.Ingress {
			for _, port := range rule.Ports {
				for _, p := range targets {
					if !hasPort(p.spec, port.Port.String()) {
						t.Errorf("NetworkPolicy/%s admits port %s that %s lacks", np.Name, port.Port.String(), p.owner)
					}
				}
			}
			for _, peer := range rule.From {
				if peer.PodSelector != nil && len(selected(t, "NetworkPolicy peer", peer.PodSelector, pods)) == 0 {
					t.Errorf("NetworkPolicy/%s admits pods that do not exist", np.Name)
				}
			}
		}
	}
}

// TestDefaults pins the field report's sizing and the chart's defaults.
func TestDefaults(t *testing.T) {
	objs := decodeAll(t, render(t, nil))
	sets := ofKind[*appsv1.StatefulSet](objs)
	var names []string
	for _, s := range sets {
		names = append(names, s.Name)
		res := s.Spec.Template.Spec.Containers[0].Resources
		if got := res.Requests[corev1.ResourceCPU]; got.String() != "300m" {
			t.Errorf("%s: requests.cpu %s, want 300m", s.Name, got.String())
		}
		if got := res.Limits[corev1.ResourceCPU]; got.String() != "2" {
			t.Errorf("%s: limits.cpu %s, want 2", s.Name, got.String())
		}
		// 200 000 vectors x 1536 x 4 B x 1.5 + 256 Mi, requested and limited alike.
		want := resource.MustParse("2014Mi")
		if got := res.Limits[corev1.ResourceMemory]; got.Cmp(want) != 0 {
			t.Errorf("%s: limits.memory %s, want %s", s.Name, got.String(), want.String())
		}
		if got := res.Requests[corev1.ResourceMemory]; got.Cmp(want) != 0 {
			t.Errorf("%s: requests.memory %s, want %s", s.Name, got.String(), want.String())
		}
		for _, e := range s.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "GOMEMLIMIT" && e.Value != "1812MiB" {
				t.Errorf("%s: GOMEMLIMIT %s, want 90 %% of 2014Mi", s.Name, e.Value)
			}
		}
		if *s.Spec.Replicas != 3 {
			t.Errorf("%s: %d shards, want 3", s.Name, *s.Spec.Replicas)
		}
	}
	if !reflect.DeepEqual(names, []string{"trawl-shard-zone-a", "trawl-shard-zone-b", "trawl-shard-zone-c"}) {
		t.Errorf("shard StatefulSets %v, want three zones (a write survives one lost zone)", names)
	}
	for _, s := range sets {
		c := s.Spec.Template.Spec.Containers[0]
		args := expandEnv(t, c, s.Name+"-1", 1)
		for _, want := range []string{"--max-leader-silence=5s", "--raft-heartbeat-timeout=1s", "--raft-election-timeout=1s"} {
			if !slices.Contains(args, want) {
				t.Errorf("%s: want %s in %v", s.Name, want, args)
			}
		}
		if !slices.Contains(args, "--advertise-addr="+s.Name+"-1.trawl-shard-headless.trawl.svc.cluster.local:7070") {
			t.Errorf("%s pod 1: --advertise-addr is not its own name: %v", s.Name, args)
		}
		sp, rp := c.StartupProbe, c.ReadinessProbe
		if sp == nil || sp.HTTPGet.Path != "/healthz" || sp.PeriodSeconds*sp.FailureThreshold < 30*60 {
			t.Errorf("%s: startup probe %+v, want /healthz tolerating a 30-minute load", s.Name, sp)
		}
		if rp == nil || rp.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: readiness probe %+v, want the shard's /readyz (NOT_SERVING until caught up)", s.Name, rp)
		}
	}
	d := ofKind[*appsv1.Deployment](objs)[0]
	if *d.Spec.Replicas < 2 {
		t.Errorf("router replicas %d, want at least 2", *d.Spec.Replicas)
	}
	for _, o := range objs {
		switch o.obj.(type) {
		case *monv1.ServiceMonitor, *monv1.PrometheusRule, *cmv1.Certificate, *corev1.ConfigMap, *networkingv1.NetworkPolicy:
			t.Errorf("%s/%s rendered by default; a bare cluster lacks its CRD or does not want it", o.kind, o.name)
		}
	}
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--tls") {
			t.Errorf("router has %s with TLS off", a)
		}
	}
}

// TestTLSSwitchesDeadline: TLS on gives the router --tls-ca, which is what
// moves its default deadline to 250 ms.
func TestTLSSwitchesDeadline(t *testing.T) {
	objs := decodeAll(t, render(t, nil, "tls.enabled=true", "tls.existingSecret=my-tls"))
	args := strings.Join(ofKind[*appsv1.Deployment](objs)[0].Spec.Template.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "--tls-ca=/etc/trawl/tls/ca.crt") {
		t.Errorf("router args lack --tls-ca: %s", args)
	}
	for _, s := range ofKind[*appsv1.StatefulSet](objs) {
		args := strings.Join(s.Spec.Template.Spec.Containers[0].Args, " ")
		if !strings.Contains(args, "--tls-client-ca=") || !strings.Contains(args, "--tls-cert=") {
			t.Errorf("%s: shard args lack mTLS flags: %s", s.Name, args)
		}
	}
	checkInvariants(t, objs)
}

// TestBadValuesFail: mistakes fail at install, with a message.
func TestBadValuesFail(t *testing.T) {
	cases := map[string][]string{
		"misspelt key":             {"router.replica=3"},
		"misspelt nested key":      {"shards.persistance.enabled=false"},
		"unknown metric":           {"shards.metric=hamming"},
		"unknown index":            {"shards.index=hnsw"},
		"zero shards":              {"shards.count=0"},
		"port name as number":      {"shards.grpcPort=70000"},
		"bad zone name":            {"shards.zones[0].name=Zone_A"},
		"duplicate zone":           {"shards.zones[1].name=a"},
		"tls without a secret":     {"tls.enabled=true"},
		"cert-manager without tls": {"tls.certManager.enabled=true", "tls.certManager.issuerRef.name=x"},
		"cert-manager no issuer":   {"tls.enabled=true", "tls.certManager.enabled=true"},
		"bad anti-affinity":        {"shards.zoneAntiAffinity=maybe"},
		"string replicas":          {"router.replicas=two"},
		"leader silence no unit":   {"shards.maxLeaderSilence=5"},
		"heartbeat no unit":        {"shards.raftHeartbeatTimeout=1"},
		"election timeout no unit": {"shards.raftElectionTimeout=1000"},
		"election timeout words":   {"shards.raftElectionTimeout=one second"},
		"ordered pod management":   {"shards.podManagementPolicy=OrderedReady"},
	}
	for name, sets := range cases {
		t.Run(name, func(t *testing.T) {
			args := []string{"template", releaseName, chartDir(t), "--namespace", namespace, "--kube-version", kubeVersion}
			for _, s := range sets {
				args = append(args, "--set", s)
			}
			cmd := tool(t, "helm", args...)
			if out, err := cmd.CombinedOutput(); err == nil {
				t.Errorf("helm template %v succeeded; want a failure", sets)
			} else if !strings.Contains(string(out), "Error") {
				t.Errorf("no error message: %s", out)
			}
		})
	}
}

// TestNoCapabilitiesChecks: monitoring objects are switched by values only.
// `.Capabilities` checks render differently under `helm template` and GitOps
// tools than on a live cluster, and hide a missing CRD instead of failing.
func TestNoCapabilitiesChecks(t *testing.T) {
	err := filepath.WalkDir(filepath.Join(chartDir(t), "templates"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), ".Capabilities") {
			t.Errorf("%s uses .Capabilities", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestIndexValue: shards.index reaches every shard container as --index, and
// ivf's int8 codes are in the memory the pods ask for.
func TestIndexValue(t *testing.T) {
	cases := []struct {
		name    string
		sets    []string
		wantArg string // "" : no --index at all (the shard's default, flat)
		wantMem string
	}{
		// 200 000 x 1536 x 4 B x 1.5 + 256 Mi.
		{"default", nil, "", "2014Mi"},
		{"flat", []string{"shards.index=flat"}, "", "2014Mi"},
		// 200 000 x (1536 x 4 + 1536 + 256) B x 1.5 + 256 Mi.
		{"ivf", []string{"shards.index=ivf"}, "--index=ivf", "2527Mi"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := decodeAll(t, render(t, nil, tc.sets...))
			sets := ofKind[*appsv1.StatefulSet](objs)
			if len(sets) == 0 {
				t.Fatal("no shard StatefulSets rendered")
			}
			for _, s := range sets {
				c := s.Spec.Template.Spec.Containers[0]
				var got []string
				for _, a := range c.Args {
					if strings.HasPrefix(a, "--index") {
						got = append(got, a)
					}
				}
				var want []string
				if tc.wantArg != "" {
					want = []string{tc.wantArg}
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: --index args %v, want %v", s.Name, got, want)
				}
				if got := c.Resources.Limits[corev1.ResourceMemory]; got.Cmp(resource.MustParse(tc.wantMem)) != 0 {
					t.Errorf("%s: limits.memory %s, want %s", s.Name, got.String(), tc.wantMem)
				}
			}
			checkInvariants(t, objs)
		})
	}
}
