/*
 * bench_wire.c -- cost of the wire layer: HMAC envelopes and nanomsg REQ/REP.
 *
 *   bench_wire [--sizes 256,65536,1048576,4194304] [--scale F]
 *
 * Two measurements per body size S (random bytes, as a serialized Request or
 * Reply would be):
 *
 *  1. seal+open: kf_frame_seal (header and body HMAC-SHA256 with a worker's
 *     direction key) followed by kf_frame_parse + both MAC checks (constant-
 *     time compares) + the clock check of the same frame, in one thread. Per pair: latency; messages/s;
 *     MB/s of body.
 *
 *  2. round trip: a REQ client and a REP server thread in this process over
 *     ipc:// (a unix socket, so the bytes really cross the kernel). The
 *     client seals S bytes and sends; the server opens, seals the same body
 *     back and replies; the client opens the reply and checks it. That is
 *     4 MACs and 2 socket transfers of S bytes per round trip -- the shape of
 *     a worker uploading a result with a large log, or pulling a job with
 *     large task files. MB/s counts the body once (one direction).
 *
 * Each size runs clamp(64 MiB / S, 100, 20000) * F iterations after a few
 * warm-up ones; latencies are per operation (CLOCK_MONOTONIC), percentiles by
 * nearest rank (with ~100 samples p99 is close to the maximum).
 *
 * Output: a human table on stdout, plus machine-readable lines:
 *   RESULT wire kind=sealopen|roundtrip bytes=S n=.. msgs_per_s=.. mb_per_s=.. p50_us=.. p99_us=..
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>

#include "kf_wire.h"

static const uint8_t bench_instance[KF_WIRE_INSTANCE_LEN] = { 7 };

/* Seal body as a request (worker key "up") or reply ("down"). */
static int b_seal(const kf_wire_key *k, int reply, const uint8_t *body, size_t len, uint8_t **out,
                  size_t *outlen, char *err, size_t errlen)
{
    static __thread uint64_t counter;
    return kf_frame_seal(reply ? KF_FRAME_REPLY : KF_FRAME_REQUEST, reply ? k->down : k->up, "bench",
                         bench_instance, ++counter, body, len, out, outlen, err, errlen);
}

/* Parse and authenticate; *body points into msg. 0 or -1 with reason. */
static int b_open(const kf_wire_key *k, int reply, const uint8_t *msg, size_t len,
                  const uint8_t **body, size_t *blen, char *err, size_t errlen)
{
    kf_frame f;
    const uint8_t *dk = reply ? k->down : k->up;
    if (kf_frame_parse(msg, len, KF_WIRE_MAX_MSG, &f, err, errlen) < 0) return -1;
    if (kf_frame_check_header(&f, dk) < 0 || kf_frame_check_body(&f, dk) < 0 ||
        !kf_frame_fresh(&f, kf_wire_now_ms())) {
        snprintf(err, errlen, "authentication failed");
        return -1;
    }
    *body = f.body;
    *blen = f.body_len;
    return 0;
}

#define MAX_SIZES 16
#define WARMUP 3

/* The REP server thread's inputs and outcome. */
typedef struct {
    const kf_wire_key *key;
    char url[128];
    long requests;       /* exactly this many requests are answered */
    int ready;           /* set (under mu) once bound */
    int client_done;     /* set (under mu) once the client has its last reply */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char err[512];       /* "" on success */
} server_ctx;

/* Monotonic clock in ns. */
static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* qsort comparator for int64_t. */
static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Percentile p of sorted v[0..n), µs, nearest rank. */
static double pct_us(const int64_t *v, long n, double p)
{
    if (n <= 0) return 0;
    long i = (long)(p / 100.0 * (double)n + 0.5);
    if (i < 1) i = 1;
    if (i > n) i = n;
    return (double)v[i - 1] / 1000.0;
}

/* Iterations for a body of `size` bytes. */
static long iterations(size_t size, double scale)
{
    long n = (long)((64.0 * 1024 * 1024) / (double)size);
    if (n < 100) n = 100;
    if (n > 20000) n = 20000;
    n = (long)((double)n * scale);
    return n < 10 ? 10 : n;
}

/* Mark the server bound (or failed) and wake main. */
static void server_signal(server_ctx *s)
{
    pthread_mutex_lock(&s->mu);
    s->ready = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* REP server: answer s->requests requests, each with its own body re-sealed. */
static void *server_main(void *arg)
{
    server_ctx *s = arg;
    char err[256] = ""; /* shorter than s->err: room for prefix and url */
    int sock = nn_socket(AF_SP, NN_REP);
    if (sock < 0) {
        snprintf(s->err, sizeof(s->err), "nn_socket: %s", nn_strerror(nn_errno()));
        server_signal(s);
        return NULL;
    }
    if (kf_wire_socket_setup(sock, KF_WIRE_MAX_MSG, 10000, 10000, err, sizeof(err)) < 0 || nn_bind(sock, s->url) < 0) {
        snprintf(s->err, sizeof(s->err), "server setup/bind %s: %s", s->url,
                 err[0] ? err : nn_strerror(nn_errno()));
        nn_close(sock);
        server_signal(s);
        return NULL;
    }
    server_signal(s);
    for (long i = 0; i < s->requests; i++) {
        void *buf = NULL;
        int n = nn_recv(sock, &buf, NN_MSG, 0);
        if (n < 0) {
            snprintf(s->err, sizeof(s->err), "server nn_recv: %s", nn_strerror(nn_errno()));
            break;
        }
        const uint8_t *b = NULL;
        size_t bl = 0;
        int rc = b_open(s->key, 0, buf, (size_t)n, &b, &bl, err, sizeof(err));
        if (rc < 0) {
            nn_freemsg(buf);
            snprintf(s->err, sizeof(s->err), "server open: %s", err);
            break;
        }
        uint8_t *out = NULL;
        size_t outlen = 0;
        rc = b_seal(s->key, 1, b, bl, &out, &outlen, err, sizeof(err));
        nn_freemsg(buf);
        if (rc < 0) {
            snprintf(s->err, sizeof(s->err), "server seal: %s", err);
            break;
        }
        rc = nn_send(sock, out, outlen, 0);
        free(out);
        if (rc < 0) {
            snprintf(s->err, sizeof(s->err), "server nn_send: %s", nn_strerror(nn_errno()));
            break;
        }
    }
    /* nanomsg 1.x ignores NN_LINGER: closing right after the last nn_send
     * can drop a large reply still being written. Close only once the
     * client has it (or has given up). */
    pthread_mutex_lock(&s->mu);
    while (!s->client_done) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    nn_close(sock);
    return NULL;
}

/* One seal+open pair of body[0..len). Returns 0 or -1 with reason. */
static int seal_open(const kf_wire_key *k, const uint8_t *body, size_t len, char *err, size_t errlen)
{
    uint8_t *msg = NULL;
    size_t mlen = 0;
    if (b_seal(k, 0, body, len, &msg, &mlen, err, errlen) < 0) return -1;
    const uint8_t *b = NULL;
    size_t bl = 0;
    int rc = b_open(k, 0, msg, mlen, &b, &bl, err, errlen);
    if (rc == 0 && bl != len) {
        snprintf(err, errlen, "opened body has %zu bytes, sealed %zu", bl, len);
        rc = -1;
    }
    free(msg);
    return rc;
}

/* One REQ/REP round trip of body[0..len) on sock; checks the echoed body.
 * Returns 0 or -1 with reason. */
static int round_trip(int sock, const kf_wire_key *k, const uint8_t *body, size_t len,
                      char *err, size_t errlen)
{
    uint8_t *msg = NULL;
    size_t mlen = 0;
    if (b_seal(k, 0, body, len, &msg, &mlen, err, errlen) < 0) return -1;
    int rc = nn_send(sock, msg, mlen, 0);
    free(msg);
    if (rc < 0) {
        snprintf(err, errlen, "nn_send: %s", nn_strerror(nn_errno()));
        return -1;
    }
    void *buf = NULL;
    int n = nn_recv(sock, &buf, NN_MSG, 0);
    if (n < 0) {
        snprintf(err, errlen, "nn_recv: %s", nn_strerror(nn_errno()));
        return -1;
    }
    const uint8_t *b = NULL;
    size_t bl = 0;
    rc = b_open(k, 1, buf, (size_t)n, &b, &bl, err, errlen);
    if (rc == 0 && !(bl == len && memcmp(b, body, len) == 0)) {
        snprintf(err, errlen, "reply body differs from the request");
        rc = -1;
    }
    nn_freemsg(buf);
    return rc;
}

/* Time n operations (kind 0 seal+open, 1 round trip) of a len-byte body,
 * print the row and RESULT line. Returns 0 or -1 with reason. */
static int measure(int kind, int sock, const kf_wire_key *k, const uint8_t *body, size_t len,
                   long n, char *err, size_t errlen)
{
    int64_t *lat = malloc(sizeof(int64_t) * (size_t)n);
    if (!lat) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < WARMUP; i++) {
        int rc = kind == 0 ? seal_open(k, body, len, err, errlen) : round_trip(sock, k, body, len, err, errlen);
        if (rc < 0) {
            free(lat);
            return -1;
        }
    }
    int64_t start = now_ns();
    for (long i = 0; i < n; i++) {
        int64_t t0 = now_ns();
        int rc = kind == 0 ? seal_open(k, body, len, err, errlen) : round_trip(sock, k, body, len, err, errlen);
        lat[i] = now_ns() - t0;
        if (rc < 0) {
            free(lat);
            return -1;
        }
    }
    double secs = (double)(now_ns() - start) / 1e9;
    qsort(lat, (size_t)n, sizeof(int64_t), cmp_i64);
    double rate = (double)n / secs, mbs = rate * (double)len / 1e6;
    const char *name = kind == 0 ? "seal+open" : "roundtrip";
    printf("%-10s %9zu %7ld %11.0f %9.1f %10.1f %10.1f\n", name, len, n, rate, mbs,
           pct_us(lat, n, 50), pct_us(lat, n, 99));
    printf("RESULT wire kind=%s bytes=%zu n=%ld msgs_per_s=%.1f mb_per_s=%.1f p50_us=%.1f p99_us=%.1f\n",
           kind == 0 ? "sealopen" : "roundtrip", len, n, rate, mbs, pct_us(lat, n, 50), pct_us(lat, n, 99));
    fflush(stdout);
    free(lat);
    return 0;
}

/* Parse "256,65536" into out[0..max); returns the count or -1. */
static int parse_sizes(const char *s, size_t *out, int max)
{
    int n = 0;
    while (*s) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (end == s || errno || v < 1 || v > KF_WIRE_MAX_MSG - 4096 || n >= max) return -1;
        out[n++] = (size_t)v;
        s = end;
        if (*s == ',') s++;
        else if (*s) return -1;
    }
    return n;
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_SIZES] = { 256, 64 * 1024, 1024 * 1024, 4 * 1024 * 1024 };
    int nsizes = 4;
    double scale = 1.0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            nsizes = parse_sizes(argv[++i], sizes, MAX_SIZES);
            if (nsizes < 1) {
                fprintf(stderr, "bench_wire: --sizes wants bytes like 256,65536 (below 8 MiB)\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--scale") && i + 1 < argc) {
            scale = atof(argv[++i]);
            if (!(scale > 0)) scale = 1.0;
        } else {
            fprintf(stderr, "usage: bench_wire [--sizes 256,65536,...] [--scale F]\n");
            return 2;
        }
    }

    kf_wire_key key;
    uint8_t stored[KF_WIRE_KEY_LEN];
    for (size_t i = 0; i < sizeof(stored); i++) stored[i] = (unsigned char)(0x5a ^ (i * 37));
    char kerr[256];
    if (kf_cred_from_stored(&key, stored, sizeof(stored), kerr, sizeof(kerr)) < 0) {
        fprintf(stderr, "bench_wire: %s\n", kerr);
        return 1;
    }

    size_t maxlen = 0;
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] > maxlen) maxlen = sizes[i];
    uint8_t *body = malloc(maxlen);
    if (!body) {
        fprintf(stderr, "bench_wire: out of memory\n");
        return 1;
    }
    uint64_t x = 0x9e3779b97f4a7c15ULL; /* xorshift: incompressible, reproducible */
    for (size_t i = 0; i < maxlen; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        body[i] = (uint8_t)x;
    }

    char err[1024];
    int status = 0;
    printf("wire: HMAC-SHA256 envelope (proto/kf_wire.c); round trip = REQ/REP over ipc, body echoed\n");
    printf("%-10s %9s %7s %11s %9s %10s %10s\n", "what", "bytes", "n", "msgs/s", "MB/s", "p50(us)", "p99(us)");
    for (int i = 0; i < nsizes && !status; i++)
        if (measure(0, -1, &key, body, sizes[i], iterations(sizes[i], scale), err, sizeof(err)) < 0) {
            fprintf(stderr, "bench_wire: seal+open %zu bytes: %s\n", sizes[i], err);
            status = 1;
        }

    server_ctx srv;
    memset(&srv, 0, sizeof(srv));
    srv.key = &key;
    snprintf(srv.url, sizeof(srv.url), "ipc:///tmp/kfbench-wire-%d.ipc", (int)getpid());
    for (int i = 0; i < nsizes; i++) srv.requests += WARMUP + iterations(sizes[i], scale);
    pthread_mutex_init(&srv.mu, NULL);
    pthread_cond_init(&srv.cv, NULL);
    pthread_t th;
    int sock = -1, have_thread = 0;
    if (!status) {
        int e = pthread_create(&th, NULL, server_main, &srv);
        if (e) {
            fprintf(stderr, "bench_wire: pthread_create: %s\n", strerror(e));
            status = 1;
        } else {
            have_thread = 1;
        }
    }
    if (have_thread) {
        pthread_mutex_lock(&srv.mu);
        while (!srv.ready) pthread_cond_wait(&srv.cv, &srv.mu);
        pthread_mutex_unlock(&srv.mu);
        if (srv.err[0]) status = 1;
    }
    if (!status) {
        sock = nn_socket(AF_SP, NN_REQ);
        if (sock < 0 || kf_wire_socket_setup(sock, KF_WIRE_MAX_MSG, 10000, 10000, err, sizeof(err)) < 0 ||
            nn_connect(sock, srv.url) < 0) {
            fprintf(stderr, "bench_wire: client socket: %s\n", sock < 0 ? nn_strerror(nn_errno()) : err);
            status = 1;
        }
    }
    for (int i = 0; i < nsizes && !status; i++)
        if (measure(1, sock, &key, body, sizes[i], iterations(sizes[i], scale), err, sizeof(err)) < 0) {
            fprintf(stderr, "bench_wire: round trip %zu bytes: %s\n", sizes[i], err);
            status = 1;
        }
    if (have_thread) {
        pthread_mutex_lock(&srv.mu);
        srv.client_done = 1;
        pthread_cond_broadcast(&srv.cv);
        pthread_mutex_unlock(&srv.mu);
    }
    if (sock >= 0) nn_close(sock);
    if (have_thread) {
        /* On a client failure the server ends by its receive timeout. */
        pthread_join(th, NULL);
        if (srv.err[0]) {
            fprintf(stderr, "bench_wire: %s\n", srv.err);
            status = 1;
        }
    }
    unlink(srv.url + strlen("ipc://"));
    pthread_mutex_destroy(&srv.mu);
    pthread_cond_destroy(&srv.cv);
    free(body);
    return status;
}
