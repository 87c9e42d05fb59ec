// Package mysqlfamily holds what MariaDB and MySQL share: SQL quoting,
// password hashes, the admin connection over the unix socket (behind the
// Conn interface, which tests fake), the temporary servers of bootstrap
// and clone, and Server, the lifecycle both drivers run around the Dialect
// each implements for the statements that differ (CHANGE MASTER versus
// CHANGE REPLICATION SOURCE, read_only versus super_read_only): the data
// directory's markers, following a primary, promotion and the probe.
package mysqlfamily
