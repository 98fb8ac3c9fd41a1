/*
 * main.c -- kfarm-coordinator, the daemon.
 *
 * Design. One serving loop:
 *
 *     connect (retrying) -> migrate -> bind
 *     until SIGTERM/SIGINT:
 *         serve requests for up to 1 s          (server.c)
 *         every second: reap expired leases     (queue.c)
 *                       advance campaigns       (campaign.c, strategies)
 *     beside it: the LLM service thread (llm_service.c) and, with --export-dir,
 *     the export thread (export.c), each on its own database connection, so
 *     neither a slow model nor a large export delays dispatch.
 *
 * All state lives in PostgreSQL, so the daemon can be killed at any moment
 * and restarted: workers re-send their results, leases expire and are
 * re-queued, strategies resume idempotently. A database that goes away is
 * reconnected with backoff (db.c); meanwhile requests are answered ERROR.
 * The only mutable globals of the program live here: the stop flag set by
 * the signal handler.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <curl/curl.h>

#include "campaign.h"
#include "db.h"
#include "export.h"
#include "kf_util.h"
#include "kf_wire.h"
#include "llm_service.h"
#include "log.h"
#include "operator.h"
#include "queue.h"
#include "server.h"

static volatile sig_atomic_t g_stop;

static void on_signal(int sig) { g_stop = sig; }

static void usage(FILE *f)
{
    fprintf(f,
        "usage: kfarm-coordinator [options]\n"
        "\n"
        "The kernelfarm coordinator: hands evaluation jobs to workers over nanomsg and\n"
        "keeps campaigns, candidates, jobs and results in PostgreSQL.\n"
        "\n"
        "  --db CONNINFO          libpq connection string (default: $KFARM_DB)\n"
        "  --listen ADDR          nanomsg address to listen on, repeatable\n"
        "                         (tcp://0.0.0.0:7471, ipc:///run/kfarm.ipc;\n"
        "                         default tcp://0.0.0.0:7471)\n"
        "  --lease-ms N           job lease length in ms (default 30000)\n"
        "  --quarantine-after N   consecutive infra_error results before a worker is\n"
        "                         quarantined (default 5)\n"
        "  --export-dir DIR       re-export the static dashboard into DIR periodically\n"
        "  --export-interval S    seconds between exports (default 10)\n"
        "  --no-migrate           do not apply schema migrations at start\n"
        "  --operator-socket PATH answer `kfarm campaign status` on this local socket\n"
        "                         (mode 0600) from a warm connection: set\n"
        "                         KFARM_OPERATOR_SOCKET=PATH where kfarm runs\n"
        "  --threads N            serving threads, each with its own database connection\n"
        "                         (default 16, at most 64; results waiting on them are stored\n"
        "                         together: more threads, larger group commits; 1: the main\n"
        "                         thread serves between its chores)\n"
        "  -h, --help             this help\n"
        "\n"
        "Workers authenticate with their own credentials (kfarm worker add NAME).\n"
        "Logs one line per event to stderr.\n");
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "db", required_argument, NULL, 'd' },
        { "listen", required_argument, NULL, 'l' },
        { "lease-ms", required_argument, NULL, 'L' },
        { "quarantine-after", required_argument, NULL, 'q' },
        { "export-dir", required_argument, NULL, 'e' },
        { "export-interval", required_argument, NULL, 'i' },
        { "no-migrate", no_argument, NULL, 'M' },
        { "operator-socket", required_argument, NULL, 'o' },
        { "threads", required_argument, NULL, 't' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    kf_server_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    kf_queue_config_default(&cfg.queue);
    cfg.threads = 16;
    const char *conninfo = NULL, *export_dir = NULL, *ops_path = NULL;
    long export_interval = 10, v;
    int migrate = 1, c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': conninfo = optarg; break;
        case 'l':
            if (cfg.n_listen == KF_SERVER_MAX_LISTEN) {
                fprintf(stderr, "kfarm-coordinator: at most %d --listen addresses\n",
                        KF_SERVER_MAX_LISTEN);
                return 2;
            }
            cfg.listen[cfg.n_listen++] = optarg;
            break;
        case 'L':
            if (parse_int(optarg, 100, 86400000L, &v) < 0) {
                fprintf(stderr, "kfarm-coordinator: --lease-ms: expected 100..86400000 ms\n");
                return 2;
            }
            cfg.queue.lease_ms = (int)v;
            break;
        case 'q':
            if (parse_int(optarg, 1, 1000000, &v) < 0) {
                fprintf(stderr, "kfarm-coordinator: --quarantine-after: expected a positive count\n");
                return 2;
            }
            cfg.queue.quarantine_after = (int)v;
            break;
        case 'e': export_dir = optarg; break;
        case 'i':
            if (parse_int(optarg, 1, 86400, &v) < 0) {
                fprintf(stderr, "kfarm-coordinator: --export-interval: expected 1..86400 s\n");
                return 2;
            }
            export_interval = v;
            break;
        case 'M': migrate = 0; break;
        case 'o': ops_path = optarg; break;
        case 't':
            if (parse_int(optarg, 1, 64, &v) < 0) {
                fprintf(stderr, "kfarm-coordinator: --threads: expected 1..64\n");
                return 2;
            }
            cfg.threads = (int)v;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "kfarm-coordinator: unexpected argument '%s' (see --help)\n", argv[optind]);
        return 2;
    }
    if (cfg.n_listen == 0) cfg.listen[cfg.n_listen++] = "tcp://0.0.0.0:7471";
    cfg.conninfo = conninfo;
    /* A lock held elsewhere (an operator's open transaction on jobs) must
     * not stall dispatch: a serving statement waits at most 2 s for a lock
     * and runs at most 15 s, then fails, is logged and answered ERROR (the
     * worker retries). Their bookkeeping (message counters, lease
     * extensions, leases) commits without waiting for the WAL flush: a
     * database crash can lose the last fraction of a second of it, which
     * the fencing tokens and the unacknowledged-lease rule absorb; results
     * are stored with synchronous_commit on (queue.c). */
    cfg.pg_options = "-c lock_timeout=2000 -c statement_timeout=15000 -c synchronous_commit=off";

    char err[1024];
    /* Idle connections cost a file descriptor each: take the hard limit
     * (deploy/kfarm-coordinator.service raises it), so a crowd of idle
     * peers cannot starve the workers of connections. */
    struct rlimit nof;
    if (getrlimit(RLIMIT_NOFILE, &nof) == 0 && nof.rlim_cur < nof.rlim_max) {
        nof.rlim_cur = nof.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nof);
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: nn_poll returns EINTR */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* Connect, waiting for the database if it is not up yet. */
    kf_db *db = NULL;
    if (!conninfo && !getenv("KFARM_DB")) {
        fprintf(stderr, "kfarm-coordinator: no database: pass --db CONNINFO or set KFARM_DB\n");
        return 1;
    }
    for (int tries = 0; !g_stop; tries++) {
        db = kf_db_open(conninfo, err, sizeof(err));
        if (db) break;
        if (tries == 0 || tries % 15 == 0) kf_log("%s (retrying every 2 s)", err);
        sleep(2);
    }
    if (!db) return 1;
    /* a schema newer than this build's: migrated by a newer coordinator,
     * whose statements this one's may contradict (schema 018 and the
     * reaper): refuse rather than serve beside it */
    int have = kf_db_schema_version(db, err, sizeof(err)), latest = kf_db_schema_latest(err, sizeof(err));
    if (have > 0 && latest > 0 && have > latest) {
        kf_log("the database's schema is at version %d, newer than this build's %d: it was migrated by a "
               "newer kfarm-coordinator; run that version (every coordinator of one database must be)",
               have, latest);
        kf_db_close(db);
        return 1;
    }
    if (migrate) {
        int applied = 0;
        if (kf_db_migrate(db, &applied, err, sizeof(err)) < 0) {
            kf_log("migration failed: %s", err);
            kf_db_close(db);
            return 1;
        }
        kf_log("schema at version %d (%d migrations applied now)",
               kf_db_schema_version(db, err, sizeof(err)), applied);
        char drift[2048];
        int nd = kf_db_schema_drift(db, drift, sizeof(drift), err, sizeof(err));
        if (nd > 0)
            kf_log("warning: %d applied migration%s differ%s from this build's: %s", nd, nd == 1 ? "" : "s",
                   nd == 1 ? "s" : "", drift);
        else if (nd < 0)
            kf_log("warning: cannot compare the applied migrations: %s", err);
    }

    /* LLM strategies: proposals are answered by a background thread with its
     * own connection (llm_service.h), so a slow model never stalls dispatch. */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    kf_llm_service *llm = kf_llm_service_start(conninfo, err, sizeof(err));
    if (!llm) {
        kf_log("llm service: %s", err);
        kf_db_close(db);
        return 1;
    }

    kf_server *srv = kf_server_new(&cfg, db, err, sizeof(err));
    if (!srv) {
        kf_log("%s", err);
        kf_llm_service_stop(llm);
        kf_db_close(db);
        return 1;
    }
    kf_export_service *exp = NULL;
    if (export_dir && !(exp = kf_export_service_start(conninfo, export_dir, (double)export_interval, err,
                                                        sizeof(err)))) {
        kf_log("export: %s", err);
        kf_server_free(srv);
        kf_llm_service_stop(llm);
        kf_db_close(db);
        return 1;
    }
    kf_ops_service *ops = NULL;
    if (ops_path && !(ops = kf_ops_service_start(conninfo, ops_path, err, sizeof(err)))) {
        kf_log("%s", err);
        kf_export_service_stop(exp);
        kf_server_free(srv);
        kf_llm_service_stop(llm);
        kf_db_close(db);
        return 1;
    }
    for (int i = 0; i < cfg.n_listen; i++) kf_log("listening on %s", cfg.listen[i]);
    if (ops) kf_log("operator socket %s", ops_path);
    kf_log("coordinator started (lease %d ms, quarantine after %d infra_errors%s%s)",
           cfg.queue.lease_ms, cfg.queue.quarantine_after, export_dir ? ", export to " : "",
           export_dir ? export_dir : "");

    double next_tick = 0, next_stats = kf_util_now_s() + 60.0;
    int db_down = 0, rc = 0;
    while (!g_stop) {
        if (kf_server_poll(srv, 1000, err, sizeof(err)) < 0) {
            kf_log("server: %s", err);
            rc = 1;
            break;
        }
        double now = kf_util_now_s();
        if (now < next_tick) continue;
        next_tick = now + 1.0;
        if (now >= next_stats) { /* where requests' time went, once a minute */
            kf_server_stats(srv);
            next_stats = now + 60.0;
        }
        if (kf_db_ensure(db, err, sizeof(err)) < 0) {
            if (!db_down) kf_log("%s", err);
            db_down = 1;
            continue;
        }
        if (db_down) kf_log("database connection restored");
        db_down = 0;
        /* the pulse first: leases are pushed back by any outage before the
         * reaper looks at them */
        if (kf_queue_pulse(db, 3.0, NULL, err, sizeof(err)) < 0) kf_log("pulse: %s", err);
        else if (kf_queue_reap(db, &cfg.queue, NULL, NULL, err, sizeof(err)) < 0) kf_log("reaper: %s", err);
        if (kf_campaign_tick(db, err, sizeof(err)) < 0) kf_log("campaigns: %s", err);
        if (kf_campaign_compact_counts(db, NULL, err, sizeof(err)) < 0) kf_log("campaign counts: %s", err);
    }
    if (g_stop) kf_log("signal %d: shutting down", (int)g_stop);
    kf_ops_service_stop(ops);
    kf_export_service_stop(exp); /* one final export */
    kf_server_free(srv);
    kf_llm_service_stop(llm);
    curl_global_cleanup();
    kf_db_close(db);
    return rc;
}
