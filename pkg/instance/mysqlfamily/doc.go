// Package mysqlfamily holds what MariaDB and MySQL share: SQL quoting,
// password hashes, the admin connection over the unix socket, and the
// Dialect each implements for the statements that differ (CHANGE MASTER
// versus CHANGE REPLICATION SOURCE, read_only versus super_read_only).
package mysqlfamily
