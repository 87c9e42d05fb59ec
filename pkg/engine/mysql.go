package engine

func init() {
	register(Spec{
		Name: "mysql",
		// 9.7, the newest long-term support line, is the one proven: the
		// instance suite and the real node run it (Debian's mysql-9.7);
		// no 8.4 server has ever run here.
		DefaultVersion: "9.7",
		Images: map[string]string{
			"8.0": "docker.io/library/mysql:8.0.43",
			"8.4": "docker.io/library/mysql:8.4.6",
			"9.7": "docker.io/library/mysql:9.7.4",
		},
		Deprecated: map[string]string{
			"8.0": "mysql 8.0 reached its end of life in April 2026; move to 8.4",
		},
		Port:      3306,
		AdminPort: 33062,
		DataPath:  "/var/lib/mysql",
		UID:       999,
		// MYSQL_PWD keeps the password out of the process list.
	})
}
