package engine

func init() {
	register(Spec{
		Name:           "mariadb",
		DefaultVersion: "11.8",
		// The long-term support release lines. The real-engine suite runs
		// Debian 12's 10.11; the newer lines use the same tools and statements.
		Images: map[string]string{
			"10.11": "docker.io/library/mariadb:10.11.14",
			"11.4":  "docker.io/library/mariadb:11.4.8",
			"11.8":  "docker.io/library/mariadb:11.8.3",
		},
		Port: 3306,
		// MariaDB has no admin interface: the instance manager serves one
		// (a relay to the engine's port), on MySQL's port.
		AdminPort: 33062,
		DataPath:  "/var/lib/mysql",
		UID:       999,
	})
}
