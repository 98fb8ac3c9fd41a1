/*
 * server.h -- the coordinator's nanomsg endpoint (prefix kf_server_).
 *
 * Design. One NN_REP socket bound to every --listen address (tcp://, ipc://).
 * With cfg.threads > 1 (the daemon's default) it is a raw (AF_SP_RAW) REP
 * socket served by a pool of threads, each with its own database
 * connection: one receiving thread takes each request off the socket with
 * its routing header and queues it for one serving thread, which answers
 * with that header, so requests of different workers run concurrently and the
 * database sees several transactions at once (it commits them together).
 * What the threads share -- the replay cache, the per-second limits of
 * refusals, the header MACs being handled -- is under one mutex; a resend of
 * a request another thread is still handling is dropped (that thread's
 * answer carries the same routing header). One worker's requests never run
 * concurrently: its REQ socket has one request outstanding. The daemon's
 * main thread runs the reaper, campaign progression and the pulse with its
 * own connection. Results are group-committed: a serving thread with a
 * result queues it, and while fewer than two threads are storing a group,
 * it becomes a leader and stores every result queued in one transaction
 * (kf_queue_result_group); each thread answers after the commit that stored
 * its result. With threads <= 1 the caller's thread serves in
 * kf_server_poll (a plain REP socket).
 *
 * Each request is authenticated before it is parsed (proto/kf_wire.h): frame
 * structure and size; the claimed worker's key from worker_credentials; the
 * header MAC (cheap whatever the size); revocation; the clock window; the
 * replay cache by header MAC (a nanomsg REQ resend of the same bytes gets
 * the cached sealed reply, so nothing is processed twice); the body MAC;
 * the persistent per-worker counter (strictly increasing, stored before the
 * request runs: replays are refused after restarts and floods); only then
 * the protobuf body, whose worker_id must be the authenticated name, from
 * the process instance that registered last (else CONFLICT). Frames refused
 * before authentication get an unauthenticated notice and one log line,
 * both rate-limited per second, never fatal. Then dispatch:
 *   Register  -> claim the identity for this instance (CONFLICT
 *                while another instance is live), upsert the worker  OK
 *   GetJob    -> lease a job (max_jobs: up to 64) + its task, source
 *                and defines                                       OK | NO_JOB
 *   Heartbeat -> extend the lease (and those in `more`)            OK | STALE (cancel)
 *   Result    -> store exactly once (and those in `more`, one
 *                group commit; more_status answers each)          OK | DUPLICATE | STALE
 * Database trouble is answered ERROR (the worker retries later).
 */
#ifndef KF_SERVER_H
#define KF_SERVER_H

#include <stddef.h>
#include "db.h"
#include "kf_wire.h"
#include "queue.h"

#define KF_SERVER_MAX_LISTEN 16

typedef struct {
    const char *listen[KF_SERVER_MAX_LISTEN]; /* nanomsg addresses */
    int n_listen;
    kf_queue_config queue;                    /* lease length, quarantine */
    size_t replay_capacity;                   /* nonces remembered; 0: 16384 */
    int threads;                              /* serving threads, each with its own database
                                                 connection (raw REP socket); 0 or 1: the
                                                 caller's thread serves in kf_server_poll */
    const char *conninfo;                     /* for the pool's connections (NULL: $KFARM_DB) */
    const char *pg_options;                   /* PostgreSQL session options of the pool's
                                                 connections ("-c lock_timeout=2000 ..."), or NULL */
} kf_server_config;

typedef struct kf_server kf_server;

/* Create the socket and bind every address. Returns the server, or NULL with
 * a reason (bad address, address in use). cfg and db must outlive it. */
kf_server *kf_server_new(const kf_server_config *cfg, kf_db *db, char *err, size_t errlen);

/* Serve requests for about timeout_ms milliseconds (returns early when a
 * signal interrupts the wait). Returns the number of requests handled, or -1
 * with reason on a socket failure. */
int kf_server_poll(kf_server *s, int timeout_ms, char *err, size_t errlen);

/* Close the socket and free. NULL is fine. */
/* Log one line of where requests' time went since the last call (or the
 * start): requests per second, and per phase -- waiting for a serving
 * thread, authentication (MAC, the credential's counter UPDATE), results
 * stored (the group commit, waiting included), lease (statement and jobs
 * built), reply (sealed, handed to nanomsg), whole (received to reply) --
 * p50/p99/max in ms, read from histograms of 4 buckets per power of two
 * (within 19%), and the results stored in group transactions with their
 * mean size. Then starts a new window. Logs nothing for a window
 * without requests. The coordinator calls it every 60 s and at the end. */
void kf_server_stats(kf_server *s);

void kf_server_free(kf_server *s);

/* Worker credentials (table worker_credentials; this module owns its
 * writes: the serving loop's counters and instances, and the operator's
 * enrollment through these three). */

/* Store worker `name`'s derived key K (hex, 2*32 digits; never the
 * secret). rotate: replace an existing key and lift a revocation. Returns
 * 1 when stored, 0 when the name already has a key and !rotate, -1 with
 * the database's message. */
int kf_server_cred_store(kf_db *db, const char *name, const char *key_hex, int rotate, char *err,
                         size_t errlen);

/* Remove `name`'s credential if no process has used it yet (an enrollment
 * whose secret could not be handed out). Returns 0 or -1. */
int kf_server_cred_forget(kf_db *db, const char *name, char *err, size_t errlen);

/* Revoke `name`: every later message under it is refused. Returns 1, 0
 * when there is no such credential, -1 with the database's message. */
int kf_server_cred_revoke(kf_db *db, const char *name, char *err, size_t errlen);

#endif
