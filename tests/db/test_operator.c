/*
 * test_operator.c -- the coordinator's operator socket (coordinator/operator.h)
 * against a real PostgreSQL: what an operator relies on when
 * `kfarm campaign status` is answered by a running coordinator.
 *
 *  - the answer is byte for byte what reading the database prints (text),
 *    and the same bests and blockers (--json), for a campaign with results;
 *  - it is current: a campaign paused after a first answer reads paused;
 *  - a missing campaign is exit 1 with the CLI's own reason;
 *  - only for the same database: a request naming another one (or other
 *    session settings) is refused, so the CLI reads its own;
 *  - a database error (a lock held elsewhere) is refused within the lock
 *    timeout, not answered as the command's failure;
 *  - the socket file is 0600, a peer of another user id gets no answer, a
 *    second service on a live socket is refused, and a path that exists and
 *    is not a socket (a file, a directory) is refused and left as it was;
 *  - garbage, an oversized or empty message, another build or status
 *    format and a command that is not a read are refused with the reason,
 *    and the service goes on answering;
 *  - a database connection dropped under it (pg_terminate_backend, as a
 *    restart does) costs no answer;
 *  - with no socket file, a file nobody listens on (a coordinator that was
 *    killed) or a listener that never answers, the client says so (1 / -1:
 *    at once, or at its timeout) and the CLI reads the database;
 *  - a stopped service removes its socket file, but not a successor's.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "kf_build_id.h"
#include "kf_util.h"
#include "operator.h"
#include "status.h"

#include "db_test.h"


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

/* Connect to the socket at path: the fd, or -1. */
static int dial(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    memcpy(sa.sun_path, path, strlen(path) < sizeof(sa.sun_path) ? strlen(path) : sizeof(sa.sun_path) - 1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct timeval tv = { 10, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) return fd;
    if (fd >= 0) close(fd);
    return -1;
}

/* Bytes as given (framed with their length unless raw), then the decoded
 * reply, or NULL when none came. */
static Kfarm__OperatorReply *raw_call(const char *path, const void *msg, size_t len, int raw)
{
    int fd = dial(path);
    if (fd < 0) return NULL;
    uint8_t h[4] = { (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len };
    Kfarm__OperatorReply *r = NULL;
    /* the reply is read even when the send failed: a service that refuses
     * an oversized request answers and closes before it is all sent */
    if (!raw) send(fd, h, 4, MSG_NOSIGNAL);
    if (len) send(fd, msg, len, MSG_NOSIGNAL);
    {
        uint8_t rh[4];
        if (recv(fd, rh, 4, MSG_WAITALL) == 4) {
            size_t n = (size_t)rh[0] << 24 | (size_t)rh[1] << 16 | (size_t)rh[2] << 8 | rh[3];
            uint8_t *b = malloc(n ? n : 1);
            if (b && (n == 0 || recv(fd, b, n, MSG_WAITALL) == (ssize_t)n))
                r = kfarm__operator_reply__unpack(NULL, n, b);
            free(b);
        }
    }
    close(fd);
    return r;
}

static Kfarm__OperatorReply *request(const char *path, const char *build, unsigned format, const char *command,
                                     const char *campaign, const char *database)
{
    Kfarm__OperatorRequest q = KFARM__OPERATOR_REQUEST__INIT;
    q.build = (char *)build;
    q.command = (char *)command;
    q.campaign = (char *)campaign;
    q.has_format = 1;
    q.format = format;
    q.database = (char *)database;
    uint8_t buf[8192];
    size_t n = kfarm__operator_request__pack(&q, buf);
    return raw_call(path, buf, n, 0);
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

/* kf_ops_status against the test's database (conninfo), 5 s timeout. */
#define ASK(path, name, json, a) kf_ops_status(path, conninfo, name, json, 0, 5000, a, err, sizeof(err))

int main(void)
{
    char conninfo[1024], err[1024];
    signal(SIGPIPE, SIG_IGN); /* a peer that closes early is a check's failure, not the test's end */
    if (!fresh_db("kft_operator", conninfo, sizeof(conninfo))) {
        fprintf(stderr, "needs a running devdb cluster (KFARM_DEVDB_DIR)\n");
        printf("0 passed, 1 failed\n");
        return 1;
    }
    kf_db *db = kf_db_open(conninfo, err, sizeof(err)), *locker = NULL;
    CHECK(db != NULL, "%s", err);
    if (!db) goto out;
    CHECK(kf_db_migrate(db, NULL, err, sizeof(err)) == 0, "%s", err);
    CHECK(make_queue(db, "ops", 60) == 0, "campaign set up");
    CHECK(store_results(db) == 24, "24 results stored");

    char dir[] = "/tmp/kft-operator.XXXXXX", path[256], stale[256], other[256];
    if (!mkdtemp(dir)) goto out;
    snprintf(path, sizeof(path), "%s/ops.sock", dir);
    snprintf(stale, sizeof(stale), "%s/stale.sock", dir);
    snprintf(other, sizeof(other), "%s/notes.txt", dir);
    char ident[1024];
    CHECK(kf_ops_db_identity(conninfo, ident, sizeof(ident), err, sizeof(err)) == 0 && strstr(ident, "dbname=kft_operator"),
          "identity: %s", ident);

    /* no socket file yet: 1, at once */
    kf_ops_answer a;
    CHECK(ASK(path, "ops", 0, &a) == 1, "no file: %s", err);

    /* a path that is not a socket: refused, and left as it was */
    FILE *nf = fopen(other, "w");
    if (nf) fputs("an operator's notes\n", nf), fclose(nf);
    CHECK(kf_ops_service_start(conninfo, other, err, sizeof(err)) == NULL && strstr(err, "not a socket") &&
              access(other, F_OK) == 0,
          "a regular file at the path: %s", err);
    CHECK(kf_ops_service_start(conninfo, dir, err, sizeof(err)) == NULL && strstr(err, "not a socket"),
          "a directory at the path: %s", err);

    kf_ops_service *s = kf_ops_service_start(conninfo, path, err, sizeof(err));
    CHECK(s != NULL, "service start: %s", err);
    if (!s) goto out;
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "socket mode %o", (unsigned)(st.st_mode & 0777));
    kf_ops_service *twin = kf_ops_service_start(conninfo, path, err, sizeof(err));
    CHECK(twin == NULL && strstr(err, "another coordinator listens"), "a second service on a live socket: %s", err);
    kf_ops_service_stop(twin);

    if (!strcmp(KF_BUILD_ID, "unknown")) { /* a build outside git: never answered */
        fprintf(stderr, "note: a build outside git (KF_BUILD_ID unknown): only its refusal is checked\n");
        CHECK(ASK(path, "ops", 0, &a) == -1 && strstr(err, "build"), "an unknown build refused: %s", err);
        kf_ops_service_stop(s);
        goto out;
    }

    /* the text report, byte for byte */
    int rc;
    char *direct = status_direct(db, "ops", 0, &rc);
    CHECK(rc == 0 && direct && strstr(direct, "verdicts:   ok 18, compile_error 6"), "direct status:\n%s",
          direct ? direct : "");
    CHECK(ASK(path, "ops", 0, &a) == 0, "asked: %s", err);
    CHECK(a.exit_code == 0 && a.out && direct && strcmp(a.out, direct) == 0,
          "via the socket (exit %d):\n%s\ndirect:\n%s", a.exit_code, a.out ? a.out : "", direct ? direct : "");
    free(a.out);
    free(direct);
    /* a CLI without a database of its own is answered too */
    CHECK(kf_ops_status(path, "", "ops", 0, 0, 5000, &a, err, sizeof(err)) == 0 && a.exit_code == 0,
          "no database named: %s", err);
    free(a.out);

    /* --json: the same bests and blockers (progress has a rate of now) */
    char *dj = status_direct(db, "ops", 1, &rc);
    CHECK(ASK(path, "ops", 1, &a) == 0 && a.exit_code == 0, "json: %s", err);
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
    CHECK(ASK(path, "ops", 0, &a) == 0 && a.out && strstr(a.out, "state:      paused"), "paused campaign reads: %s",
          a.out ? a.out : err);
    free(a.out);

    /* a missing campaign: exit 1, the CLI's reason */
    CHECK(ASK(path, "nope", 0, &a) == 0 && a.exit_code == 1 && strstr(a.error, "no campaign 'nope'"),
          "missing campaign: exit %d, %s", a.exit_code, a.error);
    free(a.out);

    /* only for the same database and session settings */
    char conn2[1200];
    snprintf(conn2, sizeof(conn2), "%s dbname=kft_other", conninfo);
    CHECK(kf_ops_status(path, conn2, "ops", 0, 0, 5000, &a, err, sizeof(err)) == -1 &&
              strstr(err, "another database"),
          "another database refused: %s", err);
    setenv("PGTZ", "Asia/Tokyo", 1);
    CHECK(ASK(path, "ops", 0, &a) == -1 && strstr(err, "another database"), "another time zone refused: %s", err);
    unsetenv("PGTZ");

    /* a database error (a lock held elsewhere): refused within the 2 s lock
     * timeout, so the CLI reads the database itself */
    locker = kf_db_open(conninfo, err, sizeof(err));
    exec_ok(locker, "BEGIN");
    exec_ok(locker, "LOCK TABLE campaign_counts IN ACCESS EXCLUSIVE MODE");
    double t0 = kf_util_now_s();
    CHECK(ASK(path, "ops", 0, &a) == -1 && strstr(err, "lock timeout"), "a locked table: %s", err);
    CHECK(kf_util_now_s() - t0 < 4.5, "refused after %.1f s", kf_util_now_s() - t0);
    exec_ok(locker, "ROLLBACK");

    /* refused: garbage, an oversized, empty or unframed message, another
     * build or format, a write, a status without a name */
    static const uint8_t junk[] = { 0xff, 0xff, 0xff, 0x0f, 0x12, 0x34 };
    CHECK(refused_with(raw_call(path, junk, sizeof(junk), 0), "malformed"), "garbage refused");
    CHECK(refused_with(raw_call(path, "", 0, 0), "malformed"), "empty message refused");
    CHECK(refused_with(raw_call(path, junk, sizeof(junk), 1), "longer than"), "an unframed message refused");
    char big[5000];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    CHECK(refused_with(request(path, KF_BUILD_ID, KF_STATUS_FORMAT, "campaign status", big, ""), "longer than"),
          "an oversized request refused");
    CHECK(refused_with(request(path, "0123456789ab", KF_STATUS_FORMAT, "campaign status", "ops", ""), "build"),
          "another build refused");
    CHECK(refused_with(request(path, KF_BUILD_ID, KF_STATUS_FORMAT + 1, "campaign status", "ops", ""), "format"),
          "another status format refused");
    CHECK(refused_with(request(path, KF_BUILD_ID, KF_STATUS_FORMAT, "campaign delete", "ops", ""),
                       "not \"campaign delete\""),
          "a write refused");
    CHECK(refused_with(request(path, KF_BUILD_ID, KF_STATUS_FORMAT, "campaign status", NULL, ""),
                       "campaign status NAME"),
          "a status without a name refused");
    CHECK(ASK(path, "ops", 0, &a) == 0 && a.exit_code == 0, "still answering after the refusals: %s", err);
    free(a.out);

    /* a peer of another user id: connected, but no answer (needs root to
     * become one; the directory and the file opened to it for the check,
     * so that only the SO_PEERCRED check can refuse it) */
    if (geteuid() == 0) {
        chmod(dir, 0755);
        chmod(path, 0666);
        pid_t pid = fork();
        if (pid == 0) {
            if (setgid(65534) < 0 || setuid(65534) < 0) _exit(3);
            int fd = dial(path);
            if (fd < 0) _exit(2);
            Kfarm__OperatorRequest q = KFARM__OPERATOR_REQUEST__INIT;
            q.build = (char *)KF_BUILD_ID;
            q.command = (char *)"campaign status";
            q.campaign = (char *)"ops";
            uint8_t b[512], h[4] = { 0, 0, 0, 0 };
            size_t n = kfarm__operator_request__pack(&q, b);
            h[3] = (uint8_t)n;
            send(fd, h, 4, MSG_NOSIGNAL);
            send(fd, b, n, MSG_NOSIGNAL);
            _exit(recv(fd, h, 4, MSG_WAITALL) == 4 ? 1 : 0);
        }
        int ws = 0;
        waitpid(pid, &ws, 0);
        if (WIFEXITED(ws) && WEXITSTATUS(ws) == 3)
            fprintf(stderr, "note: cannot become uid 65534 here, the other-user check is skipped\n");
        else
            CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0,
                  "a peer of uid 65534: exit %d (1: answered, 2: could not connect)", WEXITSTATUS(ws));
        chmod(path, 0600);
        chmod(dir, 0700);
    } else {
        fprintf(stderr, "note: not root, the other-user check is skipped\n");
    }

    /* the service's connection dropped (a database restart): still answered */
    long long killed = q1(db, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                              "WHERE datname = current_database() AND application_name = 'kfarm-operator'");
    CHECK(killed == 1, "the service's connection terminated (%lld)", killed);
    sleep_ms(100);
    CHECK(ASK(path, "ops", 0, &a) == 0 && a.exit_code == 0 && a.out && strstr(a.out, "state:      paused"),
          "answered after its connection was dropped: exit %d %s %s", a.exit_code, a.error, err);
    free(a.out);

    /* session options on both sides (PGOPTIONS, as a user may set them):
     * the operator's session keeps them beside its own, so the answer is
     * still the direct one (a time zone changes the "created:" line) */
    {
        char path2[300];
        snprintf(path2, sizeof(path2), "%s/ops2.sock", dir);
        setenv("PGOPTIONS", "-c TimeZone=Pacific/Kiritimati", 1);
        kf_ops_service *s2 = kf_ops_service_start(conninfo, path2, err, sizeof(err));
        kf_db *dk = kf_db_open(conninfo, err, sizeof(err));
        int rk = -1;
        char *dt = dk ? status_direct(dk, "ops", 0, &rk) : NULL;
        CHECK(s2 && rk == 0 && ASK(path2, "ops", 0, &a) == 0 && a.out && dt && !strcmp(a.out, dt),
              "with PGOPTIONS set on both sides:\n%s\ndirect:\n%s", a.out ? a.out : err, dt ? dt : "");
        free(a.out);
        free(dt);
        kf_db_close(dk);
        kf_ops_service_stop(s2);
        unsetenv("PGOPTIONS");
    }

    /* stopped: the file is gone, and the client says so */
    kf_ops_service_stop(s);
    CHECK(access(path, F_OK) != 0, "socket file removed at stop");
    CHECK(ASK(path, "ops", 0, &a) == 1, "after stop: %s", err);

    /* a socket file nobody listens on (a killed coordinator's): -1 at once */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    memcpy(sa.sun_path, stale, strlen(stale) < sizeof(sa.sun_path) ? strlen(stale) : sizeof(sa.sun_path) - 1);
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "stale socket: %s", strerror(errno));
    t0 = kf_util_now_s();
    CHECK(ASK(stale, "ops", 0, &a) == -1 && strstr(err, "no coordinator listens"), "stale socket: %s", err);
    CHECK(kf_util_now_s() - t0 < 4, "stale socket answered in %.1f s", kf_util_now_s() - t0);
    /* ... a listener that never answers: -1 at the client's timeout */
    CHECK(listen(fd, 4) == 0, "listen: %s", strerror(errno));
    t0 = kf_util_now_s();
    CHECK(kf_ops_status(stale, conninfo, "ops", 0, 0, 500, &a, err, sizeof(err)) == -1 &&
              strstr(err, "did not answer within 500 ms"),
          "a silent listener: %s", err);
    CHECK(kf_util_now_s() - t0 < 4, "a silent listener took %.1f s", kf_util_now_s() - t0);
    close(fd);
    unlink(stale);
    /* ... a listener whose queue is full: -1 at once ("busy"), never a
     * connect(2) that waits for it */
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(fd, 0) == 0, "busy: %s",
          strerror(errno));
    int fill[64], nfill = 0;
    for (; nfill < 64; nfill++) {
        fill[nfill] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (connect(fill[nfill], (struct sockaddr *)&sa, sizeof(sa)) < 0) {
            close(fill[nfill]);
            break;
        }
    }
    t0 = kf_util_now_s();
    CHECK(nfill < 64 && kf_ops_status(stale, conninfo, "ops", 0, 0, 500, &a, err, sizeof(err)) == -1,
          "a full queue (%d waiting): %s", nfill, err);
    CHECK(kf_util_now_s() - t0 < 4, "a full queue took %.1f s", kf_util_now_s() - t0);
    for (int i = 0; i < nfill; i++) close(fill[i]);
    close(fd);
    unlink(stale);
    /* ... a listener of another user id: not asked */
    if (geteuid() == 0) {
        chmod(dir, 0777);
        int pfd[2];
        if (pipe(pfd) == 0) {
            pid_t pid = fork();
            if (pid == 0) {
                close(pfd[0]);
                if (setgid(65534) < 0 || setuid(65534) < 0) _exit(3);
                int l = socket(AF_UNIX, SOCK_STREAM, 0);
                if (bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l, 4) < 0) _exit(4);
                chmod(stale, 0666);
                if (write(pfd[1], "r", 1) != 1) _exit(5);
                sleep(10);
                _exit(0);
            }
            close(pfd[1]);
            char ready = 0;
            if (read(pfd[0], &ready, 1) == 1) {
                CHECK(kf_ops_status(stale, conninfo, "ops", 0, 0, 2000, &a, err, sizeof(err)) == -1 &&
                          strstr(err, "belongs to uid 65534"),
                      "another user's listener: %s", err);
            } else {
                fprintf(stderr, "note: cannot become uid 65534 here, the other-user listener check is skipped\n");
            }
            close(pfd[0]);
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            unlink(stale);
        }
        chmod(dir, 0700);
    }

    /* a stopping service leaves a successor's socket file alone */
    s = kf_ops_service_start(conninfo, path, err, sizeof(err));
    CHECK(s != NULL, "restart: %s", err);
    unlink(path);
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    memset(sa.sun_path, 0, sizeof(sa.sun_path));
    memcpy(sa.sun_path, path, strlen(path));
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "successor: %s", strerror(errno));
    kf_ops_service_stop(s);
    CHECK(access(path, F_OK) == 0, "a successor's socket file removed at stop");
    close(fd);
    unlink(path);
    unlink(other);
    rmdir(dir);
out:
    kf_db_close(locker);
    kf_db_close(db);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
