//go:build linux

package alerts

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// The live test's knobs. Load: 20 searches a second, at most loadMax of them
// and for at most loadFor, whatever happens to the test.
const (
	timeScale = 30 // every duration in the rules is divided by this
	loadEvery = 50 * time.Millisecond
	loadMax   = 20 * 360
	loadFor   = 6 * time.Minute
	docs      = "3000"
)

// allowedHealthy are the alerts that may be active while the cluster is
// healthy, with the reason. router dev runs its shards inside the router's
// process and serves no shard /metrics, so the test scrapes no
// "trawl-shard" job and TrawlShardTargetsAbsent is right to fire: the test
// asserts that it does, which exercises an absent() alert on the live server.
var allowedHealthy = map[string]string{
	"TrawlShardTargetsAbsent": `router dev has no shard /metrics targets, so no job="trawl-shard" is scraped`,
}

// TestAlertsFireAndResolveOnLivePrometheus runs the chart's alert rules, with
// time compressed by Rewrite, on a real Prometheus scraping a real router dev
// cluster under steady query load. It checks a healthy period fires nothing,
// stops every replica of one shard, checks the degraded-answer, shard and
// replica alerts fire naming that shard, restores it and checks they
// resolve, and prints how long each step took.
func TestAlertsFireAndResolveOnLivePrometheus(t *testing.T) {
	routerBin, promBin := os.Getenv("TRAWL_ROUTER"), os.Getenv("PROMETHEUS")
	if routerBin == "" || promBin == "" {
		t.Skip("set TRAWL_ROUTER and PROMETHEUS to the router and Prometheus binaries (make test-alerts builds both)")
	}
	dir := workDir(t)
	routerAddr, promAddr := freeAddr(t), freeAddr(t)
	router, prom := "http://"+routerAddr, "http://"+promAddr

	// The rules: the chart's file, time compressed, into a temp file.
	rulesSrc := chartRules(t)
	if f := os.Getenv("TRAWL_ALERTS_RULES"); f != "" {
		rulesSrc = f // another rule file, e.g. to see the test fail on a broken rule
	}
	src, err := os.ReadFile(rulesSrc)
	if err != nil {
		t.Fatal(err)
	}
	rw, err := Rewrite(src, timeScale)
	if err != nil {
		t.Fatal(err)
	}
	rulesFile := filepath.Join(dir, "trawl-alerts.yaml")
	if err := os.WriteFile(rulesFile, rw.YAML, 0o644); err != nil {
		t.Fatal(err)
	}
	logRewrite(t, rw, rulesSrc, rulesFile)

	// The cluster.
	t0 := time.Now()
	rp := startProc(t, dir, "router", routerBin, "dev", "--http-addr", routerAddr, "--docs", docs)
	waitFor(t, "router /readyz", 90*time.Second, time.Second, func() (bool, error) {
		code, _ := httpGet(router + "/readyz")
		return code == http.StatusOK, rp.dead()
	})
	var status struct {
		Shards []struct {
			Name     string `json:"name"`
			Replicas []struct {
				Addr string `json:"addr"`
			} `json:"replicas"`
		} `json:"shards"`
	}
	mustGetJSON(t, router+"/cluster/status", &status)
	var doc7 struct {
		Shard string `json:"shard"`
	}
	mustGetJSON(t, router+"/v1/vectors/doc-7", &doc7)
	// The fault goes to a shard that does not hold doc-7: like_id needs its
	// home shard to look the vector up.
	fault := ""
	var faultReplicas []string
	for _, s := range status.Shards {
		if s.Name != doc7.Shard && fault == "" {
			fault = s.Name
			for _, r := range s.Replicas {
				faultReplicas = append(faultReplicas, r.Addr)
			}
		}
	}
	if fault == "" || len(faultReplicas) == 0 {
		t.Fatalf("no shard besides doc-7's home %q with replicas in %+v", doc7.Shard, status)
	}
	t.Logf("router dev on %s: %d shards, ready in %.1f s; doc-7 lives on %s, the fault will stop all %d replicas of %s",
		routerAddr, len(status.Shards), time.Since(t0).Seconds(), doc7.Shard, len(faultReplicas), fault)

	// Prometheus.
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: trawl-router
    static_configs:
      - targets: [%q]
        labels: {namespace: trawl-alerts-test}
`, rulesFile, routerAddr)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	pp := startProc(t, dir, "prometheus", promBin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr, "--storage.tsdb.retention.time=1h")
	waitFor(t, "prometheus /-/ready", 90*time.Second, time.Second, func() (bool, error) {
		code, _ := httpGet(prom + "/-/ready")
		return code == http.StatusOK, pp.dead()
	})
	var build struct {
		Data struct {
			Version   string `json:"version"`
			GoVersion string `json:"goVersion"`
		} `json:"data"`
	}
	mustGetJSON(t, prom+"/api/v1/status/buildinfo", &build)
	t.Logf("prometheus %s (%s) on %s scraping %s/metrics every 1 s as job trawl-router, rules evaluated every 1 s",
		build.Data.Version, build.Data.GoVersion, promAddr, router)

	// Load: bounded in count and time, stopped at the end of the test too.
	var sent, degraded, failed atomic.Int64
	loadCtx, stopLoad := context.WithTimeout(context.Background(), loadFor)
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		load(loadCtx, router, &sent, &degraded, &failed)
	}()
	t.Cleanup(func() {
		stopLoad()
		<-loadDone
		t.Logf("load: %d searches sent, %d degraded, %d failed", sent.Load(), degraded.Load(), failed.Load())
	})
	rateQ := fmt.Sprintf(`sum(rate(trawl_scatter_queries_total{job="trawl-router"}[%s]))`, durStr(rw.Window))
	waitFor(t, "the query rate to show in Prometheus", 60*time.Second, time.Second, func() (bool, error) {
		v, err := queryScalar(prom, rateQ)
		return err == nil && v > 5, nil
	})

	// Healthy control. Before the first scrape an absent() alert may be
	// pending; once data flows only the allowed alerts may be active.
	waitFor(t, "only expected alerts on a healthy cluster", 30*time.Second, time.Second, func() (bool, error) {
		as, err := activeAlerts(prom)
		return err == nil && len(unexpected(as, nil)) == 0, err
	})
	seen := blips{}
	control := rw.Longest + rw.Window + 10*time.Second
	t.Logf("control: %s of healthy load (longest for %s + window %s + 10 s): no alert may fire except %v",
		control, rw.Longest, rw.Window, slices.Sorted(maps.Keys(allowedHealthy)))
	end := time.Now().Add(control)
	for time.Now().Before(end) {
		as, err := activeAlerts(prom)
		if err != nil {
			t.Fatal(err)
		}
		if bad := seen.firing(t, as, nil); len(bad) > 0 {
			t.Fatalf("healthy cluster, yet firing: %s", describe(bad))
		}
		time.Sleep(time.Second)
	}
	checkRulesHealthy(t, prom)
	as, err := activeAlerts(prom)
	if err != nil {
		t.Fatal(err)
	}
	for name, why := range allowedHealthy {
		if !slices.ContainsFunc(as, func(a alert) bool { return a.Labels["alertname"] == name && a.State == "firing" }) {
			t.Errorf("%s not firing after the control period, though %s", name, why)
		}
	}
	rate, _ := queryScalar(prom, rateQ)
	t.Logf("control passed: nothing fired in %s at %.1f searches/s (%s fired as expected)", control, rate,
		strings.Join(slices.Sorted(maps.Keys(allowedHealthy)), ", "))

	// The expected alerts during the fault, each with the labels that must
	// name it.
	type key struct{ name, labels string }
	want := []key{
		{"TrawlDegradedAnswersHigh", "path=search,collection=trawl"},
		{"TrawlDegradedAnswersCritical", "path=search,collection=trawl"},
		{"TrawlShardUnavailable", "shard=" + fault},
	}
	for _, r := range faultReplicas {
		want = append(want, key{"TrawlReplicaSuspect", "shard=" + fault + ",replica=" + r})
	}
	matches := func(a alert, k key) bool {
		if a.Labels["alertname"] != k.name {
			return false
		}
		for _, kv := range strings.Split(k.labels, ",") {
			l, v, _ := strings.Cut(kv, "=")
			if a.Labels[l] != v {
				return false
			}
		}
		return true
	}
	expected := func(a alert) bool {
		return slices.ContainsFunc(want, func(k key) bool { return matches(a, k) })
	}

	// Fault: every replica of one shard.
	tFault := time.Now()
	for i := range faultReplicas {
		mustPost(t, fmt.Sprintf("%s/dev/replicas/%s/%d/stop", router, fault, i))
	}
	t.Logf("fault: stopped replicas 0..%d of %s", len(faultReplicas)-1, fault)
	firing, pending := map[key]time.Duration{}, map[key]time.Duration{}
	var firingAlerts []alert
	limit := rw.Longest + rw.Window + 90*time.Second
	waitFor(t, "the fault's alerts to fire", limit, 500*time.Millisecond, func() (bool, error) {
		as, err := activeAlerts(prom)
		if err != nil {
			return false, err
		}
		if bad := seen.firing(t, as, expected); len(bad) > 0 {
			return false, fmt.Errorf("unexpected alerts during the fault on %s: %s", fault, describe(bad))
		}
		for _, k := range want {
			if _, ok := firing[k]; ok {
				continue
			}
			for _, a := range as {
				if matches(a, k) && a.State == "firing" {
					firing[k] = time.Since(tFault)
					pending[k] = a.ActiveAt.Sub(tFault)
					firingAlerts = append(firingAlerts, a)
					break
				}
			}
		}
		if len(firing) == len(want) {
			return true, nil
		}
		var missing []string
		for _, k := range want {
			if _, ok := firing[k]; !ok {
				missing = append(missing, k.name+"{"+k.labels+"}")
			}
		}
		return false, notYet(fmt.Sprintf("not firing: %s; active: %s", strings.Join(missing, ", "), describe(as)))
	})
	for _, a := range firingAlerts {
		if a.Labels["alertname"] == "TrawlShardUnavailable" {
			t.Logf("firing: %s (reason=%s) %q", a.Labels["alertname"], a.Labels["reason"], a.Annotations["summary"])
		} else {
			t.Logf("firing: %s %q", describe([]alert{a}), a.Annotations["summary"])
		}
	}

	// Restore, and every alert of the fault resolves.
	tRestore := time.Now()
	for i := range faultReplicas {
		mustPost(t, fmt.Sprintf("%s/dev/replicas/%s/%d/restore", router, fault, i))
	}
	t.Logf("restore: replicas 0..%d of %s", len(faultReplicas)-1, fault)
	resolved := map[key]time.Duration{}
	waitFor(t, "the fault's alerts to resolve", limit, 500*time.Millisecond, func() (bool, error) {
		as, err := activeAlerts(prom)
		if err != nil {
			return false, err
		}
		if bad := seen.firing(t, as, expected); len(bad) > 0 {
			return false, fmt.Errorf("unexpected alerts after restoring %s: %s", fault, describe(bad))
		}
		for _, k := range want {
			if _, ok := resolved[k]; ok {
				continue
			}
			if !slices.ContainsFunc(as, func(a alert) bool { return matches(a, k) }) {
				resolved[k] = time.Since(tRestore)
			}
		}
		if len(resolved) == len(want) {
			return true, nil
		}
		return false, notYet(fmt.Sprintf("%d of %d resolved; still active: %s", len(resolved), len(want), describe(as)))
	})
	// Resolved means resolved: nothing of the fault comes back, and the
	// cluster is as it was in the control period.
	settle := time.Now().Add(rw.Window + 3*time.Second)
	for time.Now().Before(settle) {
		as, err := activeAlerts(prom)
		if err != nil {
			t.Fatal(err)
		}
		if bad := seen.firing(t, as, nil); len(bad) > 0 {
			t.Fatalf("after every alert of the fault resolved, firing: %s", describe(bad))
		}
		time.Sleep(time.Second)
	}
	checkRulesHealthy(t, prom)

	var b strings.Builder
	fmt.Fprintf(&b, "alert timings (rules time-compressed %d×; scrape and evaluation every 1 s; polled every 0.5 s;\n", timeScale)
	b.WriteString("pending is Prometheus's activeAt, when the expression first held; firing adds the rewritten `for`):\n")
	fmt.Fprintf(&b, "  %-30s %-48s %14s %14s %18s\n", "alert", "labels", "fault→pending", "fault→firing", "restore→resolved")
	for _, k := range want {
		fmt.Fprintf(&b, "  %-30s %-48s %12.1f s %12.1f s %16.1f s\n", k.name, k.labels,
			pending[k].Seconds(), firing[k].Seconds(), resolved[k].Seconds())
	}
	t.Log(b.String())
}

// load sends POST /v1/search like_id doc-7 every loadEvery until ctx ends or
// loadMax have gone. A 1 s deadline keeps a shared, busy CI machine from
// degrading healthy answers by the 50 ms default; the fault (refused
// connections, then suspect replicas skipped at once) needs no deadline to
// show.
func load(ctx context.Context, router string, sent, degraded, failed *atomic.Int64) {
	client := &http.Client{Timeout: 5 * time.Second}
	tick := time.NewTicker(loadEvery)
	defer tick.Stop()
	for sent.Load() < loadMax {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, router+"/v1/search?deadline_ms=1000",
			strings.NewReader(`{"like_id":"doc-7","k":10}`))
		if err != nil {
			return
		}
		sent.Add(1)
		resp, err := client.Do(req)
		if err != nil {
			failed.Add(1)
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			failed.Add(1)
		} else if resp.Header.Get("X-Trawl-Degraded") == "true" {
			degraded.Add(1)
		}
	}
}

func logRewrite(t *testing.T, rw *Rewritten, src, file string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "rules: %s rewritten into %s, every duration divided by %d (the source file is untouched):\n", src, file, timeScale)
	var order []string
	byRule := map[string][]string{}
	for _, c := range rw.Changes {
		if _, ok := byRule[c.Rule]; !ok {
			order = append(order, c.Rule)
		}
		byRule[c.Rule] = append(byRule[c.Rule], fmt.Sprintf("%s %s → %s", c.Field, c.From, c.To))
	}
	for _, r := range order {
		fmt.Fprintf(&b, "  %-30s %s\n", r, strings.Join(byRule[r], "; "))
	}
	var f ruleFile
	if err := yaml.Unmarshal(rw.YAML, &f); err == nil {
		b.WriteString("rewritten expressions (otherwise the chart's, node for node):\n")
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				fmt.Fprintf(&b, "  %s (for %s): %s\n", r.Alert, r.For, strings.TrimSpace(r.Expr))
			}
		}
	}
	t.Log(b.String())
}

// ---- Prometheus HTTP API

type alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	ActiveAt    time.Time         `json:"activeAt"`
}

func activeAlerts(prom string) ([]alert, error) {
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Alerts []alert `json:"alerts"`
		} `json:"data"`
	}
	if err := getJSON(prom+"/api/v1/alerts", &r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("/api/v1/alerts: status %q", r.Status)
	}
	return r.Data.Alerts, nil
}

// blips remembers the unexpected alerts seen pending, each logged once.
// Pending is not firing: a `for` exists to absorb a blip such as one slow
// scrape on a busy machine (TrawlTargetsDown), so only firing fails the test.
type blips map[string]bool

// firing returns the firing alerts that are neither allowed on a healthy
// cluster nor accepted by ok, and logs the pending ones.
func (b blips) firing(t *testing.T, as []alert, ok func(alert) bool) []alert {
	t.Helper()
	var out []alert
	for _, a := range unexpected(as, ok) {
		if a.State == "firing" {
			out = append(out, a)
		} else if d := describe([]alert{a}); !b[d] {
			b[d] = true
			t.Logf("note: %s (not firing; its `for` absorbs it unless it lasts)", d)
		}
	}
	return out
}

// unexpected returns the active alerts, pending or firing, that are neither
// allowed on a healthy cluster nor accepted by ok.
func unexpected(as []alert, ok func(alert) bool) []alert {
	var out []alert
	for _, a := range as {
		if _, allowed := allowedHealthy[a.Labels["alertname"]]; allowed {
			continue
		}
		if ok != nil && ok(a) {
			continue
		}
		out = append(out, a)
	}
	return out
}

func describe(as []alert) string {
	var parts []string
	for _, a := range as {
		var ls []string
		for _, k := range slices.Sorted(maps.Keys(a.Labels)) {
			if k != "alertname" && k != "severity" && k != "namespace" {
				ls = append(ls, k+"="+a.Labels[k])
			}
		}
		parts = append(parts, fmt.Sprintf("%s{%s} %s", a.Labels["alertname"], strings.Join(ls, ","), a.State))
	}
	return strings.Join(parts, "; ")
}

// checkRulesHealthy fails the test if any rule failed to evaluate.
func checkRulesHealthy(t *testing.T, prom string) {
	t.Helper()
	var r struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	mustGetJSON(t, prom+"/api/v1/rules", &r)
	n := 0
	for _, g := range r.Data.Groups {
		for _, rule := range g.Rules {
			n++
			if rule.Health != "ok" {
				t.Errorf("rule %s: health %q: %s", rule.Name, rule.Health, rule.LastError)
			}
		}
	}
	if n == 0 {
		t.Fatal("prometheus loaded no rules")
	}
}

func queryScalar(prom, q string) (float64, error) {
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := getJSON(prom+"/api/v1/query?query="+url.QueryEscape(q), &r); err != nil {
		return 0, err
	}
	if len(r.Data.Result) != 1 {
		return 0, fmt.Errorf("%s: %d series", q, len(r.Data.Result))
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}

// ---- processes, HTTP, waiting

// startProc starts a child whose output goes to dir/name.log, ends it at the
// end of the test (SIGTERM, then SIGKILL after 10 s) and has the kernel kill
// it should the test binary die first. With $TRAWL_ALERTS_DIR set it records
// the pid beside its log, for the Makefile's wrapper to clean up after a hard
// stop.
func startProc(t *testing.T, dir, name, bin string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatal(err)
	}
	pidFile := ""
	if os.Getenv("TRAWL_ALERTS_DIR") != "" {
		pidFile = writePid(t, dir, name, cmd.Process.Pid)
	}
	p := &proc{name: name, log: logPath, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-p.exited
		}
		logFile.Close()
		if pidFile != "" {
			os.Remove(pidFile)
		}
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", name, tail(logPath, 30))
		}
	})
	return p
}

// workDir is where the test keeps its rules, config, logs and Prometheus's
// data: under $TRAWL_ALERTS_DIR when set (the Makefile's wrapper removes it
// even after a hard stop, and ends the pids recorded there: the test
// binary's own, whose death takes its children along, and the children's),
// else a t.TempDir.
func workDir(t *testing.T) string {
	t.Helper()
	base := os.Getenv("TRAWL_ALERTS_DIR")
	if base == "" {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp(base, "run-")
	if err != nil {
		t.Fatal(err)
	}
	self := writePid(t, dir, "test", os.Getpid())
	t.Cleanup(func() {
		os.Remove(self)
		if !t.Failed() {
			os.RemoveAll(dir)
		}
	})
	return dir
}

func writePid(t *testing.T, dir, name string, pid int) string {
	t.Helper()
	f := filepath.Join(dir, name+".pid")
	if err := os.WriteFile(f, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

type proc struct {
	name, log string
	exited    chan struct{}
	err       error // once exited is closed
}

// dead is an error once the process has exited.
func (p *proc) dead() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited: %v", p.name, p.err)
	default:
		return nil
	}
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"msg":"http"`) {
			continue // the router's access log: one line a search
		}
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

var client = &http.Client{Timeout: 10 * time.Second}

func httpGet(u string) (int, []byte) {
	resp, err := client.Get(u)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func getJSON(u string, v any) error {
	code, b := httpGet(u)
	if code != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", u, code, b)
	}
	return json.Unmarshal(b, v)
}

func mustGetJSON(t *testing.T, u string, v any) {
	t.Helper()
	if err := getJSON(u, v); err != nil {
		t.Fatal(err)
	}
}

func mustPost(t *testing.T, u string) {
	t.Helper()
	resp, err := client.Post(u, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s", u, resp.StatusCode, b)
	}
}

// notYet is an error a waitFor function returns to say what it still waits
// for: not fatal, and quoted if the wait times out.
type notYet string

func (n notYet) Error() string { return string(n) }

// waitFor polls f every `every` until it says done, fails the test on its
// error (other than notYet, or a failed GET) or after timeout.
func waitFor(t *testing.T, what string, timeout, every time.Duration, f func() (bool, error)) {
	t.Helper()
	end := time.Now().Add(timeout)
	var lastErr error
	for {
		done, err := f()
		if done {
			return
		}
		var ny notYet
		if err != nil && !errors.As(err, &ny) && !strings.HasPrefix(err.Error(), "GET ") {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		lastErr = err
		if time.Now().After(end) {
			t.Fatalf("waiting for %s: gave up after %s (last error: %v)", what, timeout, lastErr)
		}
		time.Sleep(every)
	}
}

func durStr(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) + "s" }
