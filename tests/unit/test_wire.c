/* test_wire.c -- envelope encode/decode, authentication, replay cache and
 * size limits, plus a real nanomsg REQ/REP round trip over ipc. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include "kf_test.h"
#include "kf_wire.h"

int main(void)
{
    kf_test_state st = {0};
    char err[256];
    kf_wire_key k, other;
    setenv("KFARM_FLEET_KEY", "0123456789abcdef-test-key", 1);
    CHECK(&st, kf_wire_key_load(&k, NULL, err, sizeof(err)) == 0, "%s", err);
    setenv("KFARM_FLEET_KEY", "short", 1);
    CHECK(&st, kf_wire_key_load(&other, NULL, err, sizeof(err)) == -1 && strstr(err, "short"), "%s", err);
    unsetenv("KFARM_FLEET_KEY");
    CHECK(&st, kf_wire_key_load(&other, "another-fleet-key-xyz", err, sizeof(err)) == 0, "%s", err);

    /* Round trip of a Result request. */
    Kfarm__Result res = KFARM__RESULT__INIT;
    res.worker_id = "w1";
    res.job_id = 42;
    res.fencing_token = 7;
    res.verdict = "ok";
    res.has_speedup = 1;
    res.speedup = 2.5;
    Kfarm__Request req = KFARM__REQUEST__INIT;
    req.msg_case = KFARM__REQUEST__MSG_RESULT;
    req.result = &res;
    size_t n = kfarm__request__get_packed_size(&req);
    uint8_t *body = malloc(n), *sealed;
    kfarm__request__pack(&req, body);
    size_t slen;
    CHECK(&st, kf_wire_seal(&k, body, n, &sealed, &slen, err, sizeof(err)) == 0, "%s", err);
    Kfarm__Envelope *env;
    CHECK(&st, kf_wire_open(&k, sealed, slen, kf_wire_now_ms(), &env, err, sizeof(err)) == 0, "%s", err);
    if (env) {
        Kfarm__Request *r2 = kfarm__request__unpack(NULL, env->body.len, env->body.data);
        CHECK(&st, r2 && r2->msg_case == KFARM__REQUEST__MSG_RESULT && r2->result->job_id == 42 &&
                       r2->result->speedup == 2.5 && !strcmp(r2->result->verdict, "ok"), "decoded fields");
        if (r2) kfarm__request__free_unpacked(r2, NULL);
        /* Replay cache: the nonce is remembered with its reply. */
        kf_replay *rc = kf_replay_new(4);
        const uint8_t *cached;
        size_t clen;
        CHECK(&st, kf_replay_get(rc, env->nonce.data, &cached, &clen) == 0, "fresh nonce");
        kf_replay_put(rc, env->nonce.data, (const uint8_t *)"reply", 5);
        CHECK(&st, kf_replay_get(rc, env->nonce.data, &cached, &clen) == 1 && clen == 5 &&
                       !memcmp(cached, "reply", 5), "cached reply");
        uint8_t nn[KF_WIRE_NONCE_LEN] = {0};
        for (int i = 0; i < 4; i++) {
            nn[0] = (uint8_t)(i + 1);
            kf_replay_put(rc, nn, NULL, 0);
        }
        CHECK(&st, kf_replay_get(rc, env->nonce.data, &cached, &clen) == 0, "oldest evicted");
        kf_replay_free(rc);
        kfarm__envelope__free_unpacked(env, NULL);
    }
    /* Wrong key, tampering, stale timestamp, garbage. */
    CHECK(&st, kf_wire_open(&other, sealed, slen, kf_wire_now_ms(), &env, err, sizeof(err)) == -1 &&
                   strstr(err, "HMAC"), "wrong key: %s", err);
    uint8_t *tampered = malloc(slen);
    memcpy(tampered, sealed, slen);
    tampered[slen / 2] ^= 0x01;
    CHECK(&st, kf_wire_open(&k, tampered, slen, kf_wire_now_ms(), &env, err, sizeof(err)) == -1, "tampered");
    CHECK(&st, kf_wire_open(&k, sealed, slen, kf_wire_now_ms() + 10 * 60 * 1000, &env, err, sizeof(err)) == -1 &&
                   strstr(err, "window"), "replay after window: %s", err);
    CHECK(&st, kf_wire_open(&k, (const uint8_t *)"\xff\xff\xff garbage", 12, kf_wire_now_ms(), &env, err,
                            sizeof(err)) == -1, "garbage");
    free(tampered);
    free(sealed);
    free(body);

    /* Size limit: refuse to seal a body larger than KF_WIRE_MAX_MSG. */
    size_t big = KF_WIRE_MAX_MSG + 1;
    uint8_t *huge = calloc(1, big);
    CHECK(&st, kf_wire_seal(&k, huge, big, &sealed, &slen, err, sizeof(err)) == -1 && strstr(err, "too large"),
          "oversize: %s", err);

    /* Real sockets: a 4 MiB job message crosses nanomsg (over the 1 MiB
     * default NN_RCVMAXSIZE, which kf_wire_socket_setup raises). */
    char addr[128];
    snprintf(addr, sizeof(addr), "ipc:///tmp/kfarm-test-wire-%d.ipc", (int)getpid());
    int rep = nn_socket(AF_SP, NN_REP), rq = nn_socket(AF_SP, NN_REQ);
    CHECK(&st, kf_wire_socket_setup(rep, 5000, 5000, err, sizeof(err)) == 0, "%s", err);
    CHECK(&st, kf_wire_socket_setup(rq, 5000, 5000, err, sizeof(err)) == 0, "%s", err);
    CHECK(&st, nn_bind(rep, addr) >= 0 && nn_connect(rq, addr) >= 0, "bind/connect");
    Kfarm__Reply reply = KFARM__REPLY__INIT;
    Kfarm__Job job = KFARM__JOB__INIT;
    job.job_id = 9;
    job.task_name = "t";
    job.task_json = "{}";
    job.source.len = 4u << 20;
    job.source.data = huge;
    reply.status = KFARM__STATUS__OK;
    reply.job = &job;
    CHECK(&st, kf_wire_send(rq, &k, &reply.base, err, sizeof(err)) == 0, "%s", err);
    void *buf = NULL;
    int got = nn_recv(rep, &buf, NN_MSG, 0);
    CHECK(&st, got > (int)(4u << 20), "large message received (%d)", got);
    if (got > 0) {
        CHECK(&st, kf_wire_open(&k, buf, (size_t)got, kf_wire_now_ms(), &env, err, sizeof(err)) == 0, "%s", err);
        if (env) kfarm__envelope__free_unpacked(env, NULL);
        nn_freemsg(buf);
    }
    nn_close(rq);
    nn_close(rep);
    free(huge);
    return kf_test_done(&st);
}
