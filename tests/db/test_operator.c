/*
 * test_operator.c -- the coordinator's operator socket (coordinator/operator.h)
 * against a real PostgreSQL: what an operator relies on when
 * `kfarm campaign status` is answered by a running coordinator.
 *
 *  - the answer is byte for byte what reading the database prints (text),
 *    and the same bests and blockers (--json), for a campaign with results;
 *  - it is current: a campaign paused after a first answer reads paused;
 *  - a missing campaign is exit 1 with the CLI's own reason;
 *  - the socket file is 0600, and a second service on the same path is
 *    refused while the first lives;
 *  - garbage, another build's request and a command that is not a read are
 *    refused with the reason, and the service goes on answering;
 *  - a database connection dropped under it (pg_terminate_backend, as a
 *    restart does) costs no answer;
 *  - with no socket file, or a file nobody listens on (a coordinator that
 *    was killed), the client says so at once (1 / -1) instead of waiting
 *    for the answer timeout, and the CLI reads the database;
 *  - a stopped service removes its socket file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>
#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>

#include "kf_util.h"
#include "operator.h"
#include "status.h"

#include "db_test.h"

#ifndef KFARM_COMMIT
#define KFARM_COMMIT "unknown"
#endif

/* kf_status_write into a string (free it); *rc its return. */
static char *status_direct(kf_db *db, const char *name, int json, int *rc)
{
    char *buf = NULL, err[1024];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    *rc = kf_status_write(db, name, json, 0, f, err, sizeof(err));
    fclose(f);
    return buf;
}

/* A raw request (bytes as given) on a fresh REQ socket; the decoded reply
 * or NULL. */
static Kfarm__OperatorReply *raw_call(const char *path, const void *msg, size_t len)
{
    char addr[256];
    snprintf(addr, sizeof(addr), "ipc://%s", path);
    int sock = nn_socket(AF_SP, NN_REQ), ms = 5000;
    nn_setsockopt(sock, NN_SOL_SOCKET, NN_SNDTIMEO, &ms, sizeof(ms));
    nn_setsockopt(sock, NN_SOL_SOCKET, NN_RCVTIMEO, &ms, sizeof(ms));
    nn_connect(sock, addr);
    Kfarm__OperatorReply *r = NULL;
    void *rep = NULL;
    int n;
    if (nn_send(sock, msg, len, 0) == (int)len && (n = nn_recv(sock, &rep, NN_MSG, 0)) >= 0) {
        r = kfarm__operator_reply__unpack(NULL, (size_t)n, rep);
        nn_freemsg(rep);
    }
    nn_close(sock);
    return r;
}

static Kfarm__OperatorReply *request(const char *path, const char *build, const char *command,
                                     const char *campaign)
{
    Kfarm__OperatorRequest q = KFARM__OPERATOR_REQUEST__INIT;
    q.build = (char *)build;
    q.command = (char *)command;
    q.campaign = (char *)campaign;
    uint8_t buf[1024];
    size_t n = kfarm__operator_request__pack(&q, buf);
    return raw_call(path, buf, n);
}

static int refused_with(Kfarm__OperatorReply *r, const char *words)
{
    int ok = r && r->has_refused && r->refused && r->error && strstr(r->error, words);
    if (r) kfarm__operator_reply__free_unpacked(r, NULL);
    return ok;
}

/* Store results for campaign "ops": 24 leases, a quarter compile_error. */
static int store_results(kf_db *db)
{
    char err[1024];
    kf_queue_config qc;
    kf_queue_config_default(&qc);
    const char *cls[1] = { "cpu" };
    char dev[] = "[]";
    kf_queue_register_worker(db, "wo", "h", "cpu", dev, cls, 1, NULL, NULL, 1, err, sizeof(err));
    kf_lease l[KF_QUEUE_MAX_LEASES];
    int n = 0;
    if (kf_queue_lease_many(db, &qc, "wo", cls, 1, 24, l, &n, err, sizeof(err)) != KF_Q_OK) return -1;
    static const double sp[] = { 1.0, 1.25, 1.5, 1.5, 0.8 };
    kf_result res[5], fail = ok_result(0);
    fail.verdict = "compile_error";
    for (int i = 0; i < 5; i++) res[i] = ok_result(sp[i]);
    kf_queue_item it[KF_QUEUE_MAX_LEASES];
    for (int i = 0; i < n; i++) item(&it[i], "wo", &l[i], i % 4 == 3 ? &fail : &res[i % 5]);
    kf_queue_result_group(db, &qc, it, n);
    int stored = 0;
    for (int i = 0; i < n; i++) stored += it[i].st == KF_Q_OK;
    return stored;
}

int main(void)
{
    char conninfo[1024], err[1024];
    if (!fresh_db("kft_operator", conninfo, sizeof(conninfo))) {
        fprintf(stderr, "needs a running devdb cluster (KFARM_DEVDB_DIR)\n");
        printf("0 passed, 1 failed\n");
        return 1;
    }
    kf_db *db = kf_db_open(conninfo, err, sizeof(err));
    CHECK(db != NULL, "%s", err);
    if (!db) goto out;
    CHECK(kf_db_migrate(db, NULL, err, sizeof(err)) == 0, "%s", err);
    CHECK(make_queue(db, "ops", 60) == 0, "campaign set up");
    CHECK(store_results(db) == 24, "24 results stored");

    char dir[] = "/tmp/kft-operator.XXXXXX", path[256], stale[256];
    if (!mkdtemp(dir)) goto out;
    snprintf(path, sizeof(path), "%s/ops.sock", dir);
    snprintf(stale, sizeof(stale), "%s/stale.sock", dir);

    /* no socket file yet: 1, at once */
    kf_ops_answer a;
    CHECK(kf_ops_status(path, "ops", 0, 0, 5000, &a, err, sizeof(err)) == 1, "no file: %s", err);

    kf_ops_service *s = kf_ops_service_start(conninfo, path, err, sizeof(err));
    CHECK(s != NULL, "service start: %s", err);
    if (!s) goto out;
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "socket mode %o", (unsigned)(st.st_mode & 0777));
    kf_ops_service *twin = kf_ops_service_start(conninfo, path, err, sizeof(err));
    CHECK(twin == NULL && strstr(err, "in use"), "a second service on a live socket: %s", err);
    kf_ops_service_stop(twin);

    /* the text report, byte for byte */
    int rc;
    char *direct = status_direct(db, "ops", 0, &rc);
    CHECK(rc == 0 && direct && strstr(direct, "verdicts:   ok 18, compile_error 6"), "direct status:\n%s",
          direct ? direct : "");
    CHECK(kf_ops_status(path, "ops", 0, 0, 30000, &a, err, sizeof(err)) == 0, "asked: %s", err);
    CHECK(a.exit_code == 0 && a.out && direct && strcmp(a.out, direct) == 0,
          "via the socket (exit %d):\n%s\ndirect:\n%s", a.exit_code, a.out ? a.out : "", direct ? direct : "");
    free(a.out);
    free(direct);

    /* --json: the same bests and blockers (progress has a rate of now) */
    char *dj = status_direct(db, "ops", 1, &rc);
    CHECK(kf_ops_status(path, "ops", 1, 0, 30000, &a, err, sizeof(err)) == 0 && a.exit_code == 0, "json: %s",
          err);
    json_t *x = json_loads(dj ? dj : "", 0, NULL), *y = json_loads(a.out ? a.out : "", 0, NULL);
    CHECK(x && y && json_equal(json_object_get(x, "bests"), json_object_get(y, "bests")) &&
              json_equal(json_object_get(x, "blockers"), json_object_get(y, "blockers")) &&
              json_equal(json_object_get(x, "id"), json_object_get(y, "id")) &&
              json_object_get(y, "progress"),
          "json via the socket differs:\n%s", a.out ? a.out : "");
    json_decref(x);
    json_decref(y);
    free(dj);
    free(a.out);

    /* current, not cached */
    CHECK(kf_campaign_pause(db, "ops", err, sizeof(err)) == 0, "pause: %s", err);
    CHECK(kf_ops_status(path, "ops", 0, 0, 30000, &a, err, sizeof(err)) == 0 && a.out &&
              strstr(a.out, "state:      paused"),
          "paused campaign reads: %s", a.out ? a.out : err);
    free(a.out);

    /* a missing campaign: exit 1, the CLI's reason */
    CHECK(kf_ops_status(path, "nope", 0, 0, 30000, &a, err, sizeof(err)) == 0 && a.exit_code == 1 &&
              strstr(a.error, "no campaign 'nope'"),
          "missing campaign: exit %d, %s", a.exit_code, a.error);
    free(a.out);

    /* refused: garbage, another build, a write, a status without a name */
    static const uint8_t junk[] = { 0xff, 0xff, 0xff, 0x0f, 0x12, 0x34 };
    CHECK(refused_with(raw_call(path, junk, sizeof(junk)), "malformed"), "garbage refused");
    CHECK(refused_with(raw_call(path, "", 0), "malformed"), "empty message refused");
    CHECK(refused_with(request(path, "0123456789ab", "campaign status", "ops"), "build"), "another build refused");
    CHECK(refused_with(request(path, KFARM_COMMIT, "campaign delete", "ops"), "not \"campaign delete\""),
          "a write refused");
    CHECK(refused_with(request(path, KFARM_COMMIT, "campaign status", NULL), "campaign status NAME"),
          "a status without a name refused");
    CHECK(kf_ops_status(path, "ops", 0, 0, 30000, &a, err, sizeof(err)) == 0 && a.exit_code == 0,
          "still answering after the refusals: %s", err);
    free(a.out);

    /* the service's connection dropped (a database restart): still answered */
    long long killed = q1(db, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                              "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                              "AND backend_type = 'client backend'");
    CHECK(killed == 1, "the service's connection terminated (%lld)", killed);
    sleep_ms(100);
    CHECK(kf_ops_status(path, "ops", 0, 0, 30000, &a, err, sizeof(err)) == 0 && a.exit_code == 0 && a.out &&
              strstr(a.out, "state:      paused"),
          "answered after its connection was dropped: exit %d %s %s", a.exit_code, a.error, err);
    free(a.out);

    /* stopped: the file is gone, and the client says so */
    kf_ops_service_stop(s);
    CHECK(access(path, F_OK) != 0, "socket file removed at stop");
    CHECK(kf_ops_status(path, "ops", 0, 0, 30000, &a, err, sizeof(err)) == 1, "after stop: %s", err);

    /* a socket file nobody listens on (a killed coordinator's): -1 at
     * once, not after the 30 s answer timeout */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    memcpy(sa.sun_path, stale, strlen(stale) < sizeof(sa.sun_path) ? strlen(stale) : sizeof(sa.sun_path) - 1);
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "stale socket: %s", strerror(errno));
    double t0 = kf_util_now_s();
    CHECK(kf_ops_status(stale, "ops", 0, 0, 30000, &a, err, sizeof(err)) == -1 && strstr(err, "no coordinator listens"),
          "stale socket: %s", err);
    CHECK(kf_util_now_s() - t0 < 5, "stale socket answered in %.1f s", kf_util_now_s() - t0);
    close(fd);
    unlink(stale);
    rmdir(dir);
out:
    kf_db_close(db);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
