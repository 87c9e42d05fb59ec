package engine

func init() {
	register(Engine{
		Name: "mysql",
		// 8.4 stays the default until 9.7, the newer long-term support
		// line and the one that runs on the real node here (Debian's
		// mysql-9.7), has been through the instance suite as well.
		DefaultVersion: "8.4",
		Images: map[string]string{
			"8.0": "docker.io/library/mysql:8.0.43",
			"8.4": "docker.io/library/mysql:8.4.6",
			"9.7": "docker.io/library/mysql:9.7.4",
		},
		Deprecated: map[string]string{
			"8.0": "mysql 8.0 reached its end of life in April 2026; move to 8.4",
		},
		Port:     3306,
		DataPath: "/var/lib/mysql",
		UID:      999,
		// MYSQL_PWD keeps the password out of the process list.
	})
}
