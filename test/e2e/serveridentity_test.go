//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/controller/dump"
	"github.com/mydb-dev/mydb/pkg/controller/mydatabase"
	"github.com/mydb-dev/mydb/pkg/engine"
	"github.com/mydb-dev/mydb/pkg/names"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// serverIdentity is the ServiceAccount mydb-apiserver runs as; local-up
// gives it a token of that ServiceAccount, so every e2e test runs mydb with
// exactly the RBAC and policy of artifacts/common.
const serverIdentity = "system:serviceaccount:mydb-system:mydb-apiserver"

// TestServerIdentityIsLeastPrivilege asks kube-apiserver, with kubectl auth
// can-i as mydb-apiserver's ServiceAccount, what it may do: what the
// controller needs is granted, and what would let a compromised server take
// over the cluster is not.
func TestServerIdentityIsLeastPrivilege(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	expectServerMay(t, []permission{
		// What the controller does.
		{[]string{"patch", "statefulsets.apps", "-n", ns}, true},
		{[]string{"create", "statefulsets.apps", "-n", ns}, true},
		{[]string{"create", "secrets", "-n", ns}, true},
		{[]string{"watch", "secrets", "-n", ns}, true},
		{[]string{"patch", "pods", "-n", ns}, true},
		{[]string{"patch", "persistentvolumeclaims", "-n", ns}, true},
		{[]string{"delete", "poddisruptionbudgets.policy", "-n", ns}, true},
		// A database deleted under deletionPolicy Delete: its data, by the
		// controller (the policy limits it to what mydb labelled).
		{[]string{"delete", "statefulsets.apps", "-n", ns}, true},
		{[]string{"delete", "persistentvolumeclaims", "-n", ns}, true},
		{[]string{"delete", "secrets", "-n", ns}, true},
		// The storage guard's record, and no other ConfigMap written.
		{[]string{"update", "configmaps/mydb-store", "-n", "mydb-system"}, true},
		{[]string{"update", "configmaps/other", "-n", "mydb-system"}, false},
		{[]string{"update", "configmaps", "-n", ns}, false},
		// Backups run inside the instance managers: no Jobs.
		{[]string{"create", "jobs.batch", "-n", ns}, false},
		{[]string{"patch", "rolebindings.rbac.authorization.k8s.io", "-n", ns}, true},
		{[]string{"create", "events", "-n", ns}, true},
		{[]string{"update", "mydatabases.example.com", "--subresource", "finalizers", "-n", ns}, true},
		{[]string{"update", "leases.coordination.k8s.io/mydb-controller", "-n", "mydb-system"}, true},
		{[]string{"create", "tokenreviews.authentication.k8s.io"}, true},
		{[]string{"create", "subjectaccessreviews.authorization.k8s.io"}, true},
		{[]string{"get", "configmaps/extension-apiserver-authentication", "-n", "kube-system"}, true},
		// Secrets: RBAC cannot grant by label or name pattern; the
		// policy lets mydb update only a database's CA Secrets
		// (TestPolicyLimitsTheServerToWhatItManages). Never patch.
		{[]string{"update", "secrets", "-n", ns}, true},
		{[]string{"patch", "secrets", "-n", ns}, false},
		// Nothing cluster-scoped that takes over the cluster.
		{[]string{"create", "clusterrolebindings.rbac.authorization.k8s.io"}, false},
		{[]string{"create", "clusterroles.rbac.authorization.k8s.io"}, false},
		{[]string{"bind", "clusterroles.rbac.authorization.k8s.io"}, false},
		{[]string{"escalate", "roles.rbac.authorization.k8s.io", "-n", ns}, false},
		{[]string{"impersonate", "users"}, false},
		{[]string{"delete", "nodes"}, false},
		{[]string{"patch", "nodes"}, false},
		{[]string{"delete", "namespaces"}, false},
		{[]string{"update", "validatingadmissionpolicies.admissionregistration.k8s.io"}, false},
		{[]string{"delete", "validatingadmissionpolicybindings.admissionregistration.k8s.io"}, false},
		// No way into a running pod. The pods it makes itself are the dump
		// servers of volume backups (the policy admits no other).
		{[]string{"create", "pods", "--subresource", "exec", "-n", ns}, false},
		{[]string{"create", "pods", "--subresource", "portforward", "-n", ns}, false},
		{[]string{"create", "pods", "--subresource", "attach", "-n", ns}, false},
		{[]string{"create", "pods", "-n", ns}, true},
		{[]string{"delete", "pods", "-n", ns}, true},
		{[]string{"update", "pods", "-n", ns}, false},
		{[]string{"create", "serviceaccounts", "--subresource", "token", "-n", ns}, false},
		// Leases in its own namespace only, and only its own.
		{[]string{"update", "leases.coordination.k8s.io", "-n", "kube-system"}, false},
		{[]string{"update", "leases.coordination.k8s.io/other", "-n", "mydb-system"}, false},
		{[]string{"create", "leases.coordination.k8s.io", "-n", ns}, false},
		// Its children are applied, never replaced; Services go with their
		// database (owner references), never deleted by mydb.
		{[]string{"update", "statefulsets.apps", "-n", ns}, false},
		{[]string{"delete", "services", "-n", ns}, false},
		{[]string{"update", "mydatabases.example.com", "-n", ns}, false},
	})
}

// permission is a kubectl auth can-i question and whether mydb's identity
// must be allowed.
type permission struct {
	args []string
	want bool
}

// expectServerMay asks kube-apiserver each question as mydb-apiserver's
// ServiceAccount and fails the test for every wrong answer.
func expectServerMay(t *testing.T, perms []permission) {
	t.Helper()
	var wg sync.WaitGroup
	slots := make(chan struct{}, 4)
	for _, tc := range perms {
		// Four kubectl runs at a time: each mostly waits for its answer.
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			args := append([]string{"auth", "can-i"}, tc.args...)
			args = append(args, "--as", serverIdentity)
			r := kubectl(t, "", args...)
			got := strings.TrimSpace(r.stdout) == "yes"
			if got != tc.want || (r.err != nil) == tc.want {
				t.Errorf("kubectl auth can-i %s: %q (%v), want allowed=%v", strings.Join(tc.args, " "), strings.TrimSpace(r.stdout), r.err, tc.want)
			}
		}()
	}
	wg.Wait()
}

// TestPolicyLimitsTheServerToWhatItManages: as mydb-apiserver's identity,
// the ValidatingAdmissionPolicy of artifacts/common refuses to create an
// unlabelled Secret (RBAC lets it create Secrets; updating one it may not
// at all), to patch a Service it did not make, or to take one over by
// adding the label; a Service labelled as mydb's may be patched.
func TestPolicyLimitsTheServerToWhatItManages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	admin := kubeClient(t)
	cfg := restConfig(t)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: serverIdentity,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:mydb-system", "system:authenticated"}}
	asServer, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	managed := map[string]string{names.LabelManagedBy: names.ManagedBy}
	forbiddenByPolicy := func(err error) bool {
		return (apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) && strings.Contains(err.Error(), "mydb-apiserver-managed-") // either policy
	}

	// The policy reaches kube-apiserver's admission shortly after local-up
	// applied it.
	var err2 error
	eventually(t, time.Minute, func() error {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "foreign"}, StringData: map[string]string{"k": "v"}}
		_, err2 = asServer.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err2 == nil {
			return fmt.Errorf("an unlabelled Secret was admitted as %s", serverIdentity)
		}
		return nil
	})
	if !forbiddenByPolicy(err2) {
		t.Errorf("creating an unlabelled Secret: %v, want the policy's refusal", err2)
	}
	if _, err := asServer.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ours", Labels: managed}},
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("creating a labelled Secret: %v", err)
	}
	// A Secret someone else made: mydb may not update it (the policy,
	// which reads the labels of the object as stored, even named as a
	// CA's), nor patch it (RBAC); nor a Secret of its own that is not a
	// database's CA's.
	for _, name := range []string{"foreign", "foreign-ca"} {
		foreign, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
			StringData: map[string]string{"password": "theirs"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		foreign.Labels = managed
		foreign.StringData = map[string]string{"password": "mine"}
		if _, err := asServer.CoreV1().Secrets(ns).Update(ctx, foreign, metav1.UpdateOptions{}); !forbiddenByPolicy(err) {
			t.Errorf("updating the foreign Secret %s: %v, want the policy's refusal", name, err)
		}
	}
	own, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shop-credentials", Labels: managed},
		StringData: map[string]string{"password": "theirs"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	own.StringData = map[string]string{"password": "mine"}
	if _, err := asServer.CoreV1().Secrets(ns).Update(ctx, own, metav1.UpdateOptions{}); !forbiddenByPolicy(err) {
		t.Errorf("updating the credentials Secret %s: %v, want the policy's refusal", own.Name, err)
	}
	own.Name, own.ResourceVersion, own.UID = "shop-ca-bundle", "", ""
	if own, err = admin.CoreV1().Secrets(ns).Create(ctx, own, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	own.StringData = map[string]string{"ca.crt": "a bundle"}
	if _, err := asServer.CoreV1().Secrets(ns).Update(ctx, own, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("updating a CA bundle Secret of its own: %v", err)
	}

	// Services: RBAC lets mydb patch them; the policy only its own.
	svc := func(name string, labels map[string]string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 5432}}}}
	}
	if _, err := admin.CoreV1().Services(ns).Create(ctx, svc("theirs", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Services(ns).Create(ctx, svc("ours", managed), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := func(name, body string) error {
		_, err := asServer.CoreV1().Services(ns).Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	if err := patch("theirs", `{"metadata":{"annotations":{"x":"y"}}}`); !forbiddenByPolicy(err) {
		t.Errorf("patching a foreign Service: %v, want the policy's refusal", err)
	}
	if err := patch("theirs", `{"metadata":{"labels":{"app.kubernetes.io/managed-by":"mydb"}}}`); !forbiddenByPolicy(err) {
		t.Errorf("adopting a foreign Service by labelling it: %v, want the policy's refusal", err)
	}
	if err := patch("ours", `{"metadata":{"labels":{"app.kubernetes.io/managed-by":null}}}`); !forbiddenByPolicy(err) {
		t.Errorf("removing the label from its own Service: %v, want the policy's refusal", err)
	}
	if err := patch("ours", `{"metadata":{"annotations":{"x":"y"}}}`); err != nil {
		t.Errorf("patching its own Service: %v", err)
	}
	// The images mydb is configured with (local-up applied the policy
	// mydb-apiserver --print-managed-images-policy printed); the instance
	// image is the one that is no engine's.
	policy, err := kubeClient(t).AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "mydb-apiserver-managed-images", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(policy.Spec.Variables) == 0 || policy.Spec.Variables[0].Name != "images" {
		t.Fatalf("the images policy has no images variable: %+v", policy.Spec.Variables)
	}
	listed := policy.Spec.Variables[0].Expression
	instanceImage := ""
	for _, image := range strings.FieldsFunc(listed, func(r rune) bool { return strings.ContainsRune("[]', ", r) }) {
		if !strings.Contains(image, "postgres") && !strings.Contains(image, "mariadb") && !strings.Contains(image, "mysql") {
			instanceImage = image
		}
	}
	if instanceImage == "" {
		t.Fatalf("no instance image in %s", listed)
	}
	// Pods: only dump servers, as their database's ServiceAccount without
	// its token, mounting a claim and that database's Secret.
	dumpPod := func(mod func(*corev1.Pod)) *corev1.Pod {
		owner := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "MyDatabaseBackup", Name: "snap", UID: "0b6a4c2e-0000-4000-8000-000000000001"}
		p := dump.NewServerPod("snap-dump", ns, "orders", "snap-dump", instanceImage, false, owner)
		if mod != nil {
			mod(p)
		}
		return p
	}
	// The database's instance ServiceAccount, which pods are admitted only
	// when it exists.
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "orders-instance"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod := func(p *corev1.Pod) error {
		_, err := asServer.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	if err := createPod(dumpPod(nil)); err != nil {
		t.Errorf("creating a dump-server pod: %v", err)
	}
	for what, mod := range map[string]func(*corev1.Pod){
		"unlabelled":                    func(p *corev1.Pod) { p.Labels = nil },
		"not a dump server":             func(p *corev1.Pod) { p.Labels[names.LabelComponent] = names.ComponentDatabase },
		"with its ServiceAccount token": func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = ptr.To(true) },
		"as another ServiceAccount":     func(p *corev1.Pod) { p.Spec.ServiceAccountName = "default" },
		"mounting another Secret": func(p *corev1.Pod) {
			p.Spec.Volumes[1].Secret.SecretName = "other-credentials"
		},
		"mounting a host path": func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		},
		"on the host's network":                        func(p *corev1.Pod) { p.Spec.HostNetwork = true },
		"running an image mydb is not configured with": func(p *corev1.Pod) { p.Spec.Containers[0].Image = "docker.io/library/busybox:latest" },
		"privileged": func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil
			p.Spec.Containers[0].SecurityContext.Privileged = ptr.To(true)
		},
	} {
		if err := createPod(dumpPod(mod)); !forbiddenByPolicy(err) {
			t.Errorf("creating a pod %s: %v, want the policy's refusal", what, err)
		}
	}

	// StatefulSets: the one mydb makes for a database, and nothing more.
	db := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: ns, UID: "0b6a4c2e-0000-4000-8000-000000000002"},
		Spec: examplev1.MyDatabaseSpec{Engine: examplev1.EnginePostgres, StorageSize: resource.MustParse("1Gi")}}
	examplev1.SetObjectDefaults_MyDatabase(db)
	eng, _ := engine.Lookup(string(db.Spec.Engine))
	statefulSet := func(mod func(*corev1.PodSpec)) *appsv1.StatefulSet {
		sts := mydatabase.NewStatefulSet(db, eng, nil, instanceImage, false)
		if mod != nil {
			mod(&sts.Spec.Template.Spec)
		}
		return sts
	}
	createStatefulSet := func(sts *appsv1.StatefulSet) error {
		_, err := asServer.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	if err := createStatefulSet(statefulSet(nil)); err != nil {
		t.Errorf("creating a database's StatefulSet as mydb makes it: %v", err)
	}
	for what, mod := range map[string]func(*corev1.PodSpec){
		"privileged": func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil
			s.Containers[0].SecurityContext.Privileged = ptr.To(true)
		},
		"with an added capability": func(s *corev1.PodSpec) {
			s.InitContainers[0].SecurityContext.Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}
		},
		"on the host's network":                        func(s *corev1.PodSpec) { s.HostNetwork = true },
		"running an image mydb is not configured with": func(s *corev1.PodSpec) { s.Containers[0].Image = "docker.io/library/postgres:latest" },
		"with an init container of another image":      func(s *corev1.PodSpec) { s.InitContainers[0].Image = "docker.io/library/busybox:latest" },
		"with a host port":                             func(s *corev1.PodSpec) { s.Containers[0].Ports[0].HostPort = 5432 },
		"mounting a host path": func(s *corev1.PodSpec) {
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		},
		"mounting another Secret": func(s *corev1.PodSpec) {
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "other", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "other-credentials"}}})
		},
		"projecting another Secret": func(s *corev1.PodSpec) {
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "other", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "other-credentials"}}}}}}})
		},
		"projecting a ConfigMap": func(s *corev1.PodSpec) {
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "other", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}}}}}})
		},
		"with an environment from a Secret": func(s *corev1.PodSpec) {
			s.Containers[0].Env = append(s.Containers[0].Env, corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "other-credentials"}, Key: "password"}}})
		},
	} {
		if err := createStatefulSet(statefulSet(mod)); !forbiddenByPolicy(err) {
			t.Errorf("creating a StatefulSet %s: %v, want the policy's refusal", what, err)
		}
	}

	// Nor may it delete what it did not make (RBAC lets it delete budgets).
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "theirs"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}}
	if _, err := admin.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := asServer.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, "theirs", metav1.DeleteOptions{}); !forbiddenByPolicy(err) {
		t.Errorf("deleting a foreign budget: %v, want the policy's refusal", err)
	}
}
