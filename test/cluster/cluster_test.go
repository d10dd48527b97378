package cluster

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// An API server with no controllers: it stores and validates objects (what
// this test is for) but runs no pods. Everything listens on 127.0.0.1 only.
type apiServer struct {
	url        string
	token      string
	kubeconfig string
	client     *http.Client
}

func need(t *testing.T, env string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		t.Fatalf("$%s is not set; run `make test-cluster` (hack/test-cluster.sh), which builds it", env)
	}
	return p
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start runs a process for the rest of the test, its output in a log file
// that is printed if the test fails.
func start(t *testing.T, dir, name string, args ...string) (exited <-chan struct{}) {
	t.Helper()
	logPath := filepath.Join(dir, filepath.Base(name)+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			t.Logf("--- tail of %s ---\n%s", logPath, b)
		}
	})
	return done
}

func waitFor(t *testing.T, what string, exited <-chan struct{}, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		select {
		case <-exited:
			t.Fatalf("%s exited before it was ready", what)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after %v", what, timeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func startCluster(t *testing.T) *apiServer {
	t.Helper()
	etcd := need(t, "ETCD")
	kubeAPIServer := need(t, "KUBE_APISERVER")
	dir := t.TempDir()

	client, peer := freePort(t), freePort(t)
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	etcdExited := start(t, dir, etcd,
		"--name=default",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		"--unsafe-no-fsync", // a throw-away test store
	)
	waitFor(t, "etcd", etcdExited, time.Minute, func() bool {
		r, err := http.Get(clientURL + "/health")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == 200
	})

	// Service-account signing key and a static admin token.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "sa.key")
	writeFile(t, keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	token := rand.Text()
	tokens := filepath.Join(dir, "tokens.csv")
	writeFile(t, tokens, []byte(token+`,admin,admin,"system:masters"`+"\n"))

	port := freePort(t)
	apiExited := start(t, dir, kubeAPIServer,
		"--etcd-servers="+clientURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--token-auth-file="+tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+keyPath,
		"--service-account-signing-key-file="+keyPath,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--disable-admission-plugins=ServiceAccount", // no controller creates default service accounts here
		// The default reconciler refuses a loopback advertise address; nothing
		// here needs the kubernetes Service's endpoints.
		"--endpoint-reconciler-type=none",
	)
	s := &apiServer{
		url:   fmt.Sprintf("https://127.0.0.1:%d", port),
		token: token,
		// The serving certificate is self-signed into --cert-dir; loopback only.
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}},
	}
	waitFor(t, "kube-apiserver", apiExited, 3*time.Minute, func() bool {
		code, _ := s.get("/readyz")
		return code == 200
	})
	s.kubeconfig = filepath.Join(dir, "kubeconfig")
	writeFile(t, s.kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
`, s.url, token)))
	return s
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (s *apiServer) get(path string) (int, []byte) {
	req, _ := http.NewRequest("GET", s.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	r, err := s.client.Do(req)
	if err != nil {
		return 0, nil
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, b
}

// count lists objects of a resource in a namespace.
func (s *apiServer) count(t *testing.T, apiPath, ns, resource string) int {
	t.Helper()
	code, body := s.get(fmt.Sprintf("%s/namespaces/%s/%s", apiPath, ns, resource))
	if code != 200 {
		t.Fatalf("list %s: HTTP %d: %s", resource, code, body)
	}
	var list struct{ Items []json.RawMessage }
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

func (s *apiServer) helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(need(t, "HELM"), append(args, "--kubeconfig", s.kubeconfig)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// installCRDs installs the CustomResourceDefinitions the monitoring and
// cert-manager cases use, through a throw-away chart whose crds/ folder holds
// the upstream files ($CRD_FILES, colon-separated).
func (s *apiServer) installCRDs(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: test-crds\nversion: 0.0.1\n"))
	if err := os.Mkdir(filepath.Join(dir, "crds"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Split(need(t, "CRD_FILES"), ":") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "crds", filepath.Base(f)), b)
	}
	if out, err := s.helm(t, "install", "test-crds", dir, "--namespace", "default", "--wait"); err != nil {
		t.Fatalf("installing CRDs: %v\n%s", err, out)
	}
}

func TestInstallOnAPIServer(t *testing.T) {
	s := startCluster(t)
	s.installCRDs(t)
	chart := filepath.Join(repoRoot(), "helm", "trawl")
	files, _ := filepath.Glob(filepath.Join(chart, "ci", "*-values.yaml"))
	if len(files) == 0 {
		t.Fatal("no ci values")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), "-values.yaml")
		t.Run(name, func(t *testing.T) {
			ns := "trawl-" + name
			out, err := s.helm(t, "install", "trawl", chart, "--namespace", ns, "--create-namespace", "--values", f)
			if err != nil {
				t.Fatalf("helm install: %v\n%s", err, out)
			}
			if n := s.count(t, "/apis/apps/v1", ns, "statefulsets"); n == 0 {
				t.Errorf("no StatefulSet stored")
			}
			if n := s.count(t, "/apis/apps/v1", ns, "deployments"); n != 1 {
				t.Errorf("%d Deployments stored, want 1", n)
			}
			// An upgrade with the same values must also pass: selectors and
			// volumeClaimTemplates are immutable.
			if out, err := s.helm(t, "upgrade", "trawl", chart, "--namespace", ns, "--values", f); err != nil {
				t.Fatalf("helm upgrade: %v\n%s", err, out)
			}
		})
	}

	// The default install: what the chart promises is what the server stored.
	t.Run("default-objects", func(t *testing.T) {
		ns := "trawl-default"
		if n := s.count(t, "/apis/apps/v1", ns, "statefulsets"); n != 3 {
			t.Errorf("%d StatefulSets, want 3 (zones a, b and c)", n)
		}
		if n := s.count(t, "/apis/policy/v1", ns, "poddisruptionbudgets"); n != 4 {
			t.Errorf("%d PodDisruptionBudgets, want 4 (router + 3 shards)", n)
		}
		code, body := s.get("/apis/apps/v1/namespaces/" + ns + "/statefulsets/trawl-shard-zone-a")
		if code != 200 || !strings.Contains(string(body), `"cpu":"300m"`) || !strings.Contains(string(body), `"cpu":"2"`) {
			t.Errorf("trawl-shard-zone-a: HTTP %d, want requests.cpu 300m and limits.cpu 2: %.2000s", code, body)
		}
		// The server stored (so validated) the downward-API env the shards'
		// --peers and --advertise-addr expand, and the args that use it.
		for _, want := range []string{
			`"fieldPath":"metadata.labels['apps.kubernetes.io/pod-index']"`,
			`"fieldPath":"metadata.name"`,
			`"--peers=trawl-shard-zone-a-$(POD_INDEX).trawl-shard-headless.trawl-default.svc.cluster.local:7070,trawl-shard-zone-b-$(POD_INDEX).trawl-shard-headless.trawl-default.svc.cluster.local:7070,trawl-shard-zone-c-$(POD_INDEX).trawl-shard-headless.trawl-default.svc.cluster.local:7070"`,
			`"--advertise-addr=$(POD_NAME).trawl-shard-headless.trawl-default.svc.cluster.local:7070"`,
			`"podManagementPolicy":"Parallel"`,
		} {
			if !strings.Contains(string(body), want) {
				t.Errorf("trawl-shard-zone-a as stored lacks %s: %.3000s", want, body)
			}
		}
		code, body = s.get("/api/v1/namespaces/" + ns + "/services/trawl-shard-headless")
		if code != 200 || !strings.Contains(string(body), `"publishNotReadyAddresses":true`) {
			t.Errorf("trawl-shard-headless: HTTP %d, want publishNotReadyAddresses: %.2000s", code, body)
		}
	})

	// The `helm test` hook Pod is not created by install; create it. No kubelet
	// runs here, so the test itself times out, but the Pod must be stored.
	t.Run("helm-test-pod", func(t *testing.T) {
		ns := "trawl-default"
		_, _ = s.helm(t, "test", "trawl", "--namespace", ns, "--timeout", "3s")
		if code, body := s.get("/api/v1/namespaces/" + ns + "/pods/trawl-test-router"); code != 200 {
			t.Errorf("helm test pod not created: HTTP %d: %.1000s", code, body)
		}
	})

	// An upgrade that changes the shards' pod template (a new
	// --max-leader-silence) is accepted: only the template changes, and the
	// StatefulSets' immutable fields stay as installed. It creates the
	// converge Job.
	t.Run("upgrade-changes-shard-args", func(t *testing.T) {
		ns := "trawl-default"
		if out, err := s.helm(t, "upgrade", "trawl", chart, "--namespace", ns, "--reuse-values", "--set", "shards.maxLeaderSilence=10s"); err != nil {
			t.Fatalf("helm upgrade: %v\n%s", err, out)
		}
		code, body := s.get("/apis/apps/v1/namespaces/" + ns + "/statefulsets/trawl-shard-zone-c")
		if code != 200 || !strings.Contains(string(body), `"--max-leader-silence=10s"`) {
			t.Errorf("trawl-shard-zone-c after upgrade: HTTP %d, want --max-leader-silence=10s: %.2000s", code, body)
		}
		// The upgrade created the converge Job (it never runs here: no
		// kubelet), and did not wait for it.
		code, body = s.get("/apis/batch/v1/namespaces/" + ns + "/jobs")
		if code != 200 || !strings.Contains(string(body), `"name":"trawl-converge-`) || !strings.Contains(string(body), `"converge"`) {
			t.Errorf("jobs after upgrade: HTTP %d, want trawl-converge-<revision> running router admin converge: %.2000s", code, body)
		}
	})

	// An upgrade that would delete shard pods holding data (a lower
	// shards.count, a zone left out) fails and says what to run first;
	// confirmed, it goes through. The chart reads the installed
	// StatefulSets with lookup, which only a real server answers.
	t.Run("upgrade-refuses-removal", func(t *testing.T) {
		ns := "trawl-default"
		twoZones := filepath.Join(t.TempDir(), "two-zones.yaml")
		if err := os.WriteFile(twoZones, []byte("shards:\n  zones:\n    - name: a\n    - name: b\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--set", "shards.count=2"}, "shards.count 2 is below the 3 shards installed: first `router admin drain` shard-2..shard-2"},
			{[]string{"--values", twoZones}, `shards.zones leaves out zone "c"`},
		} {
			args := append([]string{"upgrade", "trawl", chart, "--namespace", ns, "--reuse-values"}, tc.args...)
			out, err := s.helm(t, args...)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("helm %v: err %v, want a refusal containing %q:\n%s", tc.args, err, tc.want, out)
			}
		}
		if n := s.count(t, "/apis/apps/v1", ns, "statefulsets"); n != 3 {
			t.Errorf("%d StatefulSets after the refusals, want 3", n)
		}
		out, err := s.helm(t, "upgrade", "trawl", chart, "--namespace", ns, "--reuse-values", "--set", "shards.count=2", "--set", "shards.confirmRemoval=true")
		if err != nil {
			t.Fatalf("confirmed upgrade: %v\n%s", err, out)
		}
		code, body := s.get("/apis/apps/v1/namespaces/" + ns + "/statefulsets/trawl-shard-zone-a")
		if code != 200 || !strings.Contains(string(body), `"replicas":2`) {
			t.Errorf("trawl-shard-zone-a after a confirmed shrink: HTTP %d, want replicas 2: %.1000s", code, body)
		}
	})

	// The API server rejects what no values schema can see; proves it is
	// really validating.
	t.Run("server-rejects", func(t *testing.T) {
		cases := map[string][]string{
			"invalid label key":            {"router.podLabels.bad label!=x"},
			"pdb maxUnavailable over 100%": {"router.pdb.maxUnavailable=150%"},
			// The server checks downward-API field paths, so the pod-index
			// label path the shards use was checked too.
			"bad downward API field": {"shards.extraEnv[0].name=X", "shards.extraEnv[0].valueFrom.fieldRef.fieldPath=metadata.nope"},
		}
		for name, sets := range cases {
			args := []string{"install", "bad", chart, "--namespace", "trawl-bad", "--create-namespace"}
			for _, set := range sets {
				args = append(args, "--set", set)
			}
			out, err := s.helm(t, args...)
			if err == nil {
				t.Errorf("%s: helm install succeeded; the API server should have refused it", name)
			} else {
				t.Logf("%s: refused as it should be: %s", name, strings.TrimSpace(out))
			}
			_, _ = s.helm(t, "uninstall", "bad", "--namespace", "trawl-bad")
		}
	})
}
