/* test_wire.c -- credentials (HKDF), frames (header/body MACs checked
 * before any decoding), size limits, and a real nanomsg REQ/REP round trip
 * over ipc carrying a 4 MiB job. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include "kf_test.h"
#include "kf_wire.h"

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(void)
{
    kf_test_state st = {0};
    char err[256], hex[2 * KF_WIRE_SECRET_LEN + 1], text[512], name[KF_WIRE_ID_MAX + 1];
    uint8_t secret[KF_WIRE_SECRET_LEN];
    kf_wire_key k, k2, other;
    CHECK(&st, kf_cred_new_secret(secret, hex) == 0, "secret");
    CHECK(&st, kf_cred_derive("w1", secret, sizeof(secret), &k, err, sizeof(err)) == 0, "%s", err);
    CHECK(&st, kf_cred_format("w1", hex, text, sizeof(text)) == 0, "format");
    CHECK(&st, kf_cred_parse(text, name, &k2, err, sizeof(err)) == 0 && !strcmp(name, "w1") &&
                   !memcmp(&k, &k2, sizeof(k)), "parse gives the same keys: %s", err);
    CHECK(&st, memcmp(k.up, k.down, KF_WIRE_KEY_LEN) != 0, "direction keys differ");
    /* the same secret under another name is another key */
    CHECK(&st, kf_cred_derive("w2", secret, sizeof(secret), &other, err, sizeof(err)) == 0 &&
                   memcmp(other.k, k.k, KF_WIRE_KEY_LEN) != 0, "name bound into the key");
    /* the stored key alone reproduces the direction keys (the coordinator) */
    CHECK(&st, kf_cred_from_stored(&k2, k.k, KF_WIRE_KEY_LEN, err, sizeof(err)) == 0 &&
                   !memcmp(k2.up, k.up, KF_WIRE_KEY_LEN), "from stored");
    CHECK(&st, kf_cred_parse("kfarm-worker-credential v1 w1 00", name, &k2, err, sizeof(err)) < 0 &&
                   strstr(err, "v1"), "old version refused: %s", err);
    CHECK(&st, kf_cred_parse("hello", name, &k2, err, sizeof(err)) < 0, "garbage credential refused");
    CHECK(&st, !kf_cred_name_ok("a b") && !kf_cred_name_ok("") && kf_cred_name_ok("box-gpu0.x_1"), "names");

    /* A request frame: parse, header MAC, body MAC. */
    uint8_t inst[KF_WIRE_INSTANCE_LEN] = { 1, 2, 3 };
    const uint8_t body[] = "hello body";
    uint8_t *f = NULL;
    size_t fl = 0;
    CHECK(&st, kf_frame_seal(KF_FRAME_REQUEST, k.up, "w1", inst, 77, body, sizeof(body), &f, &fl, err,
                             sizeof(err)) == 0, "%s", err);
    kf_frame fr;
    CHECK(&st, kf_frame_parse(f, fl, KF_WIRE_MAX_REQ, &fr, err, sizeof(err)) == 0 && !strcmp(fr.id, "w1") &&
                   fr.counter == 77 && fr.body_len == sizeof(body), "parse: %s", err);
    CHECK(&st, kf_frame_check_header(&fr, k.up) == 0 && kf_frame_check_body(&fr, k.up) == 0, "macs");
    CHECK(&st, kf_frame_check_header(&fr, k.down) < 0, "reflected direction refused");
    CHECK(&st, kf_frame_check_header(&fr, other.up) < 0, "wrong key refused");
    CHECK(&st, kf_frame_fresh(&fr, kf_wire_now_ms()) && !kf_frame_fresh(&fr, kf_wire_now_ms() + 600000),
          "clock window");
    f[fl - 40] ^= 1; /* a body byte */
    CHECK(&st, kf_frame_parse(f, fl, KF_WIRE_MAX_REQ, &fr, err, sizeof(err)) == 0 &&
                   kf_frame_check_header(&fr, k.up) == 0 && kf_frame_check_body(&fr, k.up) < 0,
          "tampered body refused");
    CHECK(&st, kf_frame_parse(f, fl - 1, KF_WIRE_MAX_REQ, &fr, err, sizeof(err)) < 0, "truncated refused");
    CHECK(&st, kf_frame_parse((const uint8_t *)"garbage!", 8, KF_WIRE_MAX_REQ, &fr, err, sizeof(err)) < 0,
          "garbage refused");
    free(f);

    /* An 8 MiB frame whose header MAC is wrong costs one short HMAC: the
     * body is never hashed or decoded (checked as CPU time per frame). */
    size_t big = KF_WIRE_MAX_MSG;
    uint8_t *huge = calloc(1, big);
    CHECK(&st, kf_frame_seal(KF_FRAME_REQUEST, other.up, "w1", inst, 1, huge, big, &f, &fl, err,
                             sizeof(err)) == 0, "%s", err);
    double t0 = cpu_s();
    int refused = 0;
    for (int i = 0; i < 1000; i++)
        refused += kf_frame_parse(f, fl, KF_WIRE_MAX_MSG, &fr, err, sizeof(err)) == 0 &&
                   kf_frame_check_header(&fr, k.up) < 0;
    double per = (cpu_s() - t0) / 1000;
    CHECK(&st, refused == 1000 && per < 1e-4, "8 MiB forged frame refused in %.1f us of CPU", per * 1e6);
    CHECK(&st, kf_frame_parse(f, fl, KF_WIRE_MAX_REQ, &fr, err, sizeof(err)) < 0 && strstr(err, "too large"),
          "over the request limit: %s", err);
    free(f);
    CHECK(&st, kf_frame_seal(KF_FRAME_REQUEST, k.up, "w1", inst, 1, huge, big + 1, &f, &fl, err,
                             sizeof(err)) < 0 && strstr(err, "too large"), "oversize: %s", err);

    /* Replay cache. */
    kf_replay *rc = kf_replay_new(4);
    const uint8_t *cached;
    size_t clen;
    uint8_t key16[16] = { 9 };
    CHECK(&st, kf_replay_get(rc, key16, &cached, &clen) == 0, "fresh");
    kf_replay_put(rc, key16, (const uint8_t *)"reply", 5);
    CHECK(&st, kf_replay_get(rc, key16, &cached, &clen) == 1 && clen == 5, "cached reply");
    uint8_t nn[16] = { 0 };
    for (int i = 0; i < 4; i++) {
        nn[0] = (uint8_t)(i + 1);
        kf_replay_put(rc, nn, NULL, 0);
    }
    CHECK(&st, kf_replay_get(rc, key16, &cached, &clen) == 0, "oldest evicted");
    kf_replay_free(rc);
    /* keys of one hash bucket (equal first 8 bytes): every one still held
     * is found with its own reply, the evicted ones are not */
    rc = kf_replay_new(8);
    uint8_t same[16] = { 7, 7, 7, 7, 7, 7, 7, 7 };
    for (int i = 0; i < 20; i++) {
        same[15] = (uint8_t)i;
        uint8_t rep1 = (uint8_t)(100 + i);
        kf_replay_put(rc, same, &rep1, 1);
    }
    int found_ok = 1;
    for (int i = 0; i < 20; i++) {
        same[15] = (uint8_t)i;
        int hit = kf_replay_get(rc, same, &cached, &clen);
        if (hit != (i >= 12) || (hit && (clen != 1 || cached[0] != 100 + i))) found_ok = 0;
    }
    CHECK(&st, found_ok, "one bucket: the last 8 found with their replies, the first 12 evicted");
    kf_replay_free(rc);

    /* Real sockets: a 4 MiB job reply crosses nanomsg to a client. */
    char addr[128];
    snprintf(addr, sizeof(addr), "ipc:///tmp/kfarm-test-wire-%d.ipc", (int)getpid());
    int rep = nn_socket(AF_SP, NN_REP), rq = nn_socket(AF_SP, NN_REQ);
    CHECK(&st, kf_wire_socket_setup(rep, KF_WIRE_MAX_REQ, 5000, 5000, err, sizeof(err)) == 0, "%s", err);
    CHECK(&st, kf_wire_socket_setup(rq, KF_WIRE_MAX_MSG, 5000, 5000, err, sizeof(err)) == 0, "%s", err);
    CHECK(&st, nn_bind(rep, addr) >= 0 && nn_connect(rq, addr) >= 0, "bind/connect");
    kf_wire_client cl;
    CHECK(&st, kf_wire_client_init(&cl, rq, "w1", &k) == 0, "client");
    Kfarm__GetJob gj = KFARM__GET_JOB__INIT;
    gj.worker_id = "w1";
    Kfarm__Request rqm = KFARM__REQUEST__INIT;
    rqm.msg_case = KFARM__REQUEST__MSG_GET_JOB;
    rqm.get_job = &gj;
    uint8_t *sealed;
    size_t slen;
    CHECK(&st, kf_wire_client_seal(&cl, &rqm, &sealed, &slen, err, sizeof(err)) == 0, "%s", err);
    CHECK(&st, nn_send(rq, sealed, slen, 0) == (int)slen, "send");
    free(sealed);
    void *buf = NULL;
    int got = nn_recv(rep, &buf, NN_MSG, 0);
    CHECK(&st, got > 0 && kf_frame_parse(buf, (size_t)got, KF_WIRE_MAX_REQ, &fr, err, sizeof(err)) == 0 &&
                   kf_frame_check_header(&fr, k.up) == 0 && kf_frame_check_body(&fr, k.up) == 0 &&
                   fr.counter == cl.counter, "request arrives authenticated");
    Kfarm__Reply reply = KFARM__REPLY__INIT;
    Kfarm__Job job = KFARM__JOB__INIT;
    job.job_id = 9;
    job.task_name = "t";
    job.task_json = "{}";
    job.source.len = 4u << 20;
    job.source.data = huge;
    reply.status = KFARM__STATUS__OK;
    reply.job = &job;
    size_t bl = kfarm__reply__get_packed_size(&reply);
    uint8_t *rb = malloc(bl);
    kfarm__reply__pack(&reply, rb);
    CHECK(&st, kf_frame_seal(KF_FRAME_REPLY, k.down, "w1", fr.instance, fr.counter, rb, bl, &sealed, &slen,
                             err, sizeof(err)) == 0, "%s", err);
    if (got > 0) nn_freemsg(buf);
    CHECK(&st, nn_send(rep, sealed, slen, 0) == (int)slen, "send reply");
    free(sealed);
    free(rb);
    buf = NULL;
    got = nn_recv(rq, &buf, NN_MSG, 0);
    CHECK(&st, got > (int)(4u << 20), "large reply received (%d)", got);
    if (got > 0) {
        CHECK(&st, kf_frame_parse(buf, (size_t)got, KF_WIRE_MAX_MSG, &fr, err, sizeof(err)) == 0 &&
                       kf_frame_check_body(&fr, k.down) == 0, "reply authenticated: %s", err);
        nn_freemsg(buf);
    }
    nn_close(rq);
    nn_close(rep);
    free(huge);
    return kf_test_done(&st);
}
