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
		Port:     5432,
		DataPath: "/var/lib/postgresql/data",
		UID:      999,
		// pg_dumpall reads every database and role: only the superuser can.
		DumpEnv: func(secret string) []corev1.EnvVar {
			return []corev1.EnvVar{
				{Name: "PGUSER", Value: "postgres"},
				fromSecret("PGPASSWORD", secret, SecretKeySuperuserPassword),
			}
		},
		DumpCommand: func(host, file string) []string {
			return []string{"pg_dumpall", "--host=" + host, "--clean", "--if-exists", "--file=" + file}
		},
	})
}
