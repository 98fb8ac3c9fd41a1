/*
 * llm.c -- OpenAI-compatible chat-completions client over curl multi.
 * See llm.h for the contract (retries, Retry-After, key handling).
 *
 * Internals. Every submitted request is a `req` on one list. A req is
 * WAITING (not started, or sleeping before a retry until next_at) or
 * RUNNING (its easy handle is in the multi handle). kf_llm_perform starts
 * WAITING requests whose time has come, waits in curl_multi_poll at most
 * until the earliest retry is due, then reads finished transfers. A final
 * outcome (success, non-retryable error, retries exhausted) moves the req
 * to the finished list as a kf_llm_reply, which kf_llm_next pops.
 *
 * Jitter comes from a per-client xorshift state seeded from the clock and
 * the client's address: no global state.
 */
#include "llm.h"

#include <ctype.h>
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "kf_util.h"

#define KF_LLM_MAX_BODY (8u << 20)     /* bytes of reply accepted */
#define KF_LLM_RETRY_AFTER_MAX 600.0   /* seconds */

typedef enum { REQ_WAITING, REQ_RUNNING } req_state;

typedef struct req {
    struct req *next;
    uint64_t tag;
    kf_llm_config cfg;
    req_state state;
    char *body;                   /* request JSON */
    char *url;
    struct curl_slist *headers;   /* holds the Authorization header */
    CURL *easy;
    char *resp;
    size_t resp_len, resp_cap;
    int resp_overflow;
    double retry_after;           /* from the last attempt, -1 if none */
    int attempts;
    double next_at;               /* monotonic s: when the next attempt may start */
    double submitted, waited;
    long last_status;
} req;

typedef struct done_node {
    struct done_node *next;
    kf_llm_reply reply;
} done_node;

struct kf_llm_client {
    CURLM *multi;
    req *reqs;
    done_node *done_head, *done_tail;
    int pending;                  /* submitted and not yet popped */
    uint64_t rng;
};

void kf_llm_config_default(kf_llm_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->temperature = 0.7;
    cfg->top_p = -1;
    cfg->max_tokens = 4096;
    cfg->seed = -1;
    cfg->connect_timeout_s = 10;
    cfg->timeout_s = 300;
    cfg->max_retries = 4;
    cfg->backoff_s = 1;
    cfg->backoff_max_s = 60;
    cfg->max_in_flight = 8;
}

static int get_num(const json_t *v, const char *key, double lo, double hi, double *out,
                   char *err, size_t errlen)
{
    if (!json_is_number(v)) {
        snprintf(err, errlen, "llm.%s: expected a number", key);
        return -1;
    }
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi)) {
        snprintf(err, errlen, "llm.%s: %g is out of range [%g, %g]", key, d, lo, hi);
        return -1;
    }
    *out = d;
    return 0;
}

static int get_str(const json_t *v, const char *key, char *out, size_t cap, char *err,
                   size_t errlen)
{
    if (!json_is_string(v) || json_string_length(v) >= cap) {
        snprintf(err, errlen, "llm.%s: expected a string of at most %zu characters", key,
                 cap - 1);
        return -1;
    }
    snprintf(out, cap, "%s", json_string_value(v));
    return 0;
}

int kf_llm_config_from_json(const json_t *obj, kf_llm_config *cfg, char *err, size_t errlen)
{
    kf_llm_config_default(cfg);
    if (obj && !json_is_object(obj)) {
        snprintf(err, errlen, "llm: expected an object");
        return -1;
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        double d;
        int rc = 0;
        if (!strcmp(key, "base_url")) rc = get_str(v, key, cfg->base_url, sizeof(cfg->base_url), err, errlen);
        else if (!strcmp(key, "model")) rc = get_str(v, key, cfg->model, sizeof(cfg->model), err, errlen);
        else if (!strcmp(key, "api_key_env")) rc = get_str(v, key, cfg->api_key_env, sizeof(cfg->api_key_env), err, errlen);
        else if (!strcmp(key, "temperature")) { if (!(rc = get_num(v, key, 0, 2, &d, err, errlen))) cfg->temperature = d; }
        else if (!strcmp(key, "top_p")) { if (!(rc = get_num(v, key, 0, 1, &d, err, errlen))) cfg->top_p = d; }
        else if (!strcmp(key, "max_tokens")) { if (!(rc = get_num(v, key, 1, 1e7, &d, err, errlen))) cfg->max_tokens = (long)d; }
        else if (!strcmp(key, "seed")) { if (!(rc = get_num(v, key, 0, 2147483647.0, &d, err, errlen))) cfg->seed = (long)d; }
        else if (!strcmp(key, "connect_timeout_s")) { if (!(rc = get_num(v, key, 0.1, 600, &d, err, errlen))) cfg->connect_timeout_s = d; }
        else if (!strcmp(key, "timeout_s")) { if (!(rc = get_num(v, key, 0.1, 7200, &d, err, errlen))) cfg->timeout_s = d; }
        else if (!strcmp(key, "max_retries")) { if (!(rc = get_num(v, key, 0, 100, &d, err, errlen))) cfg->max_retries = (int)d; }
        else if (!strcmp(key, "backoff_s")) { if (!(rc = get_num(v, key, 0, 600, &d, err, errlen))) cfg->backoff_s = d; }
        else if (!strcmp(key, "backoff_max_s")) { if (!(rc = get_num(v, key, 0, 3600, &d, err, errlen))) cfg->backoff_max_s = d; }
        else if (!strcmp(key, "max_in_flight")) { if (!(rc = get_num(v, key, 1, 1024, &d, err, errlen))) cfg->max_in_flight = (int)d; }
        else {
            snprintf(err, errlen, "llm.%s: unknown field (see docs/campaign-config.md)", key);
            return -1;
        }
        if (rc < 0) return -1;
    }
    if (!cfg->base_url[0] || (strncmp(cfg->base_url, "http://", 7) && strncmp(cfg->base_url, "https://", 8))) {
        snprintf(err, errlen, "llm.base_url: required, http:// or https:// (e.g. http://127.0.0.1:8000/v1)");
        return -1;
    }
    if (!cfg->model[0]) {
        snprintf(err, errlen, "llm.model: required");
        return -1;
    }
    for (const char *p = cfg->api_key_env; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_')) {
            snprintf(err, errlen, "llm.api_key_env: must be the *name* of an environment variable");
            return -1;
        }
    if (cfg->api_key_env[0] && !kf_llm_key_env_allowed(cfg->api_key_env)) {
        snprintf(err, errlen, "llm.api_key_env: %s is one of the coordinator's own variables "
                 "(KFARM_*, PG*, DATABASE_URL): it is never sent to a model endpoint",
                 cfg->api_key_env);
        return -1;
    }
    if (cfg->backoff_max_s < cfg->backoff_s) cfg->backoff_max_s = cfg->backoff_s;
    return 0;
}

void kf_llm_reply_free(kf_llm_reply *r)
{
    if (!r) return;
    free(r->content);
    r->content = NULL;
}

static double mono_s(void) { return kf_util_now_s(); }

static double rand01(kf_llm_client *c)
{
    uint64_t x = c->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c->rng = x;
    return (double)(x >> 11) / 9007199254740992.0;
}

kf_llm_client *kf_llm_client_new(char *err, size_t errlen)
{
    kf_llm_client *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (!(c->multi = curl_multi_init())) {
        free(c);
        snprintf(err, errlen, "curl_multi_init failed");
        return NULL;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    c->rng = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)c;
    if (!c->rng) c->rng = 0x9e3779b97f4a7c15ull;
    return c;
}

static void req_free(kf_llm_client *c, req *r)
{
    if (r->easy) {
        curl_multi_remove_handle(c->multi, r->easy);
        curl_easy_cleanup(r->easy);
    }
    /* The header list holds the key: wipe it before freeing. */
    for (struct curl_slist *h = r->headers; h; h = h->next)
        if (h->data) memset(h->data, 0, strlen(h->data));
    curl_slist_free_all(r->headers);
    free(r->body);
    free(r->url);
    free(r->resp);
    free(r);
}

void kf_llm_client_free(kf_llm_client *c)
{
    if (!c) return;
    while (c->reqs) {
        req *r = c->reqs;
        c->reqs = r->next;
        req_free(c, r);
    }
    while (c->done_head) {
        done_node *d = c->done_head;
        c->done_head = d->next;
        kf_llm_reply_free(&d->reply);
        free(d);
    }
    curl_multi_cleanup(c->multi);
    free(c);
}

int kf_llm_submit(kf_llm_client *c, const kf_llm_config *cfg, const char *system_msg,
                  const char *user_msg, uint64_t tag, char *err, size_t errlen)
{
    req *r = calloc(1, sizeof(*r));
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    r->tag = tag;
    r->cfg = *cfg;
    r->retry_after = -1;
    r->submitted = r->next_at = mono_s();
    size_t bl = strlen(cfg->base_url);
    while (bl > 0 && cfg->base_url[bl - 1] == '/') bl--;
    r->url = malloc(bl + sizeof("/chat/completions"));
    json_t *msgs = json_array(), *body = json_object();
    if (!r->url || !msgs || !body) goto oom;
    memcpy(r->url, cfg->base_url, bl);
    strcpy(r->url + bl, "/chat/completions");
    if (system_msg && *system_msg)
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "system", "content", system_msg));
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", user_msg ? user_msg : ""));
    json_object_set_new(body, "model", json_string(cfg->model));
    json_object_set_new(body, "messages", msgs);
    msgs = NULL;
    if (cfg->temperature >= 0) json_object_set_new(body, "temperature", json_real(cfg->temperature));
    if (cfg->top_p >= 0) json_object_set_new(body, "top_p", json_real(cfg->top_p));
    if (cfg->max_tokens > 0) json_object_set_new(body, "max_tokens", json_integer(cfg->max_tokens));
    if (cfg->seed >= 0) json_object_set_new(body, "seed", json_integer(cfg->seed));
    json_object_set_new(body, "stream", json_false());
    r->body = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    body = NULL;
    if (!r->body) goto oom;
    r->headers = curl_slist_append(NULL, "Content-Type: application/json");
    if (!r->headers) goto oom;
    if (cfg->api_key_env[0]) {
        const char *key = getenv(cfg->api_key_env);
        if (!key || !*key) {
            snprintf(err, errlen, "environment variable %s (llm.api_key_env) is not set",
                     cfg->api_key_env);
            req_free(c, r);
            return -1;
        }
        size_t n = strlen(key) + 32;
        char *h = malloc(n);
        if (!h) goto oom;
        snprintf(h, n, "Authorization: Bearer %s", key);
        struct curl_slist *nh = curl_slist_append(r->headers, h);
        memset(h, 0, n);
        free(h);
        if (!nh) goto oom;
        r->headers = nh;
    }
    r->next = c->reqs;
    c->reqs = r;
    c->pending++;
    return 0;
oom:
    json_decref(msgs);
    json_decref(body);
    req_free(c, r);
    snprintf(err, errlen, "out of memory");
    return -1;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    req *r = ud;
    size_t n = size * nmemb;
    if (r->resp_len + n + 1 > KF_LLM_MAX_BODY) {
        r->resp_overflow = 1;
        return 0; /* aborts the transfer */
    }
    if (r->resp_len + n + 1 > r->resp_cap) {
        size_t cap = r->resp_cap ? r->resp_cap : 4096;
        while (cap < r->resp_len + n + 1) cap *= 2;
        char *p = realloc(r->resp, cap);
        if (!p) return 0;
        r->resp = p;
        r->resp_cap = cap;
    }
    memcpy(r->resp + r->resp_len, data, n);
    r->resp_len += n;
    r->resp[r->resp_len] = 0;
    return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ud)
{
    req *r = ud;
    size_t n = size * nmemb;
    static const char name[] = "retry-after:";
    if (n > sizeof(name) - 1 && strncasecmp(data, name, sizeof(name) - 1) == 0) {
        char v[128];
        size_t vl = n - (sizeof(name) - 1);
        if (vl >= sizeof(v)) vl = sizeof(v) - 1;
        memcpy(v, data + sizeof(name) - 1, vl);
        v[vl] = 0;
        r->retry_after = kf_llm_parse_retry_after(v, (long)time(NULL));
    }
    return n;
}

double kf_llm_parse_retry_after(const char *value, long now_epoch)
{
    if (!value) return -1;
    while (*value == ' ' || *value == '\t') value++;
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", value);
    size_t n = strlen(buf);
    while (n > 0 && isspace((unsigned char)buf[n - 1])) buf[--n] = 0;
    if (!n) return -1;
    char *end;
    double d = strtod(buf, &end);
    if (*end == 0 && isdigit((unsigned char)buf[0])) return d >= 0 ? d : -1;
    time_t t = curl_getdate(buf, NULL);
    if (t == (time_t)-1) return -1;
    double rel = (double)t - (double)now_epoch;
    return rel > 0 ? rel : 0;
}

static int start_attempt(kf_llm_client *c, req *r)
{
    CURL *e = curl_easy_init();
    if (!e) return -1;
    r->resp_len = 0;
    r->resp_overflow = 0;
    if (r->resp) r->resp[0] = 0;
    r->retry_after = -1;
    curl_easy_setopt(e, CURLOPT_URL, r->url);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)strlen(r->body));
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)(r->cfg.connect_timeout_s * 1000));
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(r->cfg.timeout_s * 1000));
    curl_easy_setopt(e, CURLOPT_USERAGENT, "kernelfarm/1");
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
    /* Never follow redirects: the Authorization header must not travel to
     * another host. */
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    if (curl_multi_add_handle(c->multi, e) != CURLM_OK) {
        curl_easy_cleanup(e);
        return -1;
    }
    r->easy = e;
    r->state = REQ_RUNNING;
    r->attempts++;
    return 0;
}

static void unlink_req(kf_llm_client *c, req *r)
{
    for (req **pp = &c->reqs; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            return;
        }
}

/* Move r to the finished list with the given outcome; frees r. */
static void finish(kf_llm_client *c, req *r, kf_llm_reply *rep)
{
    rep->tag = r->tag;
    rep->attempts = r->attempts;
    rep->retries = r->attempts > 0 ? r->attempts - 1 : 0;
    rep->http_status = r->last_status;
    rep->waited_s = r->waited;
    rep->elapsed_s = mono_s() - r->submitted;
    unlink_req(c, r);
    req_free(c, r);
    done_node *d = calloc(1, sizeof(*d));
    if (!d) {
        kf_llm_reply_free(rep);
        c->pending--;
        return;
    }
    d->reply = *rep;
    if (c->done_tail) c->done_tail->next = d;
    else c->done_head = d;
    c->done_tail = d;
}

/* One-line summary of an error body: error.message if JSON, else a prefix. */
int kf_llm_context_error(long status, const char *msg)
{
    if (status != 400 && status != 413 && status != 422) return 0;
    if (status == 413) return 1;
    static const char *const pats[] = { "context length", "context_length", "context window",
                                        "maximum context", "too many tokens", "prompt is too long",
                                        "exceeds the context", "input is too long" };
    char low[256];
    size_t n = 0;
    for (; msg && msg[n] && n + 1 < sizeof(low); n++) low[n] = (char)tolower((unsigned char)msg[n]);
    low[n] = 0;
    for (size_t i = 0; i < sizeof(pats) / sizeof(pats[0]); i++)
        if (strstr(low, pats[i])) return 1;
    return 0;
}

int kf_llm_key_env_allowed(const char *name)
{
    /* the coordinator's own secrets: the fleet key, the database, libpq */
    static const char *const prefixes[] = { "KFARM_", "PG" };
    static const char *const names[] = { "DATABASE_URL" };
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (!strncmp(name, prefixes[i], strlen(prefixes[i]))) return 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcmp(name, names[i])) return 0;
    return 1;
}

static void body_summary(const char *body, char *out, size_t cap)
{
    out[0] = 0;
    if (!body || !*body) return;
    json_t *j = json_loads(body, 0, NULL);
    const char *m = NULL;
    if (j) {
        json_t *e = json_object_get(j, "error");
        if (json_is_object(e)) m = json_string_value(json_object_get(e, "message"));
        else if (json_is_string(e)) m = json_string_value(e);
        if (!m) m = json_string_value(json_object_get(j, "message"));
    }
    snprintf(out, cap, "%.*s", 200, m ? m : body);
    for (char *p = out; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    json_decref(j);
}

/* Parse a 200 body into rep. Returns 0, or -1 with rep->error set. */
static int parse_ok(const char *body, kf_llm_reply *rep)
{
    json_error_t je;
    json_t *j = json_loads(body ? body : "", 0, &je);
    if (!j) {
        snprintf(rep->error, sizeof(rep->error), "unparsable reply (not JSON: %s)", je.text);
        return -1;
    }
    int rc = -1;
    json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
    json_t *msg = json_object_get(ch, "message");
    json_t *content = json_object_get(msg, "content");
    if (!json_is_object(ch) || !json_is_object(msg)) {
        snprintf(rep->error, sizeof(rep->error), "unparsable reply (no choices[0].message)");
        goto out;
    }
    const char *fr = json_string_value(json_object_get(ch, "finish_reason"));
    snprintf(rep->finish_reason, sizeof(rep->finish_reason), "%s", fr ? fr : "");
    rep->content = strdup(json_is_string(content) ? json_string_value(content) : "");
    if (!rep->content) {
        snprintf(rep->error, sizeof(rep->error), "out of memory");
        goto out;
    }
    json_t *u = json_object_get(j, "usage");
    json_t *pt = json_object_get(u, "prompt_tokens"), *ct = json_object_get(u, "completion_tokens");
    rep->prompt_tokens = json_is_integer(pt) ? (long)json_integer_value(pt) : -1;
    rep->completion_tokens = json_is_integer(ct) ? (long)json_integer_value(ct) : -1;
    rep->ok = 1;
    rc = 0;
out:
    json_decref(j);
    return rc;
}

static int retryable_curl(CURLcode rc)
{
    switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return 1;
    default:
        return 0;
    }
}

static void on_done(kf_llm_client *c, req *r, CURLcode res)
{
    long status = 0;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_multi_remove_handle(c->multi, r->easy);
    curl_easy_cleanup(r->easy);
    r->easy = NULL;
    r->state = REQ_WAITING;
    r->last_status = status;

    kf_llm_reply rep;
    memset(&rep, 0, sizeof(rep));
    rep.prompt_tokens = rep.completion_tokens = -1;
    int retry = 0;
    if (res == CURLE_OK && status == 200) {
        parse_ok(r->resp, &rep);
        finish(c, r, &rep);
        return;
    }
    if (res == CURLE_OK) {
        char sum[256];
        body_summary(r->resp, sum, sizeof(sum));
        if (kf_llm_context_error(status, sum))
            snprintf(rep.error, sizeof(rep.error), "prompt too long for the model's context "
                     "(shorten docs_limit/failures_limit or use a larger context): HTTP %ld: %s",
                     status, sum);
        else
            snprintf(rep.error, sizeof(rep.error), "HTTP %ld%s%s", status, sum[0] ? ": " : "", sum);
        retry = status == 429 || status >= 500;
    } else if (res == CURLE_OPERATION_TIMEDOUT) {
        snprintf(rep.error, sizeof(rep.error), "timed out after %.1f s", r->cfg.timeout_s);
        retry = 1;
    } else if (r->resp_overflow) {
        snprintf(rep.error, sizeof(rep.error), "reply larger than %u MiB", KF_LLM_MAX_BODY >> 20);
    } else {
        snprintf(rep.error, sizeof(rep.error), "%s", curl_easy_strerror(res));
        retry = retryable_curl(res);
    }
    if (retry && r->attempts <= r->cfg.max_retries) {
        double d = r->cfg.backoff_s * pow(2.0, r->attempts - 1);
        if (d > r->cfg.backoff_max_s) d = r->cfg.backoff_max_s;
        d = d * (0.5 + 0.5 * rand01(c));
        if (r->retry_after >= 0) {
            double ra = r->retry_after > KF_LLM_RETRY_AFTER_MAX ? KF_LLM_RETRY_AFTER_MAX : r->retry_after;
            if (d < ra) d = ra;
        }
        r->next_at = mono_s() + d;
        r->waited += d;
        return; /* stays on the list, WAITING */
    }
    if (r->attempts > 1) {
        size_t n = strlen(rep.error);
        snprintf(rep.error + n, sizeof(rep.error) - n, " (%d attempts)", r->attempts);
    }
    finish(c, r, &rep);
}

int kf_llm_perform(kf_llm_client *c, int timeout_ms, char *err, size_t errlen)
{
    double now = mono_s(), wake = now + timeout_ms / 1000.0;
    for (req *r = c->reqs, *nx; r; r = nx) {
        nx = r->next;
        if (r->state != REQ_WAITING) continue;
        if (r->next_at <= now) {
            if (start_attempt(c, r) < 0) {
                kf_llm_reply rep;
                memset(&rep, 0, sizeof(rep));
                rep.prompt_tokens = rep.completion_tokens = -1;
                snprintf(rep.error, sizeof(rep.error), "cannot start the request (curl)");
                finish(c, r, &rep);
            }
        } else if (r->next_at < wake) {
            wake = r->next_at;
        }
    }
    int running = 0;
    if (curl_multi_perform(c->multi, &running) != CURLM_OK) {
        snprintf(err, errlen, "curl_multi_perform failed");
        return -1;
    }
    int wait_ms = (int)((wake - mono_s()) * 1000);
    if (wait_ms < 0) wait_ms = 0;
    if (c->done_head) wait_ms = 0;
    if (curl_multi_poll(c->multi, NULL, 0, wait_ms, NULL) != CURLM_OK) {
        snprintf(err, errlen, "curl_multi_poll failed");
        return -1;
    }
    if (curl_multi_perform(c->multi, &running) != CURLM_OK) {
        snprintf(err, errlen, "curl_multi_perform failed");
        return -1;
    }
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(c->multi, &left))) {
        if (m->msg != CURLMSG_DONE) continue;
        req *r = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        if (r) on_done(c, r, m->data.result);
    }
    int n = 0;
    for (req *r = c->reqs; r; r = r->next) n++;
    return n;
}

int kf_llm_next(kf_llm_client *c, kf_llm_reply *out)
{
    done_node *d = c->done_head;
    if (!d) return 0;
    c->done_head = d->next;
    if (!c->done_head) c->done_tail = NULL;
    *out = d->reply;
    free(d);
    c->pending--;
    return 1;
}

int kf_llm_pending(const kf_llm_client *c) { return c->pending; }

void kf_llm_wakeup(kf_llm_client *c) { curl_multi_wakeup(c->multi); }
