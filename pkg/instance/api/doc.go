// Package api is the contract between mydb's controller and the instance
// managers (mydb-instance): the HTTP endpoints every manager serves on
// Port, the JSON bodies they take and answer, and the Client that calls
// them. The bodies carry no Kubernetes types and the package imports
// nothing of the manager, so the controller, the API server and the tests
// depend on the contract, not on the manager's code.
//
// The endpoints, under the constants of the same names:
//
//	GET  /healthz                          -> 200 while the manager runs
//	GET  /readyz                           -> 200 when the instance serves its role
//	                                          (Status.Ready), else 503 with the reason
//	GET  /v1/status                        -> 200 Status
//	GET  /v1/clone                         -> a copy of the data to clone from (MariaDB
//	                                          primaries); 503 when not a running primary
//	POST /v1/backups        BackupRequest  -> 202 Operation (200 when the ID is known)
//	GET  /v1/backups/{id}                  -> 200 Operation, 404 when unknown
//	POST /v1/restore        RestoreRequest -> 202 Operation (200 when the ID is known)
//	GET  /v1/restore                       -> 200 Operation, 404 when none was asked
//	POST /v1/credentials CredentialRequest -> 201 Credential (a short-lived user, made on
//	                                          a ready primary only; 409 elsewhere)
//	PUT  /v1/archive     ArchiveRequest    -> 200 ArchiveStatus (where the WAL archive is;
//	                                          501 without --wal-archive)
//
// Every manager serves HTTPS with a certificate of its database's issuer
// naming its instance, and every endpoint but /healthz and /readyz (the
// kubelet's probes, answered from a probe at most a second old) needs a
// client certificate of the same database's CA (mutual TLS): /v1/status
// admits the controller's and the instances'; /v1/clone the instances';
// /v1/backups, /v1/restore, /v1/archive and /v1/credentials the
// controller's alone
// (mydb-apiserver, which the credentials subresource calls through). A
// request without a certificate answers 401, one with another role's 403.
// Credentials carry the caller's; Auth names the instance a request must
// reach, whose certificate the handshake checks.
//
// A manager runs one backup or restore at a time: a POST with another ID
// while one runs, or one it cannot take now (the engine is not running, the
// instance has data), answers 409. A request it will never take (an invalid
// body, a destination it cannot use, another engine's backup format, an
// engine without backups) answers 422 or 501: asking again changes
// nothing. Operations live in memory; a manager that restarts forgets
// them, and the caller, seeing 404 for an operation it saw running, knows
// it ended with the process. Client turns these answers into
// ErrBusy, ErrRefused and ErrUnknownOperation.
//
// The controller meets the managers through GET /v1/status, which it polls
// for every instance, and POST and GET /v1/backups and /v1/restore, which
// run its backups and restores; the managers read their primary's
// /v1/status (a replica checks it holds a clone of it) and /v1/clone. The
// rest goes through the Kubernetes API: the topology is the MyDatabase's
// status. PositionFromV1, PositionFromInternal and PositionToV1 convert
// Position to and from that status's InstancePosition.
package api
