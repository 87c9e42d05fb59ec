package engine

func init() {
	register(Spec{
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
	})
}
