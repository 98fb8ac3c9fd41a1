/*
 * llm_service.c -- the thread that turns requested proposals into replies.
 * See llm_service.h for the life of a proposal on this side.
 *
 * Thread safety: the thread has its own kf_db and kf_llm_client; the only
 * state shared with the caller is the stop flag (atomic) and the client's
 * wakeup, which libcurl makes safe to call from another thread.
 */
#include "llm_service.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "kf_util.h"
#include "llm.h"
#include "log.h"

#define KF_SVC_MAX_IN_FLIGHT 64
#define KF_SVC_CLAIM_MARGIN_S 10  /* claim = one attempt's timeout + this */
#define KF_SVC_RENEW_S 3
#define KF_SVC_POLL_S 0.3

typedef struct inflight {
    struct inflight *next;
    int64_t proposal_id, campaign_id;
    int claim_s;            /* claim length: renewed every KF_SVC_RENEW_S */
    long prompt_chars;      /* system + user message, characters */
} inflight;

typedef struct unsaved {
    struct unsaved *next;
    kf_llm_reply reply;
    long prompt_chars;
} unsaved;

struct kf_llm_service {
    pthread_t thread;
    atomic_int stop;
    char *conninfo;
    kf_db *db;
    kf_llm_client *client;
    inflight *flying;
    int n_flying;
    unsaved *pending_writes;
};

static void i64s(char b[24], int64_t v) { snprintf(b, 24, "%lld", (long long)v); }

static char *flying_array(const kf_llm_service *s)
{
    char *a = malloc((size_t)s->n_flying * 24 + 4), *o = a;
    if (!a) return NULL;
    *o++ = '{';
    int i = 0;
    for (inflight *f = s->flying; f; f = f->next, i++)
        o += sprintf(o, "%s%lld", i ? "," : "", (long long)f->proposal_id);
    strcpy(o, "}");
    return a;
}

/* Store a failure without an HTTP reply (config problem, submit refused). */
static void fail_now(kf_llm_service *s, const char *pid, const char *reason)
{
    char err[512];
    const char *p[2] = { pid, reason };
    if (kf_db_cmd(s->db, "UPDATE proposals SET state = 'failed', reason = $2, finished_at = now(),"
                         " claimed_until = NULL WHERE id = $1::bigint AND state = 'requested'",
                  2, p, err, sizeof(err)) < 0)
        kf_log("llm: proposal %s: cannot record failure: %s", pid, err);
    kf_log("llm: proposal %s failed: %s", pid, reason);
}

/* Claim and submit what the limits allow. */
static void claim(kf_llm_service *s)
{
    int room = KF_SVC_MAX_IN_FLIGHT - s->n_flying;
    if (room <= 0) return;
    char err[512], lim[16], claim_s[16];
    snprintf(lim, sizeof(lim), "%d", room);
    /* first claim: short; renewed with the campaign's own timeout below */
    snprintf(claim_s, sizeof(claim_s), "%d", KF_SVC_CLAIM_MARGIN_S);
    char *fly = flying_array(s);
    json_t *per = json_object();
    for (inflight *f = s->flying; f; f = f->next) {
        char k[24];
        i64s(k, f->campaign_id);
        json_object_set_new(per, k, json_integer(json_integer_value(json_object_get(per, k)) + 1));
    }
    char *perj = json_dumps(per, JSON_COMPACT);
    json_decref(per);
    if (!fly || !perj) {
        free(fly);
        free(perj);
        return;
    }
    /* Candidates in id order, at most each campaign's llm.max_in_flight
     * minus what is already in flight for it. The UPDATE re-checks the
     * claim on each row, so two coordinators never claim the same row. */
    const char *p[4] = { lim, fly, claim_s, perj };
    PGresult *r = kf_db_exec(s->db,
        "WITH fly AS (SELECT key::bigint AS cid, value::int AS n FROM jsonb_each_text($4::jsonb)),"
        " cand AS (SELECT q.id, row_number() OVER (PARTITION BY q.campaign_id ORDER BY q.id) AS rn,"
        "   COALESCE(floor((k.config->'llm'->>'max_in_flight')::numeric)::int, 8)"
        "     - COALESCE(f.n, 0) AS room"
        "   FROM proposals q JOIN campaigns k ON k.id = q.campaign_id"
        "   LEFT JOIN fly f ON f.cid = q.campaign_id"
        "   WHERE q.state = 'requested' AND k.state = 'running'"
        "     AND (q.claimed_until IS NULL OR q.claimed_until < now())"
        "     AND NOT (q.id = ANY($2::bigint[]))) "
        "UPDATE proposals p SET claimed_until = now() + $3::int * interval '1 second' "
        "FROM campaigns c WHERE c.id = p.campaign_id"
        "  AND p.id IN (SELECT id FROM cand WHERE rn <= room ORDER BY id LIMIT $1::int)"
        "  AND p.state = 'requested' AND (p.claimed_until IS NULL OR p.claimed_until < now()) "
        "RETURNING p.id, p.campaign_id, c.config->'llm', p.system_prompt, p.prompt,"
        "  p.temperature, p.llm_seed, c.name, p.round, p.slot", 4, p, err, sizeof(err));
    free(fly);
    free(perj);
    if (!r) {
        kf_log("llm: claiming proposals: %s", err);
        return;
    }
    for (int i = 0; i < PQntuples(r); i++) {
        const char *pid = PQgetvalue(r, i, 0);
        int64_t cid = kf_db_i64(r, i, 1, 0);
        json_t *lj = json_loads(PQgetvalue(r, i, 2), JSON_DECODE_ANY, NULL);
        kf_llm_config cfg;
        char e2[512];
        if (kf_llm_config_from_json(lj, &cfg, e2, sizeof(e2)) < 0) {
            json_decref(lj);
            fail_now(s, pid, e2);
            continue;
        }
        json_decref(lj);
        if (!PQgetisnull(r, i, 5)) cfg.temperature = kf_db_f64(r, i, 5, cfg.temperature);
        if (!PQgetisnull(r, i, 6)) cfg.seed = (long)kf_db_i64(r, i, 6, -1);
        inflight *f = calloc(1, sizeof(*f));
        if (!f) break;
        f->proposal_id = kf_db_i64(r, i, 0, 0);
        f->campaign_id = cid;
        f->claim_s = (int)cfg.timeout_s + 1 + KF_SVC_CLAIM_MARGIN_S;
        f->prompt_chars = (long)(strlen(PQgetvalue(r, i, 3)) + strlen(PQgetvalue(r, i, 4)));
        if (kf_llm_submit(s->client, &cfg, kf_db_str(r, i, 3), kf_db_str(r, i, 4),
                          (uint64_t)f->proposal_id, e2, sizeof(e2)) < 0) {
            free(f);
            fail_now(s, pid, e2);
            continue;
        }
        f->next = s->flying;
        s->flying = f;
        s->n_flying++;
        kf_log("llm: campaign %s: proposal %s (round %s slot %s) sent to %s", PQgetvalue(r, i, 7),
               pid, PQgetvalue(r, i, 8), PQgetvalue(r, i, 9), cfg.model);
    }
    PQclear(r);
}

/* Extend the claims of everything in flight (a request can last one
 * attempt's timeout; backoff waits are shorter than the margin). */
static void renew(kf_llm_service *s)
{
    char err[512], id[24], claim_s[16];
    for (inflight *f = s->flying; f; f = f->next) {
        i64s(id, f->proposal_id);
        snprintf(claim_s, sizeof(claim_s), "%d", f->claim_s);
        const char *p[2] = { id, claim_s };
        if (kf_db_cmd(s->db, "UPDATE proposals SET claimed_until = now() + $2::int * interval '1 second' "
                             "WHERE id = $1::bigint AND state = 'requested'", 2, p, err,
                      sizeof(err)) < 0) {
            kf_log("llm: renewing claims: %s", err);
            return;
        }
    }
}

/* A warning for a reply whose server counted far fewer prompt tokens than
 * the prompt holds (some local servers silently keep only the end of a
 * prompt that exceeds their context), into buf; NULL when plausible.
 * Tokenizers give 2..5 characters per token on English and code: fewer
 * than one token per 12 characters is not a count of the whole prompt. */
static const char *truncation_warning(const kf_llm_reply *rep, long chars, char *buf, size_t cap)
{
    if (!rep->ok || rep->prompt_tokens <= 0 || chars < 2400) return NULL;
    if (rep->prompt_tokens * 12 >= chars) return NULL;
    snprintf(buf, cap, "prompt truncated by the server: it counted %ld prompt tokens for a "
             "prompt of %ld characters (about %ld tokens); raise the server's context size",
             rep->prompt_tokens, chars, chars / 4);
    return buf;
}

/* Store one reply. Returns 0, or -1 when the database failed (retry later). */
static int store(kf_llm_service *s, const kf_llm_reply *rep, long prompt_chars)
{
    char warn[384];
    const char *warning = truncation_warning(rep, prompt_chars, warn, sizeof(warn));
    char pid[24], pt[24], ct[24], att[16], st[16], lat[32], err[512];
    i64s(pid, (int64_t)rep->tag);
    i64s(pt, rep->prompt_tokens);
    i64s(ct, rep->completion_tokens);
    snprintf(att, sizeof(att), "%d", rep->attempts);
    snprintf(st, sizeof(st), "%ld", rep->http_status);
    snprintf(lat, sizeof(lat), "%.3f", rep->elapsed_s);
    char *content = rep->content ? strdup(rep->content) : NULL;
    if (content) kf_db_utf8_sanitize(content);
    const char *p[11] = { pid, rep->ok ? "answered" : "failed", content,
                          rep->finish_reason[0] ? rep->finish_reason : NULL,
                          rep->prompt_tokens >= 0 ? pt : NULL,
                          rep->completion_tokens >= 0 ? ct : NULL, att,
                          rep->http_status ? st : NULL, lat, rep->ok ? NULL : rep->error,
                          warning };
    int rc = kf_db_cmd(s->db,
        "UPDATE proposals SET state = $2, reply = $3, finish_reason = $4, prompt_tokens = $5::int,"
        "  completion_tokens = $6::int, attempts = attempts + $7::int, http_status = $8::int,"
        "  latency_s = $9::double precision, reason = $10, answered_at = now(), claimed_until = NULL,"
        "  finished_at = CASE WHEN $2 = 'failed' THEN now() END, warning = $11 "
        "WHERE id = $1::bigint AND state = 'requested'", 11, p, err, sizeof(err));
    free(content);
    if (rc < 0) {
        kf_log("llm: proposal %s: cannot store the reply (kept, retrying): %s", pid, err);
        return -1;
    }
    if (rep->ok)
        kf_log("llm: proposal %s answered (%s, %ld+%ld tokens, %d attempts, %.1f s)", pid,
               rep->finish_reason, rep->prompt_tokens, rep->completion_tokens, rep->attempts,
               rep->elapsed_s);
    else
        kf_log("llm: proposal %s failed: %s", pid, rep->error);
    if (warning) kf_log("llm: proposal %s: %s", pid, warning);
    return 0;
}

/* Forget an in-flight request; returns its prompt size (characters, 0 if
 * unknown). */
static long drop_flying(kf_llm_service *s, int64_t id)
{
    for (inflight **pp = &s->flying; *pp; pp = &(*pp)->next)
        if ((*pp)->proposal_id == id) {
            inflight *f = *pp;
            long chars = f->prompt_chars;
            *pp = f->next;
            free(f);
            s->n_flying--;
            return chars;
        }
    return 0;
}

static void *run(void *arg)
{
    kf_llm_service *s = arg;
    char err[512];
    double next_claim = 0, next_renew = 0;
    while (!atomic_load(&s->stop)) {
        double now = kf_util_now_s();
        int db_ok = kf_db_ensure(s->db, err, sizeof(err)) == 0;
        if (db_ok) {
            /* replies that could not be stored earlier */
            for (unsaved **pp = &s->pending_writes; *pp;) {
                if (store(s, &(*pp)->reply, (*pp)->prompt_chars) == 0) {
                    unsaved *u = *pp;
                    *pp = u->next;
                    kf_llm_reply_free(&u->reply);
                    free(u);
                } else {
                    break;
                }
            }
            if (now >= next_claim) {
                next_claim = now + KF_SVC_POLL_S;
                claim(s);
            }
            if (now >= next_renew) {
                next_renew = now + KF_SVC_RENEW_S;
                renew(s);
            }
        }
        if (kf_llm_perform(s->client, (int)(KF_SVC_POLL_S * 1000), err, sizeof(err)) < 0) {
            kf_log("llm: %s", err);
            struct timespec ts = { 0, 200000000L };
            nanosleep(&ts, NULL);
        }
        kf_llm_reply rep;
        while (kf_llm_next(s->client, &rep)) {
            long chars = drop_flying(s, (int64_t)rep.tag);
            if (store(s, &rep, chars) == 0) {
                kf_llm_reply_free(&rep);
                continue;
            }
            unsaved *u = calloc(1, sizeof(*u));
            if (!u) {
                kf_llm_reply_free(&rep);
                continue;
            }
            u->reply = rep;
            u->prompt_chars = chars;
            unsaved **tail = &s->pending_writes;
            while (*tail) tail = &(*tail)->next;
            *tail = u;
        }
    }
    return NULL;
}

kf_llm_service *kf_llm_service_start(const char *conninfo, char *err, size_t errlen)
{
    kf_llm_service *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    atomic_init(&s->stop, 0);
    if (!(s->db = kf_db_open(conninfo, err, errlen))) goto fail;
    if (!(s->client = kf_llm_client_new(err, errlen))) goto fail;
    if (pthread_create(&s->thread, NULL, run, s) != 0) {
        snprintf(err, errlen, "cannot start the LLM thread");
        goto fail;
    }
    return s;
fail:
    kf_llm_client_free(s->client);
    kf_db_close(s->db);
    free(s);
    return NULL;
}

void kf_llm_service_stop(kf_llm_service *s)
{
    if (!s) return;
    atomic_store(&s->stop, 1);
    kf_llm_wakeup(s->client);
    pthread_join(s->thread, NULL);
    kf_llm_client_free(s->client);
    while (s->flying) {
        inflight *f = s->flying;
        s->flying = f->next;
        free(f);
    }
    while (s->pending_writes) {
        unsaved *u = s->pending_writes;
        s->pending_writes = u->next;
        kf_llm_reply_free(&u->reply);
        free(u);
    }
    kf_db_close(s->db);
    free(s->conninfo);
    free(s);
}
