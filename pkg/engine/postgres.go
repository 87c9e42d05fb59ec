package engine

import corev1 "k8s.io/api/core/v1"

func init() {
	register(Engine{
		Name:           "postgres",
		DefaultVersion: "17",
		Images: map[string]string{
			"15": "docker.io/library/postgres:15.14",
			"16": "docker.io/library/postgres:16.10",
			"17": "docker.io/library/postgres:17.6",
		},
		Port:         5432,
		DataPath:     "/var/lib/postgresql/data",
		ScratchPaths: []string{"/var/run/postgresql", "/tmp"},
		UID:          999,
		Env: func(secret string) []corev1.EnvVar {
			return []corev1.EnvVar{
				fromSecret("POSTGRES_USER", secret, SecretKeyUsername),
				fromSecret("POSTGRES_PASSWORD", secret, SecretKeyPassword),
				fromSecret("POSTGRES_DB", secret, SecretKeyDatabase),
				// initdb refuses a non-empty directory, and a fresh volume's
				// root may hold lost+found: keep the cluster one level down.
				{Name: "PGDATA", Value: "/var/lib/postgresql/data/pgdata"},
			}
		},
		ReadinessCommand: []string{"sh", "-c", `pg_isready -h 127.0.0.1 -U "$POSTGRES_USER"`},
		DumpEnv: func(secret string) []corev1.EnvVar {
			return []corev1.EnvVar{
				fromSecret("PGUSER", secret, SecretKeyUsername),
				fromSecret("PGPASSWORD", secret, SecretKeyPassword),
			}
		},
		DumpCommand: func(host, file string) []string {
			return []string{"pg_dumpall", "--host=" + host, "--clean", "--if-exists", "--file=" + file}
		},
	})
}
