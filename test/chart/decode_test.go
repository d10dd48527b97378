package chart

import (
	"fmt"
	"strings"
	"testing"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	monv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// object is one rendered manifest, decoded strictly into its Go type.
type object struct {
	source string // helm's "# Source:" comment, for messages
	kind   string
	name   string
	obj    any
}

// newTyped returns an empty object of the Go type for apiVersion/kind. A kind
// the chart does not mean to render fails the test.
func newTyped(apiVersion, kind string) (any, error) {
	switch apiVersion + "/" + kind {
	case "v1/Service":
		return &corev1.Service{}, nil
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}, nil
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "v1/Pod":
		return &corev1.Pod{}, nil
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}, nil
	case "apps/v1/StatefulSet":
		return &appsv1.StatefulSet{}, nil
	case "batch/v1/Job":
		return &batchv1.Job{}, nil
	case "batch/v1/CronJob":
		return &batchv1.CronJob{}, nil
	case "v1/PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}, nil
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "networking.k8s.io/v1/NetworkPolicy":
		return &networkingv1.NetworkPolicy{}, nil
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return &monv1.ServiceMonitor{}, nil
	case "monitoring.coreos.com/v1/PrometheusRule":
		return &monv1.PrometheusRule{}, nil
	case "cert-manager.io/v1/Certificate":
		return &cmv1.Certificate{}, nil
	}
	return nil, fmt.Errorf("unexpected kind %s %s", apiVersion, kind)
}

// decodeAll splits helm template output into documents and decodes each one
// strictly: an unknown or duplicated field is an error, as a typo in a template
// would otherwise be dropped silently by the API server's pruning.
func decodeAll(t *testing.T, manifest string) []object {
	t.Helper()
	var objs []object
	for _, doc := range splitDocs(manifest) {
		source := ""
		for _, line := range strings.Split(doc, "\n") {
			if strings.HasPrefix(line, "# Source: ") {
				source = strings.TrimPrefix(line, "# Source: ")
			}
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("%s: not YAML: %v", source, err)
		}
		if tm.Kind == "" {
			continue // comments only
		}
		typed, err := newTyped(tm.APIVersion, tm.Kind)
		if err != nil {
			t.Fatalf("%s: %v", source, err)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), typed); err != nil {
			t.Fatalf("%s: strict decode of %s: %v", source, tm.Kind, err)
		}
		name := typed.(metav1.Object).GetName()
		if ns := typed.(metav1.Object).GetNamespace(); ns != namespace {
			t.Errorf("%s: %s %s in namespace %q, want %q", source, tm.Kind, name, ns, namespace)
		}
		objs = append(objs, object{source: source, kind: tm.Kind, name: name, obj: typed})
	}
	return objs
}

func splitDocs(manifest string) []string {
	var docs []string
	var cur []string
	for _, line := range strings.Split(manifest, "\n") {
		if line == "---" {
			docs = append(docs, strings.Join(cur, "\n"))
			cur = nil
			continue
		}
		cur = append(cur, line)
	}
	return append(docs, strings.Join(cur, "\n"))
}

// ofKind returns the decoded objects of one Go type.
func ofKind[T any](objs []object) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.obj.(T); ok {
			out = append(out, v)
		}
	}
	return out
}
