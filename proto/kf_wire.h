/*
 * kf_wire.h -- framing, authentication and limits shared by the coordinator
 * and the worker (prefix kf_wire_).
 *
 * Design. Messages are protobuf-c (proto/kfarm.proto). Each Request/Reply is
 * wrapped in an Envelope carrying the protocol version, the sender's clock,
 * a 16-byte random nonce and an HMAC-SHA256 (RFC 2104, via OpenSSL) over
 * version|timestamp|nonce|body keyed with the fleet key. The receiver checks
 * the version, the MAC (constant-time compare), and that the timestamp lies
 * within KF_WIRE_MAX_SKEW_MS of its own clock. The coordinator additionally
 * keeps a replay cache (kf_replay) of recent nonces -> sealed replies: a
 * nanomsg REQ resend of the same bytes is answered with the cached reply
 * (never processed twice), a replay after the skew window is refused.
 *
 * Limits. nanomsg drops messages above NN_RCVMAXSIZE (1 MiB by default)
 * silently, so kf_wire_socket_setup sets it explicitly on every socket to
 * KF_WIRE_MAX_MSG, and kf_wire_seal refuses to build larger messages.
 */
#ifndef KF_WIRE_H
#define KF_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include "kfarm.pb-c.h"

#define KF_PROTOCOL_VERSION 1
#define KF_WIRE_MAX_MSG (8u * 1024u * 1024u) /* bytes, per message */
#define KF_WIRE_MAX_SKEW_MS (5 * 60 * 1000)  /* accepted clock skew, ms */
#define KF_WIRE_NONCE_LEN 16
#define KF_WIRE_MAC_LEN 32

typedef struct {
    unsigned char key[128];
    size_t len;
} kf_wire_key;

/* Load the fleet key: from the file named by $KFARM_FLEET_KEY_FILE, else the
 * string in $KFARM_FLEET_KEY, else `fallback` (may be NULL). Keys shorter than
 * 16 bytes are refused. Returns 0, or -1 with a reason in err. */
int kf_wire_key_load(kf_wire_key *k, const char *fallback, char *err, size_t errlen);

/* Set receive size limit, send/receive timeouts (ms; -1 = infinite) and
 * linger on a nanomsg socket. Returns 0 or -1 with reason in err. */
int kf_wire_socket_setup(int sock, int send_timeout_ms, int recv_timeout_ms,
                         char *err, size_t errlen);

/* Wrap body (a serialized Request or Reply) in a signed Envelope. On success
 * *out is malloc'ed (caller frees) and 0 is returned; -1 if too large. */
int kf_wire_seal(const kf_wire_key *k, const uint8_t *body, size_t len,
                 uint8_t **out, size_t *outlen, char *err, size_t errlen);

/* Verify and unwrap an Envelope. On success returns 0, *env holds the decoded
 * envelope (free with kfarm__envelope__free_unpacked(env, NULL)); the body is
 * env->body. -1 with reason in err for malformed, oversized, wrong version,
 * bad MAC or out-of-window timestamp. now_ms is the receiver's clock. */
int kf_wire_open(const kf_wire_key *k, const uint8_t *msg, size_t len, int64_t now_ms,
                 Kfarm__Envelope **env, char *err, size_t errlen);

/* Serialize + seal + nn_send a Request or Reply (a ProtobufCMessage*).
 * Returns 0, or -1 with reason (timeout, too large, socket error). */
int kf_wire_send(int sock, const kf_wire_key *k, const ProtobufCMessage *m,
                 char *err, size_t errlen);

/* Client side: send req and wait for the reply (decoded; caller frees with
 * kfarm__reply__free_unpacked). Returns 0, or -1 on timeout/transport/auth
 * error. */
int kf_wire_call(int sock, const kf_wire_key *k, const Kfarm__Request *req,
                 Kfarm__Reply **reply, char *err, size_t errlen);

/* Milliseconds since the epoch (CLOCK_REALTIME). */
int64_t kf_wire_now_ms(void);

/* Replay cache: nonce -> sealed reply, bounded, oldest evicted. */
typedef struct kf_replay kf_replay;
kf_replay *kf_replay_new(size_t capacity);
void kf_replay_free(kf_replay *r);
/* Look up a nonce. Returns 1 and a pointer to the cached sealed reply (owned
 * by the cache, valid until the next put) if seen, else 0. A seen nonce with
 * no reply cached yet returns 1 with *reply = NULL. */
int kf_replay_get(kf_replay *r, const uint8_t *nonce, const uint8_t **reply, size_t *len);
/* Remember nonce and its sealed reply (copied). */
void kf_replay_put(kf_replay *r, const uint8_t *nonce, const uint8_t *reply, size_t len);

#endif
