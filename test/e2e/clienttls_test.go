//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/pki"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestClientTLSRequired, through the aggregation layer with PostgreSQL and
// MariaDB: spec.tls.clientTLS: Required on a running three-instance
// database rolls its instances out (primary last); then every instance
// refuses the application user without TLS, serves it with
// sslmode=verify-full (the MySQL driver's verified TLS) against the
// published CA, and the replicas stream. An unknown mode is a 422 naming
// spec.tls.clientTLS.
func TestClientTLSRequired(t *testing.T) {
	t.Parallel()
	for _, tc := range replicationCases {
		t.Run(tc.engine.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dbs, _, h, _ := startShop(t, restConfig(t), tc, failoverDelay, "")
			kube := kubeClient(t)

			_, err := dbs.Patch(ctx, "shop", types.MergePatchType, []byte(`{"spec":{"tls":{"clientTLS":"Always"}}}`), metav1.PatchOptions{})
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.tls.clientTLS") {
				t.Errorf("clientTLS Always: %v, want a 422 naming spec.tls.clientTLS", err)
			}

			changed := time.Now()
			if _, err := dbs.Patch(ctx, "shop", types.MergePatchType, []byte(`{"spec":{"tls":{"clientTLS":"Required"}}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			waitRolledOut(t, dbs, "shop", 3)
			status := h.waitStreaming(3)
			t.Logf("%s: rolled out in %s, primary %s", tc.engine.name, time.Since(changed).Round(100*time.Millisecond), status.CurrentPrimary)

			app, err := kube.CoreV1().Secrets(h.ns).Get(ctx, names.Secret("shop"), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			caFile := filepath.Join(t.TempDir(), "ca.crt")
			if err := os.WriteFile(caFile, app.Data["ca.crt"], 0o600); err != nil {
				t.Fatal(err)
			}
			user, password, database := string(app.Data["username"]), string(app.Data["password"]), string(app.Data["database"])
			// MariaDB answers an insecure connection as a wrong password.
			refusal := map[string]string{"postgres": "no encryption", "mariadb": "Access denied"}[tc.engine.name]
			for _, in := range status.Instances {
				ip := instanceAddress(t, status.Instances, in.Name)
				plain, err := tc.open(ip, user, password, database)
				if err == nil {
					err = plain.Ping()
					plain.Close()
				}
				if err == nil || !strings.Contains(err.Error(), refusal) {
					t.Errorf("%s: the application user without TLS: %v, want a refusal saying %q", in.Name, err, refusal)
				}
				verified, err := openVerified(tc.engine.name, ip, user, password, database, caFile, pki.Pool(mustCerts(t, app.Data["ca.crt"])...))
				if err != nil {
					t.Errorf("%s: the application user with verified TLS: %v", in.Name, err)
					continue
				}
				if !sessionEncrypted(t, tc.engine.name, verified) {
					t.Errorf("%s: the verified session is not encrypted", in.Name)
				}
				verified.Close()
			}
		})
	}
}
