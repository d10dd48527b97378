package chart

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// An upgrade renders the converge Job: `router admin converge` over
// exactly the --shard flags the routers get (so a raised shards.count or
// an added zone is what it converges to), with the routers' TLS client
// files, and the shards' NetworkPolicy lets its pod reach their gRPC
// port. An install renders no Job, and converge.enabled=false none.
func TestConvergeJobOnUpgrade(t *testing.T) {
	for _, tc := range []struct {
		name    string
		upgrade bool
		files   []string
		sets    []string
		wantJob bool
	}{
		{name: "install", files: nil, wantJob: false},
		{name: "upgrade", upgrade: true, sets: []string{"networkPolicy.enabled=true"}, wantJob: true},
		{name: "upgrade to four shards with TLS", upgrade: true, files: []string{filepath.Join(chartDir(t), "ci", "tls-secret-values.yaml")}, sets: []string{"shards.count=4"}, wantJob: true},
		{name: "upgrade, converge off", upgrade: true, sets: []string{"shards.converge.enabled=false"}, wantJob: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := decodeAll(t, renderAs(t, tc.upgrade, tc.files, tc.sets...))
			checkInvariants(t, objs)
			jobs := ofKind[*batchv1.Job](objs)
			if !tc.wantJob {
				if len(jobs) != 0 {
					t.Fatalf("rendered %d Jobs, want none", len(jobs))
				}
				return
			}
			if len(jobs) != 1 || jobs[0].Name != releaseName+"-converge-1" {
				t.Fatalf("want one Job %s-converge-1, got %d", releaseName, len(jobs))
			}
			job := jobs[0]
			args := job.Spec.Template.Spec.Containers[0].Args
			if !slices.Equal(args[:2], []string{"admin", "converge"}) {
				t.Fatalf("Job args %v, want admin converge first", args)
			}
			router := ofKind[*appsv1.Deployment](objs)[0].Spec.Template.Spec.Containers[0].Args
			want := func(a string) bool {
				return strings.HasPrefix(a, "--shard=") || strings.HasPrefix(a, "--tls-")
			}
			var jobFlags, routerFlags []string
			for _, a := range args {
				if want(a) {
					jobFlags = append(jobFlags, a)
				}
			}
			for _, a := range router {
				if want(a) {
					routerFlags = append(routerFlags, a)
				}
			}
			if !slices.Equal(jobFlags, routerFlags) {
				t.Errorf("the Job's shard and TLS flags differ from the routers':\njob    %v\nrouter %v", jobFlags, routerFlags)
			}
			shards := 0
			for _, a := range jobFlags {
				if strings.HasPrefix(a, "--shard=") {
					shards++
				}
			}
			wantShards := 3
			if slices.Contains(tc.sets, "shards.count=4") {
				wantShards = 4
			}
			if shards != wantShards {
				t.Errorf("%d --shard flags, want %d", shards, wantShards)
			}
			if job.Spec.Template.Spec.RestartPolicy != "Never" || job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit < 3 {
				t.Errorf("the Job must retry a failed run in new pods (restartPolicy Never, backoffLimit >= 3)")
			}
			jobPod := labels.Set(job.Spec.Template.Labels)
			reaches := false
			for _, np := range ofKind[*networkingv1.NetworkPolicy](objs) {
				for _, rule := range np.Spec.Ingress {
					for _, peer := range rule.From {
						if peer.PodSelector == nil {
							continue
						}
						sel, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
						if err != nil {
							t.Fatal(err)
						}
						for _, p := range rule.Ports {
							reaches = reaches || (p.Port.String() == "grpc" && sel.Matches(jobPod))
						}
					}
				}
			}
			if np := ofKind[*networkingv1.NetworkPolicy](objs); slices.Contains(tc.sets, "networkPolicy.enabled=true") && (len(np) == 0 || !reaches) {
				t.Errorf("no NetworkPolicy lets the converge Job's pod reach the shards' gRPC port")
			}
		})
	}
}
