/*
 * kf_probe.c -- a hostile or lying peer of the coordinator, for the trust
 * tests (tests/integration/trust.sh). It speaks the real wire protocol
 * through proto/kf_wire.h, with a real credential when one is given ("-":
 * none), and prints one line per outcome for the test to check.
 *
 *   kf_probe CRED ADDR register              claim the identity; exit 3 on CONFLICT
 *   kf_probe CRED ADDR lie SPEEDUP           lease a job, report `ok` at SPEEDUP
 *   kf_probe CRED ADDR forge JOB LEASE N     N heartbeats + N results for JOB's lease LEASE
 *                                            with random 128-bit tokens; prints the statuses
 *   kf_probe CRED ADDR capture FILE          send one GetJob, keep its exact bytes in FILE
 *   kf_probe CRED ADDR flood N               N more GetJob requests (each a new counter)
 *   kf_probe -    ADDR replay FILE           send FILE's bytes again; prints the answer
 *   kf_probe -    ADDR bigframe N SIZE [MS]  N frames of SIZE bytes under a made-up key, each
 *                                            waiting up to 150 ms for its answer; with MS, up
 *                                            to MS ms each, stopping after 3 unanswered in a row
 *   kf_probe -    ADDR idle N SECONDS        hold N idle TCP connections (tcp:// ADDR)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include <openssl/rand.h>

#include "kf_wire.h"

static const char *status_name(int s)
{
    static const char *const n[] = { "OK", "NO_JOB", "STALE", "DUPLICATE", "REJECTED", "ERROR", "CONFLICT" };
    return s >= 0 && s <= 6 ? n[s] : "?";
}

static int open_sock(const char *addr, int rcv_ms)
{
    char err[256];
    int s = nn_socket(AF_SP, NN_REQ);
    if (s < 0 || kf_wire_socket_setup(s, KF_WIRE_MAX_MSG, 2000, rcv_ms, err, sizeof(err)) < 0 ||
        nn_connect(s, addr) < 0) {
        fprintf(stderr, "kf_probe: cannot connect to %s\n", addr);
        exit(2);
    }
    return s;
}

static Kfarm__Reply *call(kf_wire_client *c, Kfarm__Request *req)
{
    char err[512];
    Kfarm__Reply *rep = NULL;
    int rc = kf_wire_call(c, req, &rep, err, sizeof(err));
    if (rc < 0) printf("call: %s\n", err);
    return rep;
}

static int do_register(kf_wire_client *c)
{
    char *cls[1] = { "cpu" };
    Kfarm__Register reg = KFARM__REGISTER__INIT;
    reg.worker_id = c->id;
    reg.hostname = "probe";
    reg.backend = "cpu";
    reg.n_classes = 1;
    reg.classes = cls;
    Kfarm__Request req = KFARM__REQUEST__INIT;
    req.msg_case = KFARM__REQUEST__MSG_REGISTER;
    req.register_ = &reg;
    Kfarm__Reply *rep = call(c, &req);
    int st = rep ? (int)rep->status : -1;
    printf("register %s%s%s\n", rep ? status_name(st) : "FAILED", rep && rep->detail ? ": " : "",
           rep && rep->detail ? rep->detail : "");
    if (rep) kfarm__reply__free_unpacked(rep, NULL);
    return st;
}

static Kfarm__Reply *get_job(kf_wire_client *c)
{
    char *cls[1] = { "cpu" };
    Kfarm__GetJob g = KFARM__GET_JOB__INIT;
    g.worker_id = c->id;
    g.n_classes = 1;
    g.classes = cls;
    Kfarm__Request req = KFARM__REQUEST__INIT;
    req.msg_case = KFARM__REQUEST__MSG_GET_JOB;
    req.get_job = &g;
    return call(c, &req);
}

/* Give the identity back, as a stopping worker does. */
static void goodbye(kf_wire_client *c)
{
    Kfarm__Goodbye b = KFARM__GOODBYE__INIT;
    b.worker_id = c->id;
    Kfarm__Request req = KFARM__REQUEST__INIT;
    req.msg_case = KFARM__REQUEST__MSG_GOODBYE;
    req.goodbye = &b;
    Kfarm__Reply *rep = call(c, &req);
    if (rep) kfarm__reply__free_unpacked(rep, NULL);
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static void raise_nofile(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) == 0) {
        r.rlim_cur = r.rlim_max;
        setrlimit(RLIMIT_NOFILE, &r);
    }
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: kf_probe CRED|- ADDR COMMAND [ARGS] (see the source)\n");
        return 2;
    }
    const char *credf = argv[1], *addr = argv[2], *cmd = argv[3];
    char err[512], name[KF_WIRE_ID_MAX + 1];
    kf_wire_key key;
    kf_wire_client c;
    int have = strcmp(credf, "-") != 0;
    if (have && kf_cred_load(credf, name, &key, err, sizeof(err)) < 0) {
        fprintf(stderr, "kf_probe: %s\n", err);
        return 2;
    }

    if (!strcmp(cmd, "idle") && argc == 6) {
        raise_nofile();
        int n = atoi(argv[4]), secs = atoi(argv[5]), port = 0, open_n = 0;
        const char *colon = strrchr(addr, ':');
        if (strncmp(addr, "tcp://", 6) != 0 || !colon || (port = atoi(colon + 1)) <= 0) {
            fprintf(stderr, "kf_probe: idle needs a tcp://HOST:PORT address\n");
            return 2;
        }
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
        int first_errno = 0;
        for (int i = 0; i < n; i++) {
            int ok = 0;
            for (int t = 0; t < 50 && !ok; t++) { /* the listener accepts at its pace */
                int fd = socket(AF_INET, SOCK_STREAM, 0);
                if (fd < 0) {
                    first_errno = first_errno ? first_errno : errno;
                    break;
                }
                if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) ok = 1;
                else {
                    first_errno = first_errno ? first_errno : errno;
                    close(fd);
                    sleep_ms(20);
                }
            }
            open_n += ok;
            if (i % 100 == 99) sleep_ms(20);
        }
        if (open_n < n) fprintf(stderr, "kf_probe: idle: first failure: %s\n", strerror(first_errno));
        printf("idle connections open: %d\n", open_n);
        fflush(stdout);
        sleep((unsigned)secs);
        return 0;
    }
    if (!strcmp(cmd, "bigframe") && (argc == 6 || argc == 7)) {
        int n = atoi(argv[4]);
        size_t size = (size_t)atol(argv[5]);
        int s = open_sock(addr, argc == 7 ? atoi(argv[6]) : 150);
        uint8_t *body = calloc(1, size), fake[KF_WIRE_KEY_LEN], inst[KF_WIRE_INSTANCE_LEN] = { 0 };
        RAND_bytes(fake, sizeof(fake));
        int answered = 0, missed_run = 0, sent = 0;
        for (int i = 0; i < n && (argc == 6 || missed_run < 3); i++, sent++) {
            uint8_t *f;
            size_t fl;
            if (kf_frame_seal(KF_FRAME_REQUEST, fake, have ? name : "w1", inst, (uint64_t)i + 1, body,
                              size, &f, &fl, err, sizeof(err)) < 0) {
                fprintf(stderr, "kf_probe: %s\n", err);
                return 2;
            }
            nn_send(s, f, fl, 0);
            free(f);
            void *buf = NULL;
            int got = nn_recv(s, &buf, NN_MSG, 0);
            if (got > 0) {
                answered++;
                missed_run = 0;
                nn_freemsg(buf);
            } else {
                missed_run++;
            }
        }
        printf("bigframe sent %d, answered %d\n", sent, answered);
        return 0;
    }
    if (!strcmp(cmd, "replay") && argc == 5) {
        FILE *f = fopen(argv[4], "rb");
        if (!f) return 2;
        static uint8_t b[1 << 16];
        size_t n = fread(b, 1, sizeof(b), f);
        fclose(f);
        int s = open_sock(addr, 3000);
        nn_send(s, b, n, 0);
        void *buf = NULL;
        int got = nn_recv(s, &buf, NN_MSG, 0);
        kf_frame fr;
        if (got > 0 && kf_frame_parse(buf, (size_t)got, KF_WIRE_MAX_MSG, &fr, err, sizeof(err)) == 0 &&
            fr.kind == KF_FRAME_NOTICE)
            printf("notice: %.*s\n", (int)fr.notice_len, fr.notice);
        else
            printf("answered (%d bytes)\n", got);
        return 0;
    }
    if (!have) {
        fprintf(stderr, "kf_probe: %s needs a credential\n", cmd);
        return 2;
    }
    int s = open_sock(addr, 5000);
    kf_wire_client_init(&c, s, name, &key);
    int st = do_register(&c);
    if (st == KFARM__STATUS__CONFLICT) return 3;
    if (st != KFARM__STATUS__OK) return 1;
    if (!strcmp(cmd, "register")) {
        goodbye(&c);
        return 0;
    }

    if (!strcmp(cmd, "lie") && argc == 5) {
        Kfarm__Reply *rep = NULL;
        for (int i = 0; i < 300; i++) {
            rep = get_job(&c);
            if (rep && rep->job) break;
            if (rep) kfarm__reply__free_unpacked(rep, NULL);
            rep = NULL;
            sleep_ms(200);
        }
        if (!rep) {
            printf("no job\n");
            return 1;
        }
        Kfarm__Result r = KFARM__RESULT__INIT;
        r.worker_id = name;
        r.job_id = rep->job->job_id;
        r.fencing_token = rep->job->fencing_token;
        r.has_lease_token = rep->job->has_lease_token;
        r.lease_token = rep->job->lease_token;
        r.verdict = "ok";
        r.detail = "forged";
        r.metrics_json = "{}";
        r.has_speedup = r.has_candidate_us = r.has_baseline_us = 1;
        r.speedup = atof(argv[4]);
        r.baseline_us = 100;
        r.candidate_us = 100 / r.speedup;
        Kfarm__Request req = KFARM__REQUEST__INIT;
        req.msg_case = KFARM__REQUEST__MSG_RESULT;
        req.result = &r;
        Kfarm__Reply *rr = call(&c, &req);
        printf("lie job %llu candidate %llu: %s\n", (unsigned long long)r.job_id,
               (unsigned long long)rep->job->candidate_id, rr ? status_name(rr->status) : "FAILED");
        int rc = rr && rr->status == KFARM__STATUS__OK ? 0 : 1;
        goodbye(&c);
        return rc;
    }
    if (!strcmp(cmd, "forge") && argc == 7) {
        uint64_t job = strtoull(argv[4], NULL, 10), lease = strtoull(argv[5], NULL, 10);
        int n = atoi(argv[6]), counts[8] = { 0 };
        for (int i = 0; i < n; i++) {
            uint8_t tok[16];
            RAND_bytes(tok, sizeof(tok));
            Kfarm__Heartbeat hb = KFARM__HEARTBEAT__INIT;
            hb.worker_id = name;
            hb.job_id = job;
            hb.fencing_token = lease;
            hb.has_lease_token = 1;
            hb.lease_token.data = tok;
            hb.lease_token.len = 16;
            Kfarm__Request req = KFARM__REQUEST__INIT;
            req.msg_case = KFARM__REQUEST__MSG_HEARTBEAT;
            req.heartbeat = &hb;
            Kfarm__Reply *rep = call(&c, &req);
            if (rep) counts[rep->status]++, kfarm__reply__free_unpacked(rep, NULL);
            Kfarm__Result r = KFARM__RESULT__INIT;
            r.worker_id = name;
            r.job_id = job;
            r.fencing_token = lease;
            r.has_lease_token = 1;
            r.lease_token = hb.lease_token;
            r.verdict = "ok";
            r.has_speedup = 1;
            r.speedup = 1000;
            req.msg_case = KFARM__REQUEST__MSG_RESULT;
            req.result = &r;
            rep = call(&c, &req);
            if (rep) counts[rep->status]++, kfarm__reply__free_unpacked(rep, NULL);
        }
        printf("forge: OK %d STALE %d REJECTED %d DUPLICATE %d\n", counts[0], counts[2], counts[4],
               counts[3]);
        goodbye(&c);
        return 0;
    }
    if (!strcmp(cmd, "capture") && argc == 5) {
        char *cls[1] = { "cpu" };
        Kfarm__GetJob g = KFARM__GET_JOB__INIT;
        g.worker_id = name;
        g.n_classes = 1;
        g.classes = cls;
        Kfarm__Request req = KFARM__REQUEST__INIT;
        req.msg_case = KFARM__REQUEST__MSG_GET_JOB;
        req.get_job = &g;
        uint8_t *f;
        size_t fl;
        if (kf_wire_client_seal(&c, &req, &f, &fl, err, sizeof(err)) < 0) return 2;
        FILE *o = fopen(argv[4], "wb");
        if (!o || fwrite(f, 1, fl, o) != fl) return 2;
        fclose(o);
        nn_send(s, f, fl, 0);
        void *buf = NULL;
        int got = nn_recv(s, &buf, NN_MSG, 0);
        printf("captured %zu bytes, answered %d\n", fl, got);
        goodbye(&c);
        return got > 0 ? 0 : 1;
    }
    if (!strcmp(cmd, "flood") && argc == 5) {
        int n = atoi(argv[4]), ok = 0;
        for (int i = 0; i < n; i++) {
            Kfarm__Reply *rep = get_job(&c);
            if (rep) ok++, kfarm__reply__free_unpacked(rep, NULL);
        }
        printf("flood: %d of %d answered\n", ok, n);
        goodbye(&c);
        return ok == n ? 0 : 1;
    }
    fprintf(stderr, "kf_probe: unknown command or arguments\n");
    return 2;
}
