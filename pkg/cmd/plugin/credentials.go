package plugin

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	clientset "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func (o *options) credentialsCommand() *cobra.Command {
	var role, caFile string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "credentials DATABASE [--role readonly|readwrite] [--ttl 1h]",
		Short: "Get a short-lived database user named after you (POST mydatabases/DATABASE/credentials)",
		Long: "Asks mydb for a database user that logs in for --ttl (1 minute to 24 hours) with --role's rights, made on the " +
			"primary and named after your Kubernetes user, and prints it as environment variables for the engine's client " +
			"(PG* for PostgreSQL; MYSQL_HOST, MYSQL_TCP_PORT, MYSQL_PWD, MYSQL_USER and MYSQL_DATABASE for MariaDB and MySQL). " +
			"The CA that verifies the server is written to --ca-file. Nothing is stored: the password is in this answer only. " +
			"It needs create and the role's verb on mydatabases/credentials.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := o.client()
			if err != nil {
				return err
			}
			answer, err := requestCredential(cmd.Context(), c, ns, args[0], role, ttl)
			if err != nil {
				return err
			}
			if caFile == "" {
				caFile = filepath.Join(os.TempDir(), fmt.Sprintf("mydb-%s-%s-ca.crt", ns, args[0]))
			}
			if err := os.WriteFile(caFile, []byte(answer.Status.CACertificate), 0o600); err != nil {
				return err
			}
			// The port tells the engine's family: a user allowed credentials
			// alone may not read the MyDatabase.
			engine := examplev1.EngineMariaDB
			if answer.Status.Port == 5432 {
				engine = examplev1.EnginePostgres
			}
			printCredential(o.streams.Out, engine, answer.Status, caFile)
			return nil
		},
	}
	cmd.Flags().StringVar(&role, "role", string(examplev1.CredentialRoleReadOnly), "readonly or readwrite")
	cmd.Flags().DurationVar(&ttl, "ttl", time.Hour, "how long the user logs in")
	cmd.Flags().StringVar(&caFile, "ca-file", "", "where to write the CA that verifies the server (default: a file in the temporary directory)")
	return cmd
}

// printCredential prints s as the environment of engine's client, with a
// comment saying until when it logs in; `eval "$(kubectl mydb credentials
// shop)"` sets it.
func printCredential(out io.Writer, engine examplev1.Engine, s examplev1.MyDatabaseCredentialRequestStatus, caFile string) {
	fmt.Fprintf(out, "# %s logs in until %s (primary %s)\n", s.Username, s.ExpirationTimestamp.UTC().Format(time.RFC3339), s.Instance)
	var vars [][2]string
	if engine == examplev1.EnginePostgres {
		host := s.Host
		if s.ServerName != "" {
			// The engine serves a certificate of the user's own, for this
			// name (spec.tls.serverCertificateSecret).
			host = s.ServerName
		}
		vars = [][2]string{{"PGHOST", host}, {"PGPORT", fmt.Sprint(s.Port)}, {"PGUSER", s.Username}, {"PGPASSWORD", s.Password},
			{"PGDATABASE", s.Database}, {"PGSSLMODE", "verify-full"}, {"PGSSLROOTCERT", caFile}}
	} else {
		// The name a certificate of the user's own (MySQL) is verified by.
		host := cmp.Or(s.ServerName, s.Host)
		vars = [][2]string{{"MYSQL_HOST", host}, {"MYSQL_TCP_PORT", fmt.Sprint(s.Port)}, {"MYSQL_USER", s.Username},
			{"MYSQL_PWD", s.Password}, {"MYSQL_DATABASE", s.Database}}
		fmt.Fprintf(out, "# mariadb --ssl-ca=%s --ssl-verify-server-cert -u \"$MYSQL_USER\" \"$MYSQL_DATABASE\"\n", caFile)
	}
	for _, v := range vars {
		fmt.Fprintf(out, "export %s=%s\n", v[0], shellQuote(v[1]))
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// requestCredential is POST mydatabases/db/credentials of namespace ns for
// role, lasting ttl: what credentials, connect, psql and mariadb all ask.
func requestCredential(ctx context.Context, c clientset.Interface, ns, db, role string, ttl time.Duration) (*examplev1.MyDatabaseCredentialRequest, error) {
	seconds := int64(ttl / time.Second)
	return c.ExampleV1().MyDatabases(ns).CreateCredentials(ctx, db, &examplev1.MyDatabaseCredentialRequest{
		Spec: examplev1.MyDatabaseCredentialRequestSpec{Role: examplev1.CredentialRole(role), ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
}
