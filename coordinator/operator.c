/*
 * operator.c -- the operator socket (operator.h): a thread that answers
 * `kfarm campaign status` from a warm connection, and the CLI's side.
 *
 * Transport: a plain AF_UNIX stream socket, one request per connection,
 * each message a 4-byte big-endian length and a serialized protobuf
 * (OperatorRequest / OperatorReply). Not nanomsg's ipc transport: that one
 * unlinks whatever file sits at the path when a connect to it is refused
 * (a regular file is deleted, a directory aborts the process), aborts on a
 * malformed frame from any peer, and gives a request-reply client no way to
 * tell "nobody listens" from "slow" (a REQ send never blocks). Here the
 * peer's user id is checked on every connection (SO_PEERCRED), every read
 * and write has a deadline, and the file is created 0600 before listen(2),
 * so no peer connects in between.
 *
 * The thread: poll the listening socket (0.25 s, to see a stop), accept,
 * check the peer, read the request (2 s), decide, run kf_status_write into
 * a memory stream, write the reply (10 s), close. The connection is opened
 * when the thread starts and again whenever kf_db finds it down.
 */
#define _GNU_SOURCE /* accept4, struct ucred */
#include "operator.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "db.h"
#include "kf_build_id.h" /* KF_BUILD_ID, generated at build time */
#include "kf_util.h"
#include "kf_wire.h"
#include "log.h"
#include "status.h"


#define KF_OPS_PATH_MAX 100           /* sun_path holds 108 bytes */
#define KF_OPS_REQUEST_MAX 4096       /* an OperatorRequest is a few names */
#define KF_OPS_REPLY_MAX (4u << 20)   /* a status is KBs (100 ties at most) */
#define KF_OPS_READ_MS 2000           /* a peer's whole request */
#define KF_OPS_WRITE_MS 10000         /* the reply to a peer */

struct kf_ops_service {
    pthread_t thread;
    atomic_int stop;
    int fd;
    dev_t dev; /* the socket file this service made: removed at stop only if still it */
    ino_t ino;
    char *conninfo;
    char path[KF_OPS_PATH_MAX + 1];
    char identity[1024]; /* kf_ops_db_identity of conninfo */
    double refused_log_s; /* last "peer refused" log line (at most one a minute) */
    kf_db *db;            /* the thread's own; NULL until the database answers */
};

/* Session options of the operator's connection: a short read that never
 * waits on an operator's lock for long and can never write; PostgreSQL's
 * JIT (15-35 ms per statement on a 1,000,000-result campaign,
 * cmd_campaign.c) off. A request that hits these limits is refused and the
 * CLI reads the database itself. */
static const char *const OPS_PG_OPTIONS = "-c jit=off -c lock_timeout=1000 -c statement_timeout=2000"
                                          " -c default_transaction_read_only=on -c application_name=kfarm-operator";

/* ---- framing: 4-byte big-endian length, then the message ---- */

/* Read (writing = 0) or write n bytes on non-blocking fd before deadline
 * (kf_util_now_s seconds). 0, or -1 with errno (ETIMEDOUT; EPIPE at EOF). */
static int io_all(int fd, uint8_t *buf, size_t n, int writing, double deadline)
{
    size_t done = 0;
    while (done < n) {
        ssize_t k = writing ? send(fd, buf + done, n - done, MSG_NOSIGNAL) : recv(fd, buf + done, n - done, 0);
        if (k > 0) {
            done += (size_t)k;
            continue;
        }
        if (k == 0) {
            errno = EPIPE;
            return -1;
        }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
        double left = deadline - kf_util_now_s();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd p = { fd, (short)(writing ? POLLOUT : POLLIN), 0 };
        if (poll(&p, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR) return -1;
    }
    return 0;
}

static int send_msg(int fd, const uint8_t *body, size_t n, double deadline)
{
    uint8_t h[4] = { (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n };
    if (io_all(fd, h, 4, 1, deadline) < 0) return -1;
    return n ? io_all(fd, (uint8_t *)body, n, 1, deadline) : 0;
}

/* One message of at most max bytes: *body malloc'ed (free it). 0, or -1
 * with errno (EMSGSIZE when longer than max). */
static int recv_msg(int fd, size_t max, uint8_t **body, size_t *n, double deadline)
{
    uint8_t h[4];
    *body = NULL;
    if (io_all(fd, h, 4, 0, deadline) < 0) return -1;
    *n = (size_t)h[0] << 24 | (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
    if (*n > max) {
        errno = EMSGSIZE;
        return -1;
    }
    if (!(*body = malloc(*n ? *n : 1))) return -1;
    if (io_all(fd, *body, *n, 0, deadline) < 0) {
        free(*body);
        *body = NULL;
        return -1;
    }
    return 0;
}

static int sun_addr(const char *path, struct sockaddr_un *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    size_t n = strlen(path);
    if (n == 0 || n > KF_OPS_PATH_MAX) return -1;
    memcpy(sa->sun_path, path, n);
    return 0;
}

/* ---- the database's identity ---- */

/* v when set, else $name, else "" */
static const char *or_env(const char *v, const char *name)
{
    const char *e = v ? v : getenv(name);
    return e ? e : "";
}

int kf_ops_db_identity(const char *conninfo, char *out, size_t cap, char *err, size_t errlen)
{
    out[0] = 0;
    if (!conninfo || !conninfo[0]) conninfo = getenv("KFARM_DB");
    if (!conninfo || !conninfo[0]) return 0;
    char *perr = NULL;
    PQconninfoOption *o = PQconninfoParse(conninfo, &perr);
    if (!o) {
        snprintf(err, errlen, "the database conninfo does not parse: %s", perr ? perr : "out of memory");
        PQfreemem(perr);
        return -1;
    }
    /* the keywords that choose the database or change what status
     * prints, each from the conninfo, else its environment variable */
    static const char *const keys[][2] = {
        { "host", "PGHOST" },         { "hostaddr", "PGHOSTADDR" },
        { "port", "PGPORT" },         { "dbname", "PGDATABASE" },
        { "user", "PGUSER" }, /* dbname's default */
        { "options", "PGOPTIONS" },   { "client_encoding", "PGCLIENTENCODING" },
        { "service", "PGSERVICE" },   { "servicefile", "PGSERVICEFILE" },
    };
    size_t len = 0;
    int n;
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
        const char *v = NULL;
        for (PQconninfoOption *p = o; p->keyword; p++)
            if (p->val && !strcmp(p->keyword, keys[k][0])) v = p->val;
        n = snprintf(out + len, cap - len, "%s=%s ", keys[k][0], or_env(v, keys[k][1]));
        if (n < 0 || (size_t)n >= cap - len) goto long_;
        len += (size_t)n;
    }
    /* session settings libpq takes from the environment alone; a service
     * file found by its directory stands for its own contents */
    n = snprintf(out + len, cap - len, "tz=%s datestyle=%s sysconfdir=%s", or_env(NULL, "PGTZ"),
                 or_env(NULL, "PGDATESTYLE"), or_env(NULL, "PGSYSCONFDIR"));
    if (n < 0 || (size_t)n >= cap - len) goto long_;
    PQconninfoFree(o);
    return 0;
long_:
    PQconninfoFree(o);
    snprintf(err, errlen, "the database conninfo is too long for the operator socket (%zu bytes at most)", cap);
    out[0] = 0;
    return -1;
}

/* ---- the service ---- */

static int ensure_db(kf_ops_service *s, char *err, size_t errlen)
{
    if (!s->db) {
        s->db = kf_db_open_with(s->conninfo, OPS_PG_OPTIONS, err, errlen);
        if (!s->db) return -1;
        kf_db_set_prepare(s->db, 1);
        return 0;
    }
    return kf_db_ensure(s->db, err, errlen);
}

/* A campaign name as a log line may carry it: at most 64 bytes, control
 * characters as '?'. */
static const char *printable(const char *s, char buf[68])
{
    size_t i = 0;
    for (; s[i] && i < 64; i++) buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    buf[i] = 0;
    return buf;
}

#define REFUSE(...)                                 \
    do {                                            \
        snprintf(err, errlen, __VA_ARGS__);         \
        r->has_refused = r->refused = 1;            \
        r->exit_code = 1;                           \
    } while (0)

/* Answer one request (msg, n bytes): fills *r; *out holds the bytes r->out
 * points into (caller frees). */
static void answer(kf_ops_service *s, const uint8_t *msg, size_t n, Kfarm__OperatorReply *r, char **out,
                   char *err, size_t errlen)
{
    *out = NULL;
    err[0] = 0;
    Kfarm__OperatorRequest *q = kfarm__operator_request__unpack(NULL, n, msg);
    if (!q) {
        REFUSE("malformed operator request (%zu bytes)", n);
    } else if (strcmp(q->build, KF_BUILD_ID) != 0 || !strcmp(KF_BUILD_ID, "unknown")) {
        REFUSE("the coordinator runs build %s, this kfarm build %.64s", KF_BUILD_ID, q->build);
    } else if (!q->has_format || q->format != KF_STATUS_FORMAT) {
        REFUSE("the coordinator writes status format %d, this kfarm %d", KF_STATUS_FORMAT,
               q->has_format ? (int)q->format : 0);
    } else if (strcmp(q->command, "campaign status") != 0 || !q->campaign) {
        REFUSE("the operator socket answers \"campaign status NAME\", not \"%.64s\"", q->command);
    } else if (q->database && q->database[0] && strcmp(q->database, s->identity) != 0) {
        REFUSE("the coordinator serves another database (%.400s), not (%.400s)", s->identity, q->database);
    } else if (ensure_db(s, err, errlen) < 0) {
        r->has_refused = r->refused = 1;
        r->exit_code = 1;
    } else {
        size_t len = 0;
        FILE *f = open_memstream(out, &len);
        int rc = f ? kf_status_write(s->db, q->campaign, q->has_json && q->json, q->has_tty && q->tty, f,
                                     err, errlen)
                   : (snprintf(err, errlen, "open_memstream: %s", strerror(errno)), -1);
        if (f) fclose(f);
        if (rc < 0) { /* a database error: the CLI tries the database itself */
            char nb[68];
            kf_log("operator socket: campaign status %s: %s", printable(q->campaign, nb), err);
            r->has_refused = r->refused = 1;
            r->exit_code = 1;
        } else {
            r->exit_code = rc ? 1 : 0;
            r->has_out = 1;
            r->out.data = (uint8_t *)*out;
            r->out.len = *out ? len : 0;
        }
    }
    if (err[0]) r->error = err;
    if (q) kfarm__operator_request__free_unpacked(q, NULL);
}

/* One connection: the peer's user id, its request, the reply. */
static void serve(kf_ops_service *s, int c)
{
    struct ucred cr;
    socklen_t cl = sizeof(cr);
    if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.uid != geteuid()) {
        double now = kf_util_now_s();
        if (now - s->refused_log_s > 60) {
            kf_log("operator socket: refused a peer of uid %ld (only uid %ld is answered)",
                   cl == sizeof(cr) ? (long)cr.uid : -1L, (long)geteuid());
            s->refused_log_s = now;
        }
        return;
    }
    uint8_t *msg = NULL;
    size_t n = 0;
    if (recv_msg(c, KF_OPS_REQUEST_MAX, &msg, &n, kf_util_now_s() + KF_OPS_READ_MS / 1000.0) < 0) {
        if (errno == EMSGSIZE) { /* say so: the CLI reads the database */
            Kfarm__OperatorReply r = KFARM__OPERATOR_REPLY__INIT;
            char e[96];
            snprintf(e, sizeof(e), "operator request longer than %d bytes", KF_OPS_REQUEST_MAX);
            r.has_refused = r.refused = 1;
            r.exit_code = 1;
            r.error = e;
            uint8_t b[160];
            size_t bl = kfarm__operator_reply__pack(&r, b);
            send_msg(c, b, bl, kf_util_now_s() + KF_OPS_READ_MS / 1000.0);
        }
        return;
    }
    Kfarm__OperatorReply r = KFARM__OPERATOR_REPLY__INIT;
    char *out = NULL, err[1024];
    answer(s, msg, n, &r, &out, err, sizeof(err));
    free(msg);
    size_t len = kfarm__operator_reply__get_packed_size(&r);
    uint8_t *buf = malloc(len ? len : 1);
    if (buf) {
        kfarm__operator_reply__pack(&r, buf);
        /* a CLI that gave up meanwhile: EPIPE, nothing waits */
        send_msg(c, buf, len, kf_util_now_s() + KF_OPS_WRITE_MS / 1000.0);
    }
    free(buf);
    free(out);
}

static void *ops_thread(void *arg)
{
    kf_ops_service *s = arg;
    char err[1024];
    if (ensure_db(s, err, sizeof(err)) < 0) /* warm it now; retried per request */
        kf_log("operator socket: %s (retried on the next request)", err);
    while (!atomic_load(&s->stop)) {
        struct pollfd p = { s->fd, POLLIN, 0 };
        if (poll(&p, 1, 250) <= 0) continue;
        int c = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0) {
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
                struct timespec ts = { 0, 100 * 1000000L }; /* out of descriptors: no busy loop */
                nanosleep(&ts, NULL);
            }
            continue;
        }
        serve(s, c);
        close(c);
    }
    return NULL;
}

kf_ops_service *kf_ops_service_start(const char *conninfo, const char *path, char *err, size_t errlen)
{
    struct sockaddr_un sa;
    if (!path || sun_addr(path, &sa) < 0) {
        snprintf(err, errlen, "--operator-socket: expected a file name of 1..%d bytes", KF_OPS_PATH_MAX);
        return NULL;
    }
    kf_ops_service *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->fd = -1;
    snprintf(s->path, sizeof(s->path), "%s", path);
    atomic_init(&s->stop, 0);
    if (kf_ops_db_identity(conninfo, s->identity, sizeof(s->identity), err, errlen) < 0) goto fail;
    if (conninfo && !(s->conninfo = strdup(conninfo))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    /* what is at the path: nothing, a dead coordinator's socket (replaced),
     * a live one's (refused) or anything else (never touched) */
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(err, errlen, "operator socket %s: the path exists and is not a socket (not replaced)", path);
            goto fail;
        }
        /* non-blocking: a listener whose queue is full says EAGAIN, alive */
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int live = probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        int e = errno;
        if (!live && e == EAGAIN) live = 1;
        if (probe >= 0) close(probe);
        if (live) {
            snprintf(err, errlen, "operator socket %s: another coordinator listens there", path);
            goto fail;
        }
        if (e != ECONNREFUSED || unlink(path) < 0) {
            snprintf(err, errlen, "operator socket %s: %s", path, strerror(e != ECONNREFUSED ? e : errno));
            goto fail;
        }
    }
    s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        snprintf(err, errlen, "operator socket %s: %s", path, strerror(errno));
        goto fail;
    }
    /* 0600 before listen(2): no peer can connect before it holds */
    if (chmod(path, 0600) < 0 || lstat(path, &st) < 0 || listen(s->fd, 16) < 0) {
        snprintf(err, errlen, "operator socket %s: %s", path, strerror(errno));
        unlink(path);
        goto fail;
    }
    s->dev = st.st_dev;
    s->ino = st.st_ino;
    if (pthread_create(&s->thread, NULL, ops_thread, s) != 0) {
        snprintf(err, errlen, "operator socket: cannot start its thread");
        unlink(path);
        goto fail;
    }
    return s;
fail:
    if (s->fd >= 0) close(s->fd);
    free(s->conninfo);
    free(s);
    return NULL;
}

void kf_ops_service_stop(kf_ops_service *s)
{
    if (!s) return;
    atomic_store(&s->stop, 1);
    pthread_join(s->thread, NULL);
    close(s->fd);
    struct stat st; /* only the file this service made: not a successor's */
    if (lstat(s->path, &st) == 0 && st.st_dev == s->dev && st.st_ino == s->ino) unlink(s->path);
    kf_db_close(s->db);
    free(s->conninfo);
    free(s);
}

/* ---- the CLI's side ---- */

int kf_ops_status(const char *path, const char *conninfo, const char *campaign, int json, int tty,
                  int timeout_ms, kf_ops_answer *ans, char *err, size_t errlen)
{
    memset(ans, 0, sizeof(*ans));
    struct sockaddr_un sa;
    if (sun_addr(path, &sa) < 0) {
        snprintf(err, errlen, "operator socket %s: expected a file name of 1..%d bytes", path, KF_OPS_PATH_MAX);
        return -1;
    }
    char ident[1024];
    if (kf_ops_db_identity(conninfo, ident, sizeof(ident), err, errlen) < 0) return -1;
    Kfarm__OperatorRequest q = KFARM__OPERATOR_REQUEST__INIT;
    q.build = (char *)KF_BUILD_ID;
    q.command = (char *)"campaign status";
    q.campaign = (char *)campaign;
    q.has_json = q.has_tty = q.has_format = 1;
    q.json = json != 0;
    q.tty = tty != 0;
    q.format = KF_STATUS_FORMAT;
    q.database = ident;
    size_t qlen = kfarm__operator_request__get_packed_size(&q);
    if (qlen > KF_OPS_REQUEST_MAX) {
        snprintf(err, errlen, "campaign name too long for the operator socket");
        return -1;
    }
    uint8_t qbuf[KF_OPS_REQUEST_MAX];
    kfarm__operator_request__pack(&q, qbuf);
    /* non-blocking from the start: a coordinator whose queue of waiting
     * connections is full would hold a blocking connect(2) without limit */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        if (e == ENOENT) {
            snprintf(err, errlen, "no operator socket at %s", path);
            return 1;
        }
        if (e == EACCES || e == EPERM)
            snprintf(err, errlen, "not permitted to use the operator socket at %s (%s)", path, strerror(e));
        else if (e == ECONNREFUSED)
            snprintf(err, errlen, "no coordinator listens at %s (%s)", path, strerror(e));
        else if (e == EAGAIN)
            snprintf(err, errlen, "the coordinator at %s is busy (its queue of requests is full)", path);
        else
            snprintf(err, errlen, "operator socket %s: %s", path, strerror(e));
        return -1;
    }
    /* the listener must be the user's own, as the coordinator requires of
     * its peers: a socket another user bound first gets no question */
    struct ucred cr;
    socklen_t cl = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.uid != geteuid()) {
        snprintf(err, errlen, "the operator socket at %s belongs to uid %ld, not to this user: not asked", path,
                 cl == sizeof(cr) ? (long)cr.uid : -1L);
        close(fd);
        return -1;
    }
    double deadline = kf_util_now_s() + timeout_ms / 1000.0;
    uint8_t *msg = NULL;
    size_t n = 0;
    int rc = -1;
    if (send_msg(fd, qbuf, qlen, deadline) < 0 || recv_msg(fd, KF_OPS_REPLY_MAX, &msg, &n, deadline) < 0) {
        if (errno == ETIMEDOUT)
            snprintf(err, errlen, "the coordinator at %s did not answer within %d ms", path, timeout_ms);
        else
            snprintf(err, errlen, "the coordinator at %s gave no answer (%s)", path,
                     errno == EPIPE ? "it closed the connection: another user?" : strerror(errno));
        goto done;
    }
    Kfarm__OperatorReply *r = kfarm__operator_reply__unpack(NULL, n, msg);
    if (!r) {
        snprintf(err, errlen, "operator socket %s: malformed answer (%zu bytes)", path, n);
        goto done;
    }
    if (r->has_refused && r->refused) {
        snprintf(err, errlen, "the coordinator at %s did not answer: %s", path, r->error ? r->error : "no reason");
    } else if ((ans->out = malloc(r->has_out ? r->out.len + 1 : 1))) {
        ans->out_len = r->has_out ? r->out.len : 0;
        if (ans->out_len) memcpy(ans->out, r->out.data, ans->out_len);
        ans->out[ans->out_len] = 0;
        ans->exit_code = r->exit_code;
        snprintf(ans->error, sizeof(ans->error), "%s", r->error ? r->error : "");
        rc = 0;
    } else {
        snprintf(err, errlen, "out of memory");
    }
    kfarm__operator_reply__free_unpacked(r, NULL);
done:
    free(msg);
    close(fd);
    return rc;
}
