package server

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/test/repo"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
)

func TestControllerOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name           string
		args           []string
		hasMainCluster bool
		want           []string
	}{
		{name: "defaults", hasMainCluster: true},
		{name: "no main cluster", want: []string{"--controller needs the main cluster"}},
		{name: "off without a main cluster", args: []string{"--controller=false"}},
		{name: "no workers", args: []string{"--controller-workers=0"}, hasMainCluster: true, want: []string{"--controller-workers must be at least 1"}},
		{name: "renew deadline beyond the lease", hasMainCluster: true,
			args: []string{"--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=10s"},
			want: []string{"leaderElection.leaseDuration"}},
		{name: "no lease name", args: []string{"--leader-elect-resource-name="}, hasMainCluster: true,
			want: []string{"leaderElection.resourceName"}},
		{name: "no election, no lease needed", args: []string{"--leader-elect=false", "--leader-elect-resource-name="}, hasMainCluster: true},
		{name: "database namespaces", args: []string{"--database-namespaces=team-a,team-b"}, hasMainCluster: true},
		{name: "a database namespace that cannot be one", args: []string{"--database-namespaces=team-a,Team_B"}, hasMainCluster: true,
			want: []string{`--database-namespaces: "Team_B"`}},
		{name: "engine images", args: []string{"--engine-image=postgres:15=mydb.local/postgres:15,mariadb:11.8=mydb.local/mariadb:11.8"}, hasMainCluster: true},
		{name: "an engine image of a version mydb does not run", args: []string{"--engine-image=postgres:9.6=mydb.local/postgres:9.6"}, hasMainCluster: true,
			want: []string{`--engine-image "postgres:9.6=mydb.local/postgres:9.6": postgres version must be one of`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewControllerOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			errs := o.Validate(tc.hasMainCluster)
			if len(errs) != len(tc.want) {
				t.Fatalf("Validate() = %v, want %d errors naming %v", errs, len(tc.want), tc.want)
			}
			for i, want := range tc.want {
				if !strings.Contains(errs[i].Error(), want) {
					t.Errorf("error %d = %q, want it to name %q", i, errs[i], want)
				}
			}
		})
	}
}

func TestControllerOptionsApplyTo(t *testing.T) {
	o := NewControllerOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--controller-kube-api-qps=77", "--leader-elect-identity=pod-1", "--leader-elect-lease-duration=20s",
		"--database-namespaces=team-a,team-b", "--engine-image=postgres:15=mydb.local/postgres:15"}); err != nil {
		t.Fatal(err)
	}
	main := &rest.Config{Host: "https://main", QPS: 5}
	cfg := o.ApplyTo(main)
	if cfg == nil {
		t.Fatal("no controller configuration")
	}
	if cfg.KubeConfig.QPS != 77 || main.QPS != 5 || !strings.Contains(cfg.KubeConfig.UserAgent, "mydb-controller") {
		t.Errorf("client config QPS %v (main's %v), user agent %q", cfg.KubeConfig.QPS, main.QPS, cfg.KubeConfig.UserAgent)
	}
	if cfg.Identity != "pod-1" || cfg.LeaderElection.LeaseDuration.Duration != 20*time.Second || cfg.LeaderElection.ResourceNamespace != "mydb-system" {
		t.Errorf("leader election %+v identity %q", cfg.LeaderElection, cfg.Identity)
	}
	if img := cfg.Databases.EngineImages["postgres"]["15"]; img != "mydb.local/postgres:15" {
		t.Errorf("postgres 15 image %q, want the --engine-image one", img)
	}
	if !slices.Equal(cfg.Namespaces, []string{"team-a", "team-b"}) {
		t.Errorf("namespaces %v", cfg.Namespaces)
	}
	o.Enabled = false
	if o.ApplyTo(main) != nil {
		t.Error("--controller=false still configures the controllers")
	}
}

// TestTheDeployedPolicyAdmitsTheDeployedImages: the policy artifacts/deploy
// ships to pin the images of mydb's pods is what mydb-apiserver
// --print-managed-images-policy prints with the Deployment's flags, so
// neither a database pod is refused nor an image admitted for nothing.
func TestTheDeployedPolicyAdmitsTheDeployedImages(t *testing.T) {
	root := repo.MustRoot()
	var deployment appsv1.Deployment
	readYAML(t, filepath.Join(root, "artifacts", "deploy", "deployment.yaml"), "Deployment", &deployment)
	shipped, err := os.ReadFile(filepath.Join(root, "artifacts", "deploy", "managed-images.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	o := NewControllerOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	var args []string
	for _, arg := range deployment.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(arg, "--instance-image=") || strings.HasPrefix(arg, "--engine-image=") {
			args = append(args, arg)
		}
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	images, err := o.ManagedImages()
	if err != nil {
		t.Fatal(err)
	}
	want, err := ManagedImagesPolicy(images)
	if err != nil {
		t.Fatal(err)
	}
	if string(shipped) != want {
		t.Errorf("artifacts/deploy/managed-images.yaml is not what the Deployment's flags make: regenerate it with "+
			"mydb-apiserver --print-managed-images-policy %s > artifacts/deploy/managed-images.yaml", strings.Join(args, " "))
	}
	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	readYAML(t, filepath.Join(root, "artifacts", "deploy", "managed-images.yaml"), "ValidatingAdmissionPolicy", &policy)
	if policy.Spec.ParamKind != nil || !strings.Contains(policy.Spec.Variables[0].Expression, "'"+images[0]+"'") {
		t.Errorf("the policy takes parameters, or does not list %s: %+v", images[0], policy.Spec)
	}
	if _, err := ManagedImagesPolicy([]string{"evil' || true || '"}); err == nil {
		t.Error("an image with a quote went into the policy's expression")
	}
}

// readYAML decodes the document of kind in the YAML file path into into.
func readYAML(t *testing.T, path, kind string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---") {
		if !strings.Contains(doc, "kind: "+kind+"\n") {
			continue
		}
		if err := yaml.Unmarshal([]byte(doc), into); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no %s in %s", kind, path)
}
