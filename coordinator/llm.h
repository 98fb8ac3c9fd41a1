/*
 * llm.h -- OpenAI-compatible chat-completions client (prefix kf_llm_).
 *
 * Design. One kf_llm_client owns a libcurl multi handle and any number of
 * requests in flight (vLLM, llama.cpp server, Ollama and hosted APIs all
 * speak POST {base_url}/chat/completions). It is non-blocking: the owner
 * submits requests (kf_llm_submit), drives the transfers with
 * kf_llm_perform (waits at most timeout_ms for network activity) and
 * collects finished requests with kf_llm_next. The coordinator runs it in a
 * dedicated thread (llm_service.c), so job dispatch never waits on a slow
 * model; the unit test drives it directly. A client is used by one thread
 * at a time; it holds no global state (curl_global_init is main's job).
 *
 * Retries. 429, 5xx, connection failures and timeouts are retried up to
 * max_retries times with exponential backoff and jitter: the delay before
 * retry k (1-based) is uniform in [d/2, d] with d = min(backoff_max_s,
 * backoff_s * 2^(k-1)); a Retry-After header (seconds or HTTP date) raises
 * the delay to at least what the server asked for (capped at 600 s). Other
 * 4xx answers are final. Each attempt has its own connect and total timeout.
 *
 * The API key. Only the *name* of the environment variable is configured;
 * the key is read with getenv at submit time, placed in the Authorization
 * header and never copied anywhere else (not logged, not in replies, not in
 * errors).
 *
 * finish_reason. The reply text and finish_reason are returned as given;
 * deciding whether a "length" (cut-off) reply still holds a complete code
 * block is the prompt module's job (kf_prompt_extract_code).
 */
#ifndef KF_LLM_H
#define KF_LLM_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

typedef struct {
    char base_url[512];       /* e.g. "http://127.0.0.1:8000/v1" (no trailing /chat/...) */
    char model[256];
    char api_key_env[128];    /* name of the env variable holding the key; "" = no key */
    double temperature;       /* < 0: not sent */
    double top_p;             /* < 0: not sent */
    long max_tokens;          /* <= 0: not sent */
    long seed;                /* < 0: not sent */
    double connect_timeout_s; /* per attempt */
    double timeout_s;         /* per attempt, whole transfer */
    int max_retries;          /* retries after the first attempt */
    double backoff_s;         /* first retry delay (before jitter) */
    double backoff_max_s;     /* cap of the exponential delay */
    int max_in_flight;        /* concurrent requests (the service's limit) */
} kf_llm_config;

/* Defaults: temperature 0.7, top_p and seed unset, max_tokens 4096,
 * connect 10 s, total 300 s, 4 retries, backoff 1 s .. 60 s, 8 in flight. */
void kf_llm_config_default(kf_llm_config *cfg);

/* Fill cfg from a campaign config's "llm" object (fields named as in
 * docs/campaign-config.md), starting from the defaults. Unknown fields are
 * an error (typos should not silently fall back). Returns 0, or -1 with a
 * reason naming the field. obj NULL: defaults, but base_url/model are then
 * missing, which is an error. */
int kf_llm_config_from_json(const json_t *obj, kf_llm_config *cfg, char *err, size_t errlen);

/* Whether an HTTP error (status, the server's message) says that the prompt
 * does not fit the model's context: such a request is not retried and its
 * reason says so in words. */
int kf_llm_context_error(long status, const char *msg);

/* Whether `name` may be used as llm.api_key_env: 0 for the coordinator's own
 * secret variables (KFARM_*, PG*, DATABASE_URL), whose values must never
 * leave as a bearer token to whatever base_url says. */
int kf_llm_key_env_allowed(const char *name);

/* A finished request. Strings are malloc'ed (kf_llm_reply_free). */
typedef struct {
    uint64_t tag;              /* the caller's tag from kf_llm_submit */
    int ok;                    /* 1: HTTP 200 with a parsable choice */
    char *content;             /* choices[0].message.content (ok only) */
    char finish_reason[32];    /* "stop", "length", ... ("" if absent) */
    long prompt_tokens;        /* usage; -1 when the server did not say */
    long completion_tokens;
    int attempts;              /* HTTP attempts made (1 + retries) */
    int retries;
    long http_status;          /* of the last attempt; 0 = no HTTP answer */
    double waited_s;           /* total backoff slept between attempts */
    double elapsed_s;          /* submit to completion */
    char error[512];           /* !ok: one-line reason ("timed out after 5.0 s", ...) */
} kf_llm_reply;

void kf_llm_reply_free(kf_llm_reply *r);

typedef struct kf_llm_client kf_llm_client;

/* Create a client (a curl multi handle). Returns NULL with reason. */
kf_llm_client *kf_llm_client_new(char *err, size_t errlen);

/* Abort every request and free (NULL is fine). */
void kf_llm_client_free(kf_llm_client *c);

/* Queue one chat request: a system and a user message. The config is
 * copied. Returns 0, or -1 with reason (bad URL, key variable named but not
 * set, out of memory). The request starts on the next kf_llm_perform. */
int kf_llm_submit(kf_llm_client *c, const kf_llm_config *cfg, const char *system_msg,
                  const char *user_msg, uint64_t tag, char *err, size_t errlen);

/* Drive transfers and due retries; waits up to timeout_ms for activity.
 * Returns the number of requests still pending (in flight or waiting to
 * retry), or -1 on a multi-handle failure (with reason). */
int kf_llm_perform(kf_llm_client *c, int timeout_ms, char *err, size_t errlen);

/* Pop one finished request into *out (caller frees with kf_llm_reply_free).
 * Returns 1 when one was returned, 0 when none is finished. */
int kf_llm_next(kf_llm_client *c, kf_llm_reply *out);

/* Requests submitted and not yet popped with kf_llm_next. */
int kf_llm_pending(const kf_llm_client *c);

/* Wake a kf_llm_perform that is waiting (safe from another thread). */
void kf_llm_wakeup(kf_llm_client *c);

/* Parse a Retry-After header value: delta seconds or an HTTP date (relative
 * to now_epoch). Returns seconds >= 0, or -1 when unparsable. */
double kf_llm_parse_retry_after(const char *value, long now_epoch);

#endif
