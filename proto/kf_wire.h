/*
 * kf_wire.h -- framing, per-worker authentication and limits shared by the
 * coordinator and the worker (prefixes kf_wire_, kf_frame_, kf_cred_).
 *
 * Design (protocol version 2). Every worker has its own credential, issued
 * by the operator (`kfarm worker add NAME`): a name and a 32-byte random
 * secret. Both sides derive from it, with HKDF-SHA256 (RFC 5869, OpenSSL's
 * EVP_KDF), a 32-byte worker key K = HKDF(secret, salt "kfarm worker key v2",
 * info NAME); the database stores K, never the secret. Message keys derive
 * from K per direction (info "kfarm v2 worker->coordinator" and
 * "... coordinator->worker"), so a reply can never be reflected as a request.
 *
 * A frame is plain bytes, parsed without protobuf and authenticated before
 * the body is decoded ("authenticate before parse"):
 *
 *   off  size  field
 *   0    4     magic "KFW2"
 *   4    1     kind: 1 request, 2 reply, 3 notice (unauthenticated text)
 *   5    1     n = length of the worker name (1..128)
 *   6    n     worker name (the identity the frame claims)
 *   6+n  16    instance id (random per worker process)
 *   22+n 8     counter (big-endian; strictly increasing per worker)
 *   30+n 8     timestamp, ms since the epoch (big-endian)
 *   38+n 4     body length L (big-endian; at most the receiver's limit)
 *   42+n 32    header MAC = HMAC-SHA256(direction key, bytes 0 .. 42+n)
 *   74+n L     body (serialized protobuf Request or Reply)
 *   74+n+L 32  body MAC = HMAC-SHA256(direction key, header MAC | body)
 *
 * The receiver checks, in this order and each in constant work: the
 * structure and the total length (a frame whose declared length differs from
 * what arrived is refused), the header MAC over ~100 bytes (so an
 * unauthenticated frame of any size costs one short HMAC), the timestamp
 * window, then the body MAC, and only then decodes the body. The counter is
 * the sender's microsecond clock bumped to stay strictly increasing; the
 * coordinator persists the highest counter accepted per worker, so a replay
 * is refused after a restart or any number of newer messages. A reply
 * carries the counter and instance of the request it answers (the worker
 * refuses any other). Notice frames carry only a short UTF-8 text (why a
 * frame was refused) and are never trusted for state.
 *
 * Limits. nanomsg drops messages above NN_RCVMAXSIZE before they reach the
 * program (it reads the length prefix and closes the connection), so the
 * coordinator sets it to KF_WIRE_MAX_REQ and workers to KF_WIRE_MAX_MSG.
 */
#ifndef KF_WIRE_H
#define KF_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include "kfarm.pb-c.h"

#define KF_PROTOCOL_VERSION 2
#define KF_WIRE_MAX_MSG (8u * 1024u * 1024u) /* bytes, per body (replies: jobs) */
#define KF_WIRE_MAX_REQ (2u * 1024u * 1024u) /* bytes, per request body (results) */
#define KF_WIRE_MAX_SKEW_MS (5 * 60 * 1000)  /* accepted clock skew, ms */
#define KF_WIRE_ID_MAX 128                   /* worker name, bytes */
#define KF_WIRE_INSTANCE_LEN 16
#define KF_WIRE_MAC_LEN 32
#define KF_WIRE_KEY_LEN 32
#define KF_WIRE_SECRET_LEN 32
#define KF_WIRE_OVERHEAD (74 + KF_WIRE_ID_MAX + KF_WIRE_MAC_LEN)

enum { KF_FRAME_REQUEST = 1, KF_FRAME_REPLY = 2, KF_FRAME_NOTICE = 3 };

/* A worker key K and the two direction keys derived from it. */
typedef struct {
    uint8_t k[KF_WIRE_KEY_LEN];
    uint8_t up[KF_WIRE_KEY_LEN];   /* worker -> coordinator */
    uint8_t down[KF_WIRE_KEY_LEN]; /* coordinator -> worker */
} kf_wire_key;

/* A parsed (not yet authenticated) frame; pointers into the message. */
typedef struct {
    int kind;
    char id[KF_WIRE_ID_MAX + 1];
    const uint8_t *instance;
    uint64_t counter;
    uint64_t ts_ms;
    const uint8_t *hdr;     /* bytes covered by the header MAC */
    size_t hdr_len;
    const uint8_t *hdr_mac;
    const uint8_t *body;
    size_t body_len;
    const uint8_t *body_mac;
    const char *notice;     /* KF_FRAME_NOTICE: the text (not NUL-terminated) */
    size_t notice_len;
} kf_frame;

/* ---- credentials ---- */

/* Derive K (HKDF-SHA256 of secret, salted, info = name) and the direction
 * keys into k. Returns 0, or -1 with reason. */
int kf_cred_derive(const char *name, const uint8_t *secret, size_t secret_len, kf_wire_key *k,
                   char *err, size_t errlen);

/* Fill k's direction keys from k->k (K as stored by the coordinator). */
int kf_cred_from_stored(kf_wire_key *k, const uint8_t *stored, size_t len, char *err, size_t errlen);

/* New random secret; hex (2*KF_WIRE_SECRET_LEN chars + NUL) into hex. 0 or -1. */
int kf_cred_new_secret(uint8_t secret[KF_WIRE_SECRET_LEN], char hex[2 * KF_WIRE_SECRET_LEN + 1]);

/* The text of a credential file: "kfarm-worker-credential v2 NAME HEX\n". */
int kf_cred_format(const char *name, const char *hex, char *out, size_t cap);

/* Parse a credential's text (as written by kf_cred_format) into name (cap
 * KF_WIRE_ID_MAX+1) and keys. Returns 0, or -1 with a reason. */
int kf_cred_parse(const char *text, char *name, kf_wire_key *k, char *err, size_t errlen);

/* Load the worker credential from the file named by $KFARM_WORKER_CREDENTIAL_FILE
 * (or `path` when not NULL). 0, or -1 with a reason. */
int kf_cred_load(const char *path, char *name, kf_wire_key *k, char *err, size_t errlen);

/* Is name a valid worker name (1..128 of [A-Za-z0-9._-])? */
int kf_cred_name_ok(const char *name);

/* ---- frames ---- */

/* Build a frame. key_dir is the direction key (k->up for requests, k->down
 * for replies). *out is malloc'ed. Returns 0, or -1 (too large, RNG). */
int kf_frame_seal(int kind, const uint8_t key_dir[KF_WIRE_KEY_LEN], const char *id,
                  const uint8_t instance[KF_WIRE_INSTANCE_LEN], uint64_t counter,
                  const uint8_t *body, size_t len, uint8_t **out, size_t *outlen,
                  char *err, size_t errlen);

/* A notice frame (unauthenticated, text truncated to 256 bytes). */
int kf_frame_notice(const char *text, uint8_t **out, size_t *outlen);

/* Parse the structure of msg (no cryptography). Refuses a frame whose body
 * exceeds max_body or whose declared length is not the length received.
 * Returns 0, or -1 with reason. */
int kf_frame_parse(const uint8_t *msg, size_t len, size_t max_body, kf_frame *f,
                   char *err, size_t errlen);

/* Check the header MAC (constant time); 0 or -1. Cheap: ~100 bytes. */
int kf_frame_check_header(const kf_frame *f, const uint8_t key_dir[KF_WIRE_KEY_LEN]);

/* Check the body MAC (constant time); 0 or -1. */
int kf_frame_check_body(const kf_frame *f, const uint8_t key_dir[KF_WIRE_KEY_LEN]);

/* Is the frame's timestamp within KF_WIRE_MAX_SKEW_MS of now_ms? */
int kf_frame_fresh(const kf_frame *f, int64_t now_ms);

/* ---- sockets and the client ---- */

/* Set receive size limit (body max_body plus framing), send/receive
 * timeouts (ms; -1 = infinite) and linger on a nanomsg socket. */
int kf_wire_socket_setup(int sock, size_t max_body, int send_timeout_ms, int recv_timeout_ms,
                         char *err, size_t errlen);

/* The worker's side of the conversation: identity, keys, instance, counter. */
typedef struct {
    int sock;
    char id[KF_WIRE_ID_MAX + 1];
    kf_wire_key key;
    uint8_t instance[KF_WIRE_INSTANCE_LEN];
    uint64_t counter;
} kf_wire_client;

/* Set up a client for identity id with key k on socket sock: a fresh random
 * instance id. Returns 0 or -1. */
int kf_wire_client_init(kf_wire_client *c, int sock, const char *id, const kf_wire_key *k);

/* Send req and wait for the authenticated reply (caller frees with
 * kfarm__reply__free_unpacked). Returns 0; -1 on timeout/transport/auth
 * failure; -2 when the coordinator answered with a notice (refused before
 * authentication: text in err). */
int kf_wire_call(kf_wire_client *c, const Kfarm__Request *req, Kfarm__Reply **reply,
                 char *err, size_t errlen);

/* Seal req as the next request of c (counter advanced) without sending. */
int kf_wire_client_seal(kf_wire_client *c, const Kfarm__Request *req, uint8_t **out,
                        size_t *outlen, char *err, size_t errlen);

/* Milliseconds since the epoch (CLOCK_REALTIME). */
int64_t kf_wire_now_ms(void);

/* The fields of a Result.more entry (ResultItem: Result's fields 1-11) as a
 * Result of its own, with no more and no next; *out borrows x's strings and
 * bytes. Used where a Result and its items are treated alike: the
 * coordinator checks each item as if sent alone, a worker sends its first
 * result of a batch as the Result itself. */
void kf_wire_item_as_result(const Kfarm__ResultItem *x, Kfarm__Result *out);

/* Lower-case hex of n bytes into out (2n+1). */
void kf_wire_hex(const uint8_t *b, size_t n, char *out);
/* Parse 2n hex digits into b. 0 or -1. */
int kf_wire_unhex(const char *s, uint8_t *b, size_t n);

/* Replay cache of recent requests: header MAC prefix -> sealed reply,
 * bounded, oldest evicted. Answers nanomsg REQ resends of the same bytes
 * (the persistent counter refuses them otherwise). */
typedef struct kf_replay kf_replay;
kf_replay *kf_replay_new(size_t capacity);
void kf_replay_free(kf_replay *r);
/* 1 and the cached reply (owned by the cache, valid until the next put) if
 * key (16 bytes) was seen, else 0. */
int kf_replay_get(kf_replay *r, const uint8_t *key, const uint8_t **reply, size_t *len);
void kf_replay_put(kf_replay *r, const uint8_t *key, const uint8_t *reply, size_t len);
#define KF_WIRE_NONCE_LEN 16

#endif
