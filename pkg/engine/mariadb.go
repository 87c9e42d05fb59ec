package engine

import corev1 "k8s.io/api/core/v1"

func init() {
	register(Engine{
		Name:           "mariadb",
		DefaultVersion: "11.8",
		// The long-term support release lines. The real-engine suite runs
		// Debian 12's 10.11; the newer lines use the same tools and statements.
		Images: map[string]string{
			"10.11": "docker.io/library/mariadb:10.11.14",
			"11.4":  "docker.io/library/mariadb:11.4.8",
			"11.8":  "docker.io/library/mariadb:11.8.3",
		},
		Port:         3306,
		DataPath:     "/var/lib/mysql",
		ScratchPaths: []string{"/run/mysqld", "/tmp"},
		UID:          999,
		Env: func(secret string) []corev1.EnvVar {
			return []corev1.EnvVar{
				fromSecret("MARIADB_ROOT_PASSWORD", secret, SecretKeyRootPassword),
				fromSecret("MARIADB_USER", secret, SecretKeyUsername),
				fromSecret("MARIADB_PASSWORD", secret, SecretKeyPassword),
				fromSecret("MARIADB_DATABASE", secret, SecretKeyDatabase),
			}
		},
		// healthcheck.sh ships in the image and reads the credentials from
		// its own option file, not the command line.
		ReadinessCommand: []string{"healthcheck.sh", "--connect", "--innodb_initialized"},
		DumpEnv: func(secret string) []corev1.EnvVar {
			return []corev1.EnvVar{fromSecret("MYSQL_PWD", secret, SecretKeyRootPassword)}
		},
		DumpCommand: func(host, file string) []string {
			return []string{"mariadb-dump", "--host=" + host, "--user=root", "--all-databases",
				"--single-transaction", "--routines", "--events", "--gtid", "--result-file=" + file}
		},
	})
}
