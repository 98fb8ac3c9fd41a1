/*
 * kf_wire.c -- envelope sealing/opening, socket limits, replay cache.
 * See kf_wire.h for the design.
 */
#include "kf_wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nanomsg/nn.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/rand.h>

int64_t kf_wire_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int kf_wire_key_load(kf_wire_key *k, const char *fallback, char *err, size_t errlen)
{
    const char *file = getenv("KFARM_FLEET_KEY_FILE");
    const char *val = getenv("KFARM_FLEET_KEY");
    memset(k, 0, sizeof(*k));
    if (file && *file) {
        FILE *f = fopen(file, "rb");
        if (!f) {
            snprintf(err, errlen, "cannot read fleet key file %s: %s", file, strerror(errno));
            return -1;
        }
        size_t n = fread(k->key, 1, sizeof(k->key), f);
        fclose(f);
        while (n > 0 && (k->key[n - 1] == '\n' || k->key[n - 1] == '\r' || k->key[n - 1] == ' '))
            n--;
        k->len = n;
    } else {
        const char *s = (val && *val) ? val : fallback;
        if (!s) {
            snprintf(err, errlen, "no fleet key: set KFARM_FLEET_KEY or KFARM_FLEET_KEY_FILE");
            return -1;
        }
        size_t n = strlen(s);
        if (n > sizeof(k->key)) n = sizeof(k->key);
        memcpy(k->key, s, n);
        k->len = n;
    }
    if (k->len < 16) {
        snprintf(err, errlen, "fleet key too short (%zu bytes, need >= 16)", k->len);
        return -1;
    }
    return 0;
}

int kf_wire_socket_setup(int sock, int send_timeout_ms, int recv_timeout_ms,
                         char *err, size_t errlen)
{
    int maxsz = (int)KF_WIRE_MAX_MSG + 4096; /* envelope overhead */
    int linger = 1000;
    if (nn_setsockopt(sock, NN_SOL_SOCKET, NN_RCVMAXSIZE, &maxsz, sizeof(maxsz)) < 0 ||
        nn_setsockopt(sock, NN_SOL_SOCKET, NN_SNDTIMEO, &send_timeout_ms, sizeof(int)) < 0 ||
        nn_setsockopt(sock, NN_SOL_SOCKET, NN_RCVTIMEO, &recv_timeout_ms, sizeof(int)) < 0 ||
        nn_setsockopt(sock, NN_SOL_SOCKET, NN_LINGER, &linger, sizeof(linger)) < 0) {
        snprintf(err, errlen, "nn_setsockopt: %s", nn_strerror(nn_errno()));
        return -1;
    }
    return 0;
}

/* MAC over version(4, BE) | timestamp(8, BE) | nonce | body. */
static void wire_mac(const kf_wire_key *k, uint32_t version, uint64_t ts,
                     const uint8_t *nonce, size_t nonce_len,
                     const uint8_t *body, size_t len, uint8_t out[KF_WIRE_MAC_LEN])
{
    uint8_t hdr[12];
    for (int i = 0; i < 4; i++) hdr[i] = (uint8_t)(version >> (24 - 8 * i));
    for (int i = 0; i < 8; i++) hdr[4 + i] = (uint8_t)(ts >> (56 - 8 * i));
    size_t outlen = 0;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0), OSSL_PARAM_construct_end()};
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *c = mac ? EVP_MAC_CTX_new(mac) : NULL;
    if (!c || !EVP_MAC_init(c, k->key, k->len, params) || !EVP_MAC_update(c, hdr, sizeof(hdr)) ||
        !EVP_MAC_update(c, nonce, nonce_len) || !EVP_MAC_update(c, body, len) ||
        !EVP_MAC_final(c, out, &outlen, KF_WIRE_MAC_LEN))
        memset(out, 0, KF_WIRE_MAC_LEN); /* never matches a real MAC: the message is refused */
    EVP_MAC_CTX_free(c);
    EVP_MAC_free(mac);
}

int kf_wire_seal(const kf_wire_key *k, const uint8_t *body, size_t len,
                 uint8_t **out, size_t *outlen, char *err, size_t errlen)
{
    if (len > KF_WIRE_MAX_MSG) {
        snprintf(err, errlen, "message too large (%zu bytes > limit %u)", len, KF_WIRE_MAX_MSG);
        return -1;
    }
    uint8_t nonce[KF_WIRE_NONCE_LEN], mac[KF_WIRE_MAC_LEN];
    if (RAND_bytes(nonce, sizeof(nonce)) != 1) {
        snprintf(err, errlen, "RAND_bytes failed");
        return -1;
    }
    Kfarm__Envelope env = KFARM__ENVELOPE__INIT;
    env.version = KF_PROTOCOL_VERSION;
    env.timestamp_ms = (uint64_t)kf_wire_now_ms();
    env.nonce.data = nonce;
    env.nonce.len = sizeof(nonce);
    env.body.data = (uint8_t *)body;
    env.body.len = len;
    wire_mac(k, env.version, env.timestamp_ms, nonce, sizeof(nonce), body, len, mac);
    env.hmac.data = mac;
    env.hmac.len = sizeof(mac);
    size_t n = kfarm__envelope__get_packed_size(&env);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    kfarm__envelope__pack(&env, buf);
    *out = buf;
    *outlen = n;
    return 0;
}

int kf_wire_open(const kf_wire_key *k, const uint8_t *msg, size_t len, int64_t now_ms,
                 Kfarm__Envelope **envp, char *err, size_t errlen)
{
    *envp = NULL;
    if (len > KF_WIRE_MAX_MSG + 4096) {
        snprintf(err, errlen, "message too large (%zu bytes)", len);
        return -1;
    }
    Kfarm__Envelope *env = kfarm__envelope__unpack(NULL, len, msg);
    if (!env) {
        snprintf(err, errlen, "malformed envelope (%zu bytes)", len);
        return -1;
    }
    if (env->version != KF_PROTOCOL_VERSION) {
        snprintf(err, errlen, "protocol version %u not supported (speak %d)", env->version,
                 KF_PROTOCOL_VERSION);
        goto fail;
    }
    if (env->nonce.len != KF_WIRE_NONCE_LEN || env->hmac.len != KF_WIRE_MAC_LEN) {
        snprintf(err, errlen, "malformed envelope (nonce/mac length)");
        goto fail;
    }
    uint8_t mac[KF_WIRE_MAC_LEN];
    wire_mac(k, env->version, env->timestamp_ms, env->nonce.data, env->nonce.len,
             env->body.data, env->body.len, mac);
    if (CRYPTO_memcmp(mac, env->hmac.data, KF_WIRE_MAC_LEN) != 0) {
        snprintf(err, errlen, "authentication failed (bad HMAC: wrong fleet key?)");
        goto fail;
    }
    int64_t skew = now_ms - (int64_t)env->timestamp_ms;
    if (skew > KF_WIRE_MAX_SKEW_MS || skew < -KF_WIRE_MAX_SKEW_MS) {
        snprintf(err, errlen, "timestamp outside the %d s window (skew %lld ms): replay or clock drift",
                 KF_WIRE_MAX_SKEW_MS / 1000, (long long)skew);
        goto fail;
    }
    *envp = env;
    return 0;
fail:
    kfarm__envelope__free_unpacked(env, NULL);
    return -1;
}

int kf_wire_send(int sock, const kf_wire_key *k, const ProtobufCMessage *m,
                 char *err, size_t errlen)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    if (n > KF_WIRE_MAX_MSG) {
        snprintf(err, errlen, "message too large (%zu bytes > limit %u)", n, KF_WIRE_MAX_MSG);
        return -1;
    }
    uint8_t *body = malloc(n ? n : 1);
    if (!body) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    protobuf_c_message_pack(m, body);
    uint8_t *sealed;
    size_t slen;
    int rc = kf_wire_seal(k, body, n, &sealed, &slen, err, errlen);
    free(body);
    if (rc < 0) return -1;
    int s = nn_send(sock, sealed, slen, 0);
    free(sealed);
    if (s < 0) {
        snprintf(err, errlen, "nn_send: %s", nn_strerror(nn_errno()));
        return -1;
    }
    return 0;
}

int kf_wire_call(int sock, const kf_wire_key *k, const Kfarm__Request *req,
                 Kfarm__Reply **reply, char *err, size_t errlen)
{
    *reply = NULL;
    if (kf_wire_send(sock, k, &req->base, err, errlen) < 0) return -1;
    void *buf = NULL;
    int n = nn_recv(sock, &buf, NN_MSG, 0);
    if (n < 0) {
        int e = nn_errno();
        snprintf(err, errlen, "%s", e == ETIMEDOUT ? "coordinator did not answer (timeout)"
                                                   : nn_strerror(e));
        return -1;
    }
    Kfarm__Envelope *env;
    int rc = kf_wire_open(k, buf, (size_t)n, kf_wire_now_ms(), &env, err, errlen);
    nn_freemsg(buf);
    if (rc < 0) return -1;
    *reply = kfarm__reply__unpack(NULL, env->body.len, env->body.data);
    kfarm__envelope__free_unpacked(env, NULL);
    if (!*reply) {
        snprintf(err, errlen, "malformed reply");
        return -1;
    }
    return 0;
}

/* ---- replay cache: open-addressed table over a ring of entries ---- */

typedef struct {
    uint8_t nonce[KF_WIRE_NONCE_LEN];
    uint8_t *reply;
    size_t len;
    int used;
} replay_entry;

struct kf_replay {
    replay_entry *ring;
    size_t cap, next;
};

kf_replay *kf_replay_new(size_t capacity)
{
    kf_replay *r = calloc(1, sizeof(*r));
    if (!r) return NULL;
    r->ring = calloc(capacity, sizeof(replay_entry));
    if (!r->ring) {
        free(r);
        return NULL;
    }
    r->cap = capacity;
    return r;
}

void kf_replay_free(kf_replay *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->cap; i++) free(r->ring[i].reply);
    free(r->ring);
    free(r);
}

/* Linear scan: capacity is a few thousand and each lookup costs far less
 * than the database round trip that follows it. */
int kf_replay_get(kf_replay *r, const uint8_t *nonce, const uint8_t **reply, size_t *len)
{
    for (size_t i = 0; i < r->cap; i++) {
        replay_entry *e = &r->ring[i];
        if (e->used && memcmp(e->nonce, nonce, KF_WIRE_NONCE_LEN) == 0) {
            *reply = e->reply;
            *len = e->len;
            return 1;
        }
    }
    return 0;
}

void kf_replay_put(kf_replay *r, const uint8_t *nonce, const uint8_t *reply, size_t len)
{
    replay_entry *e = &r->ring[r->next];
    r->next = (r->next + 1) % r->cap;
    free(e->reply);
    memcpy(e->nonce, nonce, KF_WIRE_NONCE_LEN);
    e->reply = NULL;
    e->len = 0;
    if (reply && len) {
        e->reply = malloc(len);
        if (e->reply) {
            memcpy(e->reply, reply, len);
            e->len = len;
        }
    }
    e->used = 1;
}
