/*
 * kf_wire.c -- credentials (HKDF), frames (HMAC before parse), socket
 * limits, the worker-side client and the replay cache. See kf_wire.h.
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
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>

static const uint8_t MAGIC[4] = { 'K', 'F', 'W', '2' };

int64_t kf_wire_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void kf_wire_item_as_result(const Kfarm__ResultItem *x, Kfarm__Result *out)
{
    Kfarm__Result init = KFARM__RESULT__INIT;
    *out = init;
    out->worker_id = x->worker_id;
    out->job_id = x->job_id;
    out->fencing_token = x->fencing_token;
    out->verdict = x->verdict;
    out->detail = x->detail;
    out->metrics_json = x->metrics_json;
    out->compile_log = x->compile_log;
    out->has_candidate_us = x->has_candidate_us;
    out->candidate_us = x->candidate_us;
    out->has_baseline_us = x->has_baseline_us;
    out->baseline_us = x->baseline_us;
    out->has_speedup = x->has_speedup;
    out->speedup = x->speedup;
    out->has_lease_token = x->has_lease_token;
    out->lease_token = x->lease_token;
}

void kf_wire_hex(const uint8_t *b, size_t n, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[b[i] >> 4];
        out[2 * i + 1] = d[b[i] & 15];
    }
    out[2 * n] = 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int kf_wire_unhex(const char *s, uint8_t *b, size_t n)
{
    if (strlen(s) != 2 * n) return -1;
    for (size_t i = 0; i < n; i++) {
        int h = hexval(s[2 * i]), l = hexval(s[2 * i + 1]);
        if (h < 0 || l < 0) return -1;
        b[i] = (uint8_t)(h << 4 | l);
    }
    return 0;
}

/* HKDF-SHA256(ikm, salt, info) -> out (n bytes). 0 or -1. */
static int hkdf(const uint8_t *ikm, size_t ikm_len, const char *salt, const void *info,
                size_t info_len, uint8_t *out, size_t n)
{
    EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    EVP_KDF_CTX *c = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
    EVP_KDF_free(kdf);
    if (!c) return -1;
    char digest[] = "SHA256";
    OSSL_PARAM p[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)ikm, ikm_len),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, strlen(salt)),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, info_len),
        OSSL_PARAM_construct_end(),
    };
    int ok = EVP_KDF_derive(c, out, n, p) == 1;
    EVP_KDF_CTX_free(c);
    return ok ? 0 : -1;
}

int kf_cred_name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n < 1 || n > KF_WIRE_ID_MAX) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

int kf_cred_from_stored(kf_wire_key *k, const uint8_t *stored, size_t len, char *err, size_t errlen)
{
    static const char up[] = "kfarm v2 worker->coordinator", down[] = "kfarm v2 coordinator->worker";
    if (len != KF_WIRE_KEY_LEN) {
        snprintf(err, errlen, "stored worker key has %zu bytes (want %d)", len, KF_WIRE_KEY_LEN);
        return -1;
    }
    memmove(k->k, stored, KF_WIRE_KEY_LEN);
    if (hkdf(k->k, KF_WIRE_KEY_LEN, "kfarm direction", up, sizeof(up) - 1, k->up, KF_WIRE_KEY_LEN) < 0 ||
        hkdf(k->k, KF_WIRE_KEY_LEN, "kfarm direction", down, sizeof(down) - 1, k->down,
             KF_WIRE_KEY_LEN) < 0) {
        snprintf(err, errlen, "HKDF failed");
        return -1;
    }
    return 0;
}

int kf_cred_derive(const char *name, const uint8_t *secret, size_t secret_len, kf_wire_key *k,
                   char *err, size_t errlen)
{
    uint8_t K[KF_WIRE_KEY_LEN];
    if (!kf_cred_name_ok(name)) {
        snprintf(err, errlen, "bad worker name (1..%d of A-Z a-z 0-9 . _ -)", KF_WIRE_ID_MAX);
        return -1;
    }
    if (secret_len < 16 ||
        hkdf(secret, secret_len, "kfarm worker key v2", name, strlen(name), K, sizeof(K)) < 0) {
        snprintf(err, errlen, "cannot derive the worker key (secret too short or HKDF failed)");
        return -1;
    }
    int rc = kf_cred_from_stored(k, K, sizeof(K), err, errlen);
    OPENSSL_cleanse(K, sizeof(K));
    return rc;
}

int kf_cred_new_secret(uint8_t secret[KF_WIRE_SECRET_LEN], char hex[2 * KF_WIRE_SECRET_LEN + 1])
{
    if (RAND_bytes(secret, KF_WIRE_SECRET_LEN) != 1) return -1;
    kf_wire_hex(secret, KF_WIRE_SECRET_LEN, hex);
    return 0;
}

int kf_cred_format(const char *name, const char *hex, char *out, size_t cap)
{
    int n = snprintf(out, cap, "kfarm-worker-credential v2 %s %s\n", name, hex);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

int kf_cred_parse(const char *text, char *name, kf_wire_key *k, char *err, size_t errlen)
{
    char tag[64], ver[16], nm[KF_WIRE_ID_MAX + 2], hex[2 * KF_WIRE_SECRET_LEN + 2];
    uint8_t secret[KF_WIRE_SECRET_LEN];
    if (sscanf(text, "%63s %15s %129s %65s", tag, ver, nm, hex) != 4 ||
        strcmp(tag, "kfarm-worker-credential") != 0) {
        snprintf(err, errlen, "not a worker credential (expected 'kfarm-worker-credential v2 NAME "
                              "SECRET', as written by `kfarm worker add NAME`)");
        return -1;
    }
    if (strcmp(ver, "v2") != 0) {
        snprintf(err, errlen, "worker credential version %s not supported (speak v2)", ver);
        return -1;
    }
    if (!kf_cred_name_ok(nm) || kf_wire_unhex(hex, secret, sizeof(secret)) < 0) {
        snprintf(err, errlen, "malformed worker credential (name or secret)");
        return -1;
    }
    snprintf(name, KF_WIRE_ID_MAX + 1, "%.128s", nm);
    int rc = kf_cred_derive(nm, secret, sizeof(secret), k, err, errlen);
    OPENSSL_cleanse(secret, sizeof(secret));
    OPENSSL_cleanse(hex, sizeof(hex));
    return rc;
}

int kf_cred_load(const char *path, char *name, kf_wire_key *k, char *err, size_t errlen)
{
    const char *file = path ? path : getenv("KFARM_WORKER_CREDENTIAL_FILE");
    if (!file || !*file) {
        snprintf(err, errlen, "no worker credential: pass --credential FILE or set "
                              "KFARM_WORKER_CREDENTIAL_FILE (the operator issues one with "
                              "`kfarm worker add NAME`)");
        return -1;
    }
    FILE *f = fopen(file, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot read worker credential %s: %s", file, strerror(errno));
        return -1;
    }
    char text[512];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = 0;
    int rc = kf_cred_parse(text, name, k, err, errlen);
    OPENSSL_cleanse(text, sizeof(text));
    if (rc < 0) {
        char e2[300];
        snprintf(e2, sizeof(e2), "%s", err);
        snprintf(err, errlen, "%s: %s", file, e2);
    }
    return rc;
}

int kf_wire_socket_setup(int sock, size_t max_body, int send_timeout_ms, int recv_timeout_ms,
                         char *err, size_t errlen)
{
    int maxsz = (int)(max_body + KF_WIRE_OVERHEAD);
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

static int hmac2(const uint8_t key[KF_WIRE_KEY_LEN], const uint8_t *a, size_t alen,
                 const uint8_t *b, size_t blen, uint8_t out[KF_WIRE_MAC_LEN])
{
    size_t outlen = 0;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = { OSSL_PARAM_construct_utf8_string("digest", digest, 0),
                            OSSL_PARAM_construct_end() };
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *c = mac ? EVP_MAC_CTX_new(mac) : NULL;
    int ok = c && EVP_MAC_init(c, key, KF_WIRE_KEY_LEN, params) && EVP_MAC_update(c, a, alen) &&
             (!blen || EVP_MAC_update(c, b, blen)) && EVP_MAC_final(c, out, &outlen, KF_WIRE_MAC_LEN);
    EVP_MAC_CTX_free(c);
    EVP_MAC_free(mac);
    if (!ok) RAND_bytes(out, KF_WIRE_MAC_LEN); /* never matches: the frame is refused */
    return ok ? 0 : -1;
}

static void put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

static uint64_t get_be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = v << 8 | p[i];
    return v;
}

int kf_frame_seal(int kind, const uint8_t key_dir[KF_WIRE_KEY_LEN], const char *id,
                  const uint8_t instance[KF_WIRE_INSTANCE_LEN], uint64_t counter,
                  const uint8_t *body, size_t len, uint8_t **out, size_t *outlen,
                  char *err, size_t errlen)
{
    size_t n = strlen(id);
    if (n < 1 || n > KF_WIRE_ID_MAX) {
        snprintf(err, errlen, "bad worker name length %zu", n);
        return -1;
    }
    if (len > KF_WIRE_MAX_MSG) {
        snprintf(err, errlen, "message too large (%zu bytes > limit %u)", len, KF_WIRE_MAX_MSG);
        return -1;
    }
    size_t hlen = 42 + n, total = hlen + KF_WIRE_MAC_LEN + len + KF_WIRE_MAC_LEN;
    uint8_t *b = malloc(total);
    if (!b) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(b, MAGIC, 4);
    b[4] = (uint8_t)kind;
    b[5] = (uint8_t)n;
    memcpy(b + 6, id, n);
    memcpy(b + 6 + n, instance, KF_WIRE_INSTANCE_LEN);
    put_be(b + 22 + n, counter, 8);
    put_be(b + 30 + n, (uint64_t)kf_wire_now_ms(), 8);
    put_be(b + 38 + n, (uint64_t)len, 4);
    uint8_t *hmac = b + hlen;
    hmac2(key_dir, b, hlen, NULL, 0, hmac);
    if (len) memcpy(hmac + KF_WIRE_MAC_LEN, body, len);
    hmac2(key_dir, hmac, KF_WIRE_MAC_LEN + len, NULL, 0, hmac + KF_WIRE_MAC_LEN + len);
    *out = b;
    *outlen = total;
    return 0;
}

int kf_frame_notice(const char *text, uint8_t **out, size_t *outlen)
{
    size_t n = strlen(text);
    if (n > 256) n = 256;
    uint8_t *b = malloc(7 + n);
    if (!b) return -1;
    memcpy(b, MAGIC, 4);
    b[4] = KF_FRAME_NOTICE;
    put_be(b + 5, n, 2);
    memcpy(b + 7, text, n);
    *out = b;
    *outlen = 7 + n;
    return 0;
}

int kf_frame_parse(const uint8_t *msg, size_t len, size_t max_body, kf_frame *f,
                   char *err, size_t errlen)
{
    memset(f, 0, sizeof(*f));
    if (len < 7 || memcmp(msg, MAGIC, 4) != 0) {
        snprintf(err, errlen, "not a kfarm v2 frame (%zu bytes): old protocol or garbage", len);
        return -1;
    }
    f->kind = msg[4];
    if (f->kind == KF_FRAME_NOTICE) {
        size_t n = (size_t)get_be(msg + 5, 2);
        if (7 + n != len) {
            snprintf(err, errlen, "malformed notice");
            return -1;
        }
        f->notice = (const char *)msg + 7;
        f->notice_len = n;
        return 0;
    }
    if (f->kind != KF_FRAME_REQUEST && f->kind != KF_FRAME_REPLY) {
        snprintf(err, errlen, "unknown frame kind %d", f->kind);
        return -1;
    }
    size_t n = msg[5];
    if (n < 1 || n > KF_WIRE_ID_MAX || len < 42 + n + 2 * KF_WIRE_MAC_LEN) {
        snprintf(err, errlen, "malformed frame header (%zu bytes)", len);
        return -1;
    }
    memcpy(f->id, msg + 6, n);
    f->id[n] = 0;
    if (memchr(f->id, 0, n)) {
        snprintf(err, errlen, "malformed worker name");
        return -1;
    }
    f->instance = msg + 6 + n;
    f->counter = get_be(msg + 22 + n, 8);
    f->ts_ms = get_be(msg + 30 + n, 8);
    uint64_t blen = get_be(msg + 38 + n, 4);
    if (blen > max_body) {
        snprintf(err, errlen, "frame body too large (%llu bytes > limit %zu)",
                 (unsigned long long)blen, max_body);
        return -1;
    }
    f->hdr = msg;
    f->hdr_len = 42 + n;
    if (len != f->hdr_len + 2 * KF_WIRE_MAC_LEN + blen) {
        snprintf(err, errlen, "frame length %zu does not match its header", len);
        return -1;
    }
    f->hdr_mac = msg + f->hdr_len;
    f->body = f->hdr_mac + KF_WIRE_MAC_LEN;
    f->body_len = (size_t)blen;
    f->body_mac = f->body + blen;
    return 0;
}

int kf_frame_check_header(const kf_frame *f, const uint8_t key_dir[KF_WIRE_KEY_LEN])
{
    uint8_t m[KF_WIRE_MAC_LEN];
    hmac2(key_dir, f->hdr, f->hdr_len, NULL, 0, m);
    return CRYPTO_memcmp(m, f->hdr_mac, KF_WIRE_MAC_LEN) == 0 ? 0 : -1;
}

int kf_frame_check_body(const kf_frame *f, const uint8_t key_dir[KF_WIRE_KEY_LEN])
{
    uint8_t m[KF_WIRE_MAC_LEN];
    hmac2(key_dir, f->hdr_mac, KF_WIRE_MAC_LEN, f->body, f->body_len, m);
    return CRYPTO_memcmp(m, f->body_mac, KF_WIRE_MAC_LEN) == 0 ? 0 : -1;
}

int kf_frame_fresh(const kf_frame *f, int64_t now_ms)
{
    int64_t skew = now_ms - (int64_t)f->ts_ms;
    return skew <= KF_WIRE_MAX_SKEW_MS && skew >= -KF_WIRE_MAX_SKEW_MS;
}

int kf_wire_client_init(kf_wire_client *c, int sock, const char *id, const kf_wire_key *k)
{
    memset(c, 0, sizeof(*c));
    c->sock = sock;
    if (!kf_cred_name_ok(id)) return -1;
    snprintf(c->id, sizeof(c->id), "%s", id);
    c->key = *k;
    return RAND_bytes(c->instance, sizeof(c->instance)) == 1 ? 0 : -1;
}

int kf_wire_client_seal(kf_wire_client *c, const Kfarm__Request *req, uint8_t **out,
                        size_t *outlen, char *err, size_t errlen)
{
    size_t n = kfarm__request__get_packed_size(req);
    if (n > KF_WIRE_MAX_REQ) {
        snprintf(err, errlen, "request too large (%zu bytes > limit %u)", n, KF_WIRE_MAX_REQ);
        return -1;
    }
    uint8_t *body = malloc(n ? n : 1);
    if (!body) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    kfarm__request__pack(req, body);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t us = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
    c->counter = us > c->counter ? us : c->counter + 1;
    int rc = kf_frame_seal(KF_FRAME_REQUEST, c->key.up, c->id, c->instance, c->counter, body, n,
                           out, outlen, err, errlen);
    free(body);
    return rc;
}

int kf_wire_call(kf_wire_client *c, const Kfarm__Request *req, Kfarm__Reply **reply,
                 char *err, size_t errlen)
{
    *reply = NULL;
    uint8_t *sealed;
    size_t slen;
    if (kf_wire_client_seal(c, req, &sealed, &slen, err, errlen) < 0) return -1;
    int s = nn_send(c->sock, sealed, slen, 0);
    free(sealed);
    if (s < 0) {
        snprintf(err, errlen, "nn_send: %s", nn_strerror(nn_errno()));
        return -1;
    }
    void *buf = NULL;
    int n = nn_recv(c->sock, &buf, NN_MSG, 0);
    if (n < 0) {
        int e = nn_errno();
        snprintf(err, errlen, "%s", e == ETIMEDOUT ? "coordinator did not answer (timeout)"
                                                   : nn_strerror(e));
        return -1;
    }
    kf_frame f;
    int rc = -1;
    if (kf_frame_parse(buf, (size_t)n, KF_WIRE_MAX_MSG, &f, err, errlen) < 0) goto out;
    if (f.kind == KF_FRAME_NOTICE) {
        char t[300];
        size_t tl = f.notice_len < sizeof(t) - 1 ? f.notice_len : sizeof(t) - 1;
        memcpy(t, f.notice, tl);
        t[tl] = 0;
        for (size_t i = 0; i < tl; i++)
            if ((unsigned char)t[i] < 32 || (unsigned char)t[i] > 126) t[i] = '?';
        snprintf(err, errlen, "coordinator refused the message: %s", t);
        rc = -2;
        goto out;
    }
    if (f.kind != KF_FRAME_REPLY || strcmp(f.id, c->id) != 0 ||
        kf_frame_check_header(&f, c->key.down) < 0 || kf_frame_check_body(&f, c->key.down) < 0) {
        snprintf(err, errlen, "reply authentication failed (not from a coordinator holding our key)");
        goto out;
    }
    if (f.counter != c->counter || memcmp(f.instance, c->instance, KF_WIRE_INSTANCE_LEN) != 0) {
        snprintf(err, errlen, "reply does not answer our request (replayed or late reply)");
        goto out;
    }
    if (!kf_frame_fresh(&f, kf_wire_now_ms())) {
        snprintf(err, errlen, "reply timestamp outside the %d s window", KF_WIRE_MAX_SKEW_MS / 1000);
        goto out;
    }
    *reply = kfarm__reply__unpack(NULL, f.body_len, f.body);
    if (!*reply) {
        snprintf(err, errlen, "malformed reply");
        goto out;
    }
    rc = 0;
out:
    nn_freemsg(buf);
    return rc;
}

/* ---- replay cache: open-addressed table over a ring of entries ---- */

typedef struct {
    uint8_t nonce[KF_WIRE_NONCE_LEN];
    uint8_t *reply;
    size_t len;
    int used;
} replay_entry;

/* A ring of the last `cap` replies, indexed by a chained hash of the key
 * (the key is a MAC prefix: uniformly random, its first bytes are the
 * hash): a lookup costs one bucket's chain, not a scan of the ring. */
struct kf_replay {
    replay_entry *ring;
    int32_t *chain;   /* per ring slot: the next slot of its bucket, -1 */
    int32_t *bucket;  /* per bucket: its first ring slot, -1 */
    size_t cap, next, nbuckets;
};

static size_t replay_hash(const kf_replay *r, const uint8_t *key)
{
    uint64_t h;
    memcpy(&h, key, sizeof(h));
    return (size_t)(h & (r->nbuckets - 1));
}

kf_replay *kf_replay_new(size_t capacity)
{
    if (capacity < 1 || capacity > (size_t)INT32_MAX / 4) return NULL;
    kf_replay *r = calloc(1, sizeof(*r));
    if (!r) return NULL;
    r->nbuckets = 1;
    while (r->nbuckets < capacity) r->nbuckets <<= 1;
    r->ring = calloc(capacity, sizeof(replay_entry));
    r->chain = malloc(capacity * sizeof(*r->chain));
    r->bucket = malloc(r->nbuckets * sizeof(*r->bucket));
    if (!r->ring || !r->chain || !r->bucket) {
        kf_replay_free(r);
        return NULL;
    }
    for (size_t i = 0; i < capacity; i++) r->chain[i] = -1;
    for (size_t i = 0; i < r->nbuckets; i++) r->bucket[i] = -1;
    r->cap = capacity;
    return r;
}

void kf_replay_free(kf_replay *r)
{
    if (!r) return;
    if (r->ring)
        for (size_t i = 0; i < r->cap; i++) free(r->ring[i].reply);
    free(r->ring);
    free(r->chain);
    free(r->bucket);
    free(r);
}

int kf_replay_get(kf_replay *r, const uint8_t *nonce, const uint8_t **reply, size_t *len)
{
    for (int32_t i = r->bucket[replay_hash(r, nonce)]; i >= 0; i = r->chain[i]) {
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
    int32_t slot = (int32_t)r->next;
    replay_entry *e = &r->ring[slot];
    r->next = (r->next + 1) % r->cap;
    if (e->used) { /* the oldest entry leaves its bucket */
        int32_t *link = &r->bucket[replay_hash(r, e->nonce)];
        while (*link >= 0 && *link != slot) link = &r->chain[*link];
        if (*link == slot) *link = r->chain[slot];
    }
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
    size_t b = replay_hash(r, nonce);
    r->chain[slot] = r->bucket[b];
    r->bucket[b] = slot;
}
