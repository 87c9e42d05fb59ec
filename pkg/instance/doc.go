// Package instance is mydb's instance manager: the process that runs as the
// database container's entrypoint, owns the engine's data directory, and
// bootstraps, clones, runs, follows and promotes the engine as the desired
// topology says. It knows no Kubernetes types: the topology comes from a
// TopologySource and the state goes out over HTTP, so the controller and
// the instance meet only through those; the HTTP contract (endpoints,
// bodies, client) is package api.
//
// Engine specifics live in the subpackages (postgres, mariadb, mysql), each
// a Driver; the Manager runs any engine through its Driver.
package instance
