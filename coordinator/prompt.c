/*
 * prompt.c -- prompt assembly, code extraction, source normalization.
 * See prompt.h for what a prompt contains and why.
 *
 * Everything is read with SELECTs in the caller's transaction; text is
 * appended to a growable buffer (kf_strbuf) that records allocation failure once
 * and is checked at the end, so the assembly code stays linear.
 */
#include "prompt.h"

#include <ctype.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kf_util.h"

#define KF_PROMPT_MAX_ARCH 32 /* distinct architectures described per prompt */

/* Append at most max characters of s (cut on a line boundary when possible),
 * with a note saying how much was left out. */
static void sb_add_trunc(kf_strbuf *b, const char *s, size_t max)
{
    if (!s) return;
    size_t n = strlen(s);
    if (n <= max) {
        kf_strbuf_add(b, s);
        return;
    }
    size_t cut = max;
    while (cut > max / 2 && s[cut] != '\n') cut--;
    if (s[cut] != '\n') cut = max;
    kf_strbuf_addn(b, s, cut);
    kf_strbuf_printf(b, "\n[... %zu more characters left out ...]\n", n - cut);
}

void kf_prompt_opts_default(kf_prompt_opts *o)
{
    o->docs_limit = 4;
    o->docs_chars = 6000;
    o->failures_limit = 6;
    o->log_chars = 2000;
    o->source_chars = 60000;
    o->max_variants = 8;
}

/* ---- normalization ---- */

static int is_word(int c) { return isalnum(c) || c == '_'; }
/* Whether dropping the space between a and b would fuse two tokens into one
 * ("- -" -> "--", "a b" -> "ab"). */
static int fuses(char a, char b)
{
    static const char *const pairs[] = { "++", "--", "&&", "||", "<<", ">>", "==", "!=", "<=",
                                          ">=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",
                                          "->", "::", "##", "//", "/*", "*/", "..", "<:", "%:" };
    if (is_word((unsigned char)a) && is_word((unsigned char)b)) return 1;
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
        if (pairs[i][0] == a && pairs[i][1] == b) return 1;
    return 0;
}

char *kf_prompt_normalize(const char *src)
{
    size_t n = strlen(src);
    char *out = malloc(n + 2), *o = out;
    if (!out) return NULL;
    int pending_ws = 0, pending_nl = 0, line_pp = 0, at_line_start = 1;
    char last = 0;
    for (size_t i = 0; i < n;) {
        char c = src[i];
        /* comments */
        if (c == '/' && src[i + 1] == '/') {
            while (i < n && src[i] != '\n') i++;
            continue;
        }
        if (c == '/' && src[i + 1] == '*') {
            i += 2;
            while (i < n && !(src[i] == '*' && src[i + 1] == '/')) i++;
            i = i < n ? i + 2 : n;
            pending_ws = 1;
            continue;
        }
        if (c == '\\' && src[i + 1] == '\n') { /* line continuation */
            i += 2;
            pending_ws = 1;
            continue;
        }
        if (isspace((unsigned char)c)) {
            if (c == '\n') {
                if (line_pp) pending_nl = 1;
                line_pp = 0;
                at_line_start = 1;
            }
            pending_ws = 1;
            i++;
            continue;
        }
        /* a token character: flush pending whitespace (line breaks survive
         * only around preprocessor lines) */
        if (at_line_start && c == '#' && o > out && last != '\n') pending_nl = 1;
        if (pending_nl && o > out) *o++ = '\n';
        else if (pending_ws && o > out && last != '\n' && fuses(last, c))
            *o++ = ' ';
        if (pending_nl || o == out) last = '\n';
        pending_ws = pending_nl = 0;
        if (at_line_start && c == '#') line_pp = 1;
        at_line_start = 0;
        if (c == '"' || c == '\'') { /* literal: verbatim */
            char q = c;
            *o++ = src[i++];
            while (i < n && src[i] != q && src[i] != '\n') {
                if (src[i] == '\\' && i + 1 < n) *o++ = src[i++];
                *o++ = src[i++];
            }
            if (i < n && src[i] == q) *o++ = src[i++];
            last = q;
            continue;
        }
        *o++ = c;
        last = c;
        i++;
    }
    *o = 0;
    return out;
}

int kf_prompt_norm_sha256(const char *src, char out[65])
{
    char *n = kf_prompt_normalize(src);
    if (!n) return -1;
    kf_util_sha256_hex(n, strlen(n), out);
    free(n);
    return 0;
}

/* ---- code extraction ---- */

static char *extract_code(const char *reply, const char *finish_reason, char *reason,
                          size_t reasonlen);

static int code_lang(const char *s, size_t n)
{
    static const char *const ok[] = { "", "c", "cuda", "cpp", "c++", "cu", "cxx", "h", "cc" };
    char lang[16];
    size_t k = 0;
    while (k < n && k < sizeof(lang) - 1 && !isspace((unsigned char)s[k]) && s[k] != '{') {
        lang[k] = (char)tolower((unsigned char)s[k]);
        k++;
    }
    lang[k] = 0;
    if (k < n && !isspace((unsigned char)s[k]) && s[k] != '{') return 0; /* very long tag */
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        if (!strcmp(lang, ok[i])) return 1;
    return 0;
}

/* Case-insensitive search for the ASCII tag `t` in s. */
static const char *find_tag(const char *s, const char *t)
{
    size_t n = strlen(t);
    for (; *s; s++)
        if (!strncasecmp(s, t, n)) return s;
    return NULL;
}

char *kf_prompt_strip_reasoning(const char *reply)
{
    static const char *const tags[][2] = { { "<think>", "</think>" },
                                           { "<thinking>", "</thinking>" },
                                           { "<reasoning>", "</reasoning>" } };
    char *out = strdup(reply ? reply : "");
    if (!out) return NULL;
    for (size_t t = 0; t < sizeof(tags) / sizeof(tags[0]); t++) {
        char *open;
        while ((open = (char *)find_tag(out, tags[t][0]))) {
            const char *close = find_tag(open + strlen(tags[t][0]), tags[t][1]);
            /* unclosed: the rest is reasoning the model never finished */
            const char *rest = close ? close + strlen(tags[t][1]) : open + strlen(open);
            memmove(open, rest, strlen(rest) + 1);
        }
    }
    /* A server that strips the opening tag leaves "...draft...</think>answer". */
    for (size_t t = 0; t < sizeof(tags) / sizeof(tags[0]); t++) {
        const char *close = find_tag(out, tags[t][1]);
        if (close) {
            const char *rest = close + strlen(tags[t][1]);
            memmove(out, rest, strlen(rest) + 1);
        }
    }
    return out;
}

char *kf_prompt_extract_code(const char *reply_in, const char *finish_reason,
                             char *reason, size_t reasonlen)
{
    char *stripped = kf_prompt_strip_reasoning(reply_in);
    if (!stripped) {
        snprintf(reason, reasonlen, "out of memory");
        return NULL;
    }
    char *code = extract_code(stripped, finish_reason, reason, reasonlen);
    free(stripped);
    return code;
}

static char *extract_code(const char *reply, const char *finish_reason, char *reason,
                          size_t reasonlen)
{
    int cut = finish_reason && !strcmp(finish_reason, "length");
    const char *best = NULL, *open_start = NULL;
    size_t best_len = 0;
    int in_block = 0, usable = 0, any_block = 0;
    const char *block_start = NULL;
    for (const char *p = reply ? reply : ""; *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *q = p;
        int ind = 0;
        while (ind < 3 && *q == ' ') q++, ind++;
        int fence = (size_t)(q - p) + 3 <= len && !strncmp(q, "```", 3);
        if (fence) {
            if (!in_block) {
                any_block = 1;
                in_block = 1;
                const char *info = q + 3;
                while (*info == '`') info++;
                usable = code_lang(info, (size_t)(p + len - info));
                block_start = eol ? eol + 1 : p + len;
                open_start = block_start;
            } else {
                /* a closing fence: only backticks and spaces */
                const char *r = q + 3;
                while (r < p + len && (*r == '`' || isspace((unsigned char)*r))) r++;
                if (r == p + len) {
                    in_block = 0;
                    size_t bl = (size_t)(p - block_start);
                    if (usable && bl >= best_len && bl > 0) {
                        best = block_start;
                        best_len = bl;
                    }
                    open_start = NULL;
                }
            }
        }
        p = eol ? eol + 1 : p + len;
    }
    if (!best && in_block && usable && !cut && open_start && *open_start) {
        /* the model forgot the closing fence but was not cut off */
        best = open_start;
        best_len = strlen(open_start);
    }
    if (!best) {
        if (cut) snprintf(reason, reasonlen, "reply cut off (finish_reason=length)");
        else if (any_block) snprintf(reason, reasonlen, "no C/CUDA code block in the reply");
        else snprintf(reason, reasonlen, "no code block in the reply");
        return NULL;
    }
    char *code = malloc(best_len + 2);
    if (!code) {
        snprintf(reason, reasonlen, "out of memory");
        return NULL;
    }
    memcpy(code, best, best_len);
    code[best_len] = 0;
    if (best_len && code[best_len - 1] != '\n') strcat(code, "\n");
    if (!strstr(code, "kf_entry")) {
        free(code);
        snprintf(reason, reasonlen, "the code block does not define kf_entry");
        return NULL;
    }
    return code;
}

/* ---- prompt assembly ---- */

static void add_tensors(kf_strbuf *b, json_t *arr, const char *what)
{
    size_t i;
    json_t *t;
    json_array_foreach(arr, i, t) {
        kf_strbuf_printf(b, "- %s `%s`: %s [", what, json_string_value(json_object_get(t, "name")) ?: "?",
                  json_string_value(json_object_get(t, "dtype")) ?: "?");
        size_t k;
        json_t *d;
        json_array_foreach(json_object_get(t, "shape"), k, d) {
            if (k) kf_strbuf_add(b, ", ");
            if (json_is_string(d)) kf_strbuf_add(b, json_string_value(d));
            else kf_strbuf_printf(b, "%lld", (long long)json_integer_value(d));
        }
        kf_strbuf_add(b, "]\n");
    }
}

static void add_shapes(kf_strbuf *b, json_t *arr, const char *title)
{
    if (!json_is_array(arr) || !json_array_size(arr)) return;
    kf_strbuf_printf(b, "%s: ", title);
    size_t i;
    json_t *s;
    json_array_foreach(arr, i, s) {
        json_t *sz = json_object_get(s, "sizes");
        if (!json_is_object(sz)) sz = s;
        char *t = json_dumps(sz, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (i) kf_strbuf_add(b, ", ");
        kf_strbuf_add(b, t ? t : "?");
        free(t);
        json_t *w = json_object_get(s, "weight");
        if (json_is_number(w)) kf_strbuf_printf(b, " (weight %g)", json_number_value(w));
    }
    kf_strbuf_add(b, "\n");
}

/* The metrics keys worth showing a model; others (sandbox, compile flags) are noise. */
static void add_metrics(kf_strbuf *b, const char *metrics_text)
{
    json_t *m = metrics_text ? json_loads(metrics_text, 0, NULL) : NULL;
    if (!json_is_object(m)) {
        json_decref(m);
        return;
    }
    static const char *const keys[] = { "bound", "roofline", "profile", "timing", "validation",
                                        "kernels", "ptxas" };
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        json_t *v = json_object_get(m, keys[i]);
        if (!v) continue;
        char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(4));
        if (t) {
            kf_strbuf_printf(b, "  %s: ", keys[i]);
            sb_add_trunc(b, t, 600);
            kf_strbuf_add(b, "\n");
        }
        free(t);
    }
    json_decref(m);
}

/* The architecture of a routing class: the class itself when it names one,
 * else the sm_XY class of a worker that serves it. */
static void class_arch(kf_db *db, const char *cls, char *arch, size_t cap)
{
    snprintf(arch, cap, "%s", cls);
    if (!strcmp(cls, "cpu") || !strncmp(cls, "sm_", 3)) return;
    const char *p[1] = { cls };
    char err[256];
    PGresult *r = kf_db_exec(db,
        "SELECT c FROM workers w, unnest(w.classes) c WHERE $1 = ANY(w.classes) AND c LIKE 'sm\\_%' "
        "ORDER BY w.last_seen DESC LIMIT 1", 1, p, err, sizeof(err));
    if (r && PQntuples(r) > 0) snprintf(arch, cap, "%s", PQgetvalue(r, 0, 0));
    if (r) PQclear(r);
}

int kf_prompt_build(kf_db *db, int64_t campaign_id, int64_t parent_id,
                    const kf_prompt_opts *opts, char **system, char **user,
                    char *err, size_t errlen)
{
    kf_prompt_opts dflt;
    if (!opts) {
        kf_prompt_opts_default(&dflt);
        opts = &dflt;
    }
    *system = *user = NULL;
    char cid[24], pid[24];
    snprintf(cid, sizeof(cid), "%lld", (long long)campaign_id);
    snprintf(pid, sizeof(pid), "%lld", (long long)parent_id);
    const char *p1[1] = { cid };
    const char *p2[2] = { cid, pid };
    kf_strbuf u = { 0 }, s = { 0 };
    json_t *spec = NULL;
    PGresult *r = kf_db_exec(db,
        "SELECT t.name, t.spec::text, array_to_json(c.targets)::text FROM campaigns c "
        "JOIN tasks t ON t.id = c.task_id WHERE c.id = $1::bigint", 1, p1, err, errlen);
    if (!r) return -1;
    if (PQntuples(r) == 0) {
        PQclear(r);
        snprintf(err, errlen, "no campaign %s", cid);
        return -1;
    }
    char task_name[128];
    snprintf(task_name, sizeof(task_name), "%s", PQgetvalue(r, 0, 0));
    spec = json_loads(PQgetvalue(r, 0, 1), 0, NULL);
    json_t *targets = json_loads(PQgetvalue(r, 0, 2), 0, NULL);
    PQclear(r);
    const char *backend = json_string_value(json_object_get(spec, "backend"));
    int cuda = backend && !strcmp(backend, "cuda");
    const char *fence = cuda ? "cuda" : "c";
    const char *definition = json_string_value(json_object_get(spec, "definition"));

    /* ---- system ---- */
    kf_strbuf_printf(&s,
        "You are an expert performance engineer who writes %s kernels. You improve one kernel "
        "at a time for kernelfarm, which compiles your code, validates it against a reference "
        "on many shapes (including the largest), and times it against a baseline on real "
        "hardware. Most attempts fail: correctness comes first, then speed.\n\n"
        "Output contract:\n"
        "- Reply with a short explanation of the idea (a few sentences), then exactly ONE "
        "fenced code block (```%s ... ```) holding the complete source file. Nothing after it.\n"
        "- The file must #include \"kf_abi.h\" and define `int kf_entry(const kf_call *call)` "
        "returning 0 on success. It must work for every shape of the task, not only the "
        "benchmark shape, and must write every output element.\n"
        "- Do not cache results between calls, do not write the inputs, do not start work that "
        "outlives the call%s.\n"
        "- Tunable parameters: do not guess block sizes, unroll factors or thread counts. "
        "Declare them instead, one per line, as\n"
        "      // kfarm:tune NAME=v1,v2,v3\n"
        "  and give each a default with `#ifndef NAME` / `#define NAME v1` / `#endif`. The farm "
        "compiles every combination with -DNAME=value (about %d combinations are tried) and "
        "keeps the fastest. Values are plain tokens (numbers, identifiers).\n",
        cuda ? "CUDA" : "CPU (C11 + OpenMP)", fence,
        cuda ? " (all work on call->stream)" : " (all threads joined before returning)",
        opts->max_variants);

    /* ---- 1. task ---- */
    kf_strbuf_printf(&u, "# Task: %s (%s backend)\n\n", task_name, backend ? backend : "?");
    kf_strbuf_add(&u, "## Definition (exact; this is what the reference computes)\n\n");
    kf_strbuf_add(&u, definition ? definition : "(no definition given)");
    kf_strbuf_add(&u, "\n\n## Tensors\n\n");
    add_tensors(&u, json_object_get(spec, "inputs"), "input");
    add_tensors(&u, json_object_get(spec, "outputs"), "output");
    json_t *sizes = json_object_get(spec, "sizes");
    if (json_is_array(sizes)) {
        kf_strbuf_add(&u, "\nSize symbols, in the order of call->sizes[]: ");
        size_t i;
        json_t *v;
        json_array_foreach(sizes, i, v) kf_strbuf_printf(&u, "%s%s", i ? ", " : "", json_string_value(v) ?: "?");
        kf_strbuf_add(&u, "\n");
    }
    add_shapes(&u, json_object_get(spec, "validation"), "Validation shapes (all must pass)");
    add_shapes(&u, json_object_get(spec, "benchmark"), "Benchmark shapes (timed)");
    json_t *tol = json_object_get(spec, "tolerance");
    if (tol) {
        char *t = json_dumps(tol, JSON_COMPACT | JSON_REAL_PRECISION(6));
        kf_strbuf_printf(&u, "Tolerances: %s\n", t ? t : "?");
        free(t);
    }
    json_t *forbid = json_object_get(spec, "forbid");
    if (json_is_array(forbid) && json_array_size(forbid)) {
        kf_strbuf_add(&u, "Forbidden symbols (using them is rejected): ");
        size_t i;
        json_t *v;
        json_array_foreach(forbid, i, v) kf_strbuf_printf(&u, "%s%s", i ? ", " : "", json_string_value(v) ?: "?");
        kf_strbuf_add(&u, "\n");
    }

    /* ---- 2. ABI ---- */
    kf_strbuf_add(&u, "\n# Kernel ABI (kf_abi.h, provided by the farm)\n\n```c\n");
    kf_strbuf_add(&u, kf_prompt_abi_text());
    kf_strbuf_add(&u, "```\n");

    /* ---- 3. hardware ---- */
    kf_strbuf_add(&u, "\n# Target hardware\n");
    char seen[KF_PROMPT_MAX_ARCH][32];
    int nseen = 0;
    size_t ti;
    json_t *tv;
    json_array_foreach(targets, ti, tv) {
        const char *cls = json_string_value(tv);
        if (!cls) continue;
        char arch[32];
        class_arch(db, cls, arch, sizeof(arch));
        const char *note = kf_prompt_hw_note(arch);
        int dup = 0;
        for (int k = 0; k < nseen; k++) dup |= !strcmp(seen[k], arch);
        kf_strbuf_printf(&u, "\nTarget class `%s`%s%s%s\n", cls, strcmp(arch, cls) ? " (architecture " : "",
                  strcmp(arch, cls) ? arch : "", strcmp(arch, cls) ? ")" : "");
        if (dup) continue;
        if (nseen < KF_PROMPT_MAX_ARCH) snprintf(seen[nseen++], sizeof(seen[0]), "%s", arch);
        if (note) {
            kf_strbuf_add(&u, "\n");
            kf_strbuf_add(&u, note);
        } else {
            kf_strbuf_add(&u, "(no hardware notes for this class)\n");
        }
    }

    /* ---- parent + feedback (read first: the errors steer retrieval) ---- */
    r = kf_db_exec(db,
        "SELECT k.source, k.defines::text, k.proposer, k.id FROM candidates k "
        "WHERE k.campaign_id = $1::bigint AND k.id = $2::bigint", 2, p2, err, errlen);
    if (!r) goto fail;
    if (PQntuples(r) == 0) {
        PQclear(r);
        snprintf(err, errlen, "candidate %s is not in campaign %s", pid, cid);
        goto fail;
    }
    char *parent_src = strdup(PQgetvalue(r, 0, 0));
    char parent_defs[1024], parent_proposer[16];
    snprintf(parent_defs, sizeof(parent_defs), "%s", PQgetvalue(r, 0, 1));
    snprintf(parent_proposer, sizeof(parent_proposer), "%s", PQgetvalue(r, 0, 2));
    PQclear(r);
    if (!parent_src) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    PGresult *fb = kf_db_exec(db,
        "SELECT j.target, j.state, e.verdict, e.detail, e.candidate_us, e.baseline_us, e.speedup,"
        " e.metrics::text, e.compile_log FROM job_keys jk JOIN jobs j ON j.id = jk.job_id "
        "LEFT JOIN evaluations e ON e.job_id = j.id AND e.is_final "
        "WHERE jk.candidate_id = $2::bigint AND jk.campaign_id = $1::bigint AND jk.verifies IS NULL "
        "ORDER BY j.target",
        2, p2, err, errlen);
    if (!fb) {
        free(parent_src);
        goto fail;
    }

    /* ---- 4. retrieved reference passages ---- */
    {
        kf_strbuf q = { 0 };
        kf_strbuf_add(&q, task_name);
        kf_strbuf_add(&q, " ");
        kf_strbuf_addn(&q, definition ? definition : "", definition ? (strlen(definition) < 1500 ? strlen(definition) : 1500) : 0);
        for (int i = 0; i < PQntuples(fb); i++) {
            kf_strbuf_add(&q, " ");
            if (kf_db_str(fb, i, 3)) kf_strbuf_addn(&q, kf_db_str(fb, i, 3), strlen(kf_db_str(fb, i, 3)) < 500 ? strlen(kf_db_str(fb, i, 3)) : 500);
            if (kf_db_str(fb, i, 8)) kf_strbuf_addn(&q, kf_db_str(fb, i, 8), strlen(kf_db_str(fb, i, 8)) < 500 ? strlen(kf_db_str(fb, i, 8)) : 500);
        }
        for (int k = 0; k < nseen; k++) {
            kf_strbuf_add(&q, " ");
            kf_strbuf_add(&q, seen[k]);
        }
        char lim[16];
        snprintf(lim, sizeof(lim), "%d", opts->docs_limit);
        const char *pq[3] = { cid, q.s ? q.s : "", lim };
        PGresult *d = q.oom ? NULL : kf_db_exec(db,
            "SELECT d.document, d.chunk, d.content FROM doc_chunks d, "
            " (SELECT NULLIF(replace(plainto_tsquery('english', $2)::text, '&', '|'), '')::tsquery AS q) s "
            "WHERE d.campaign_id = $1::bigint AND s.q IS NOT NULL AND d.tsv @@ s.q "
            "ORDER BY ts_rank(d.tsv, s.q) DESC, d.id LIMIT $3::int", 3, pq, err, errlen);
        free(q.s);
        if (d && PQntuples(d) > 0) {
            kf_strbuf_add(&u, "\n# Reference passages (from the campaign's hardware/compiler manuals)\n");
            size_t used = 0;
            for (int i = 0; i < PQntuples(d) && used < opts->docs_chars; i++) {
                const char *c = PQgetvalue(d, i, 2);
                size_t room = opts->docs_chars - used;
                kf_strbuf_printf(&u, "\n## %s, part %s\n\n", PQgetvalue(d, i, 0), PQgetvalue(d, i, 1));
                sb_add_trunc(&u, c, room);
                kf_strbuf_add(&u, "\n");
                used += strlen(c) < room ? strlen(c) : room;
            }
        }
        if (d) PQclear(d);
    }

    /* ---- 5. parent ---- */
    kf_strbuf_printf(&u, "\n# Current kernel (candidate %s, %s)\n\n", pid,
              !strcmp(parent_proposer, "seed") ? "the campaign's starting point" : "best so far");
    if (strcmp(parent_defs, "{}") != 0)
        kf_strbuf_printf(&u, "The farm's fastest choice of its tunables: %s\n\n", parent_defs);
    kf_strbuf_printf(&u, "```%s\n", fence);
    sb_add_trunc(&u, parent_src, opts->source_chars);
    if (u.len && u.s[u.len - 1] != '\n') kf_strbuf_add(&u, "\n");
    kf_strbuf_add(&u, "```\n\n## Its results\n\n");
    free(parent_src);
    if (PQntuples(fb) == 0) kf_strbuf_add(&u, "(not evaluated)\n");
    for (int i = 0; i < PQntuples(fb); i++) {
        const char *verdict = kf_db_str(fb, i, 2);
        kf_strbuf_printf(&u, "- target %s: %s", PQgetvalue(fb, i, 0), verdict ? verdict : "not finished");
        if (kf_db_str(fb, i, 6))
            kf_strbuf_printf(&u, ", %.3fx the baseline (%.2f us vs %.2f us)", kf_db_f64(fb, i, 6, 0),
                      kf_db_f64(fb, i, 4, 0), kf_db_f64(fb, i, 5, 0));
        kf_strbuf_add(&u, "\n");
        if (kf_db_str(fb, i, 3)) {
            kf_strbuf_add(&u, "  detail: ");
            sb_add_trunc(&u, kf_db_str(fb, i, 3), opts->log_chars);
            kf_strbuf_add(&u, "\n");
        }
        add_metrics(&u, kf_db_str(fb, i, 7));
        if (verdict && strcmp(verdict, "ok") && kf_db_str(fb, i, 8) && *kf_db_str(fb, i, 8)) {
            kf_strbuf_add(&u, "  compiler output:\n```\n");
            sb_add_trunc(&u, kf_db_str(fb, i, 8), opts->log_chars);
            kf_strbuf_add(&u, "\n```\n");
        }
    }
    PQclear(fb);

    /* ---- 6. recent failures ---- */
    {
        char lim[16];
        snprintf(lim, sizeof(lim), "%d", opts->failures_limit);
        const char *pf[2] = { cid, lim };
        PGresult *f = kf_db_exec(db,
            "(SELECT e.created_at, 'candidate ' || e.candidate_id || ' (' || e.job_target || '): ' || e.verdict"
            "   || COALESCE(': ' || left(regexp_replace(e.detail, '\\s+', ' ', 'g'), 240), '') AS line"
            " FROM evaluations e"
            " WHERE e.job_campaign_id = $1::bigint AND e.job_purpose = 'eval' AND e.is_final AND e.verdict <> 'ok'"
            " ORDER BY e.id DESC LIMIT $2::int)"
            " UNION ALL "
            "(SELECT p.finished_at, 'proposal ' || p.id || ': ' || left(p.reason, 240)"
            " FROM proposals p WHERE p.campaign_id = $1::bigint AND p.state IN ('failed', 'rejected')"
            " ORDER BY p.id DESC LIMIT $2::int) ORDER BY 1 DESC LIMIT $2::int",
            2, pf, err, errlen);
        if (!f) goto fail;
        if (PQntuples(f) > 0) {
            kf_strbuf_add(&u, "\n# Recent failures in this campaign (avoid repeating them)\n\n");
            for (int i = 0; i < PQntuples(f); i++) kf_strbuf_printf(&u, "- %s\n", PQgetvalue(f, i, 1));
        }
        PQclear(f);
    }

    /* ---- 7. hints ---- */
    {
        PGresult *h = kf_db_exec(db, "SELECT text FROM hints WHERE campaign_id = $1::bigint ORDER BY id",
                                 1, p1, err, errlen);
        if (!h) goto fail;
        if (PQntuples(h) > 0) {
            kf_strbuf_add(&u, "\n# Hints from the engineers running this campaign\n\n");
            for (int i = 0; i < PQntuples(h); i++) {
                kf_strbuf_add(&u, "- ");
                sb_add_trunc(&u, PQgetvalue(h, i, 0), 2000);
                kf_strbuf_add(&u, "\n");
            }
        }
        PQclear(h);
    }

    kf_strbuf_printf(&u,
        "\n# Your turn\n\nWrite a faster, still exactly correct version of the current kernel "
        "(a child of candidate %s). Change one idea at a time, declare tunables with "
        "`// kfarm:tune` instead of guessing, and answer with one ```%s code block.\n", pid, fence);

    if (u.oom || s.oom) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    json_decref(spec);
    json_decref(targets);
    *system = s.s;
    *user = u.s;
    return 0;
fail:
    json_decref(spec);
    json_decref(targets);
    free(u.s);
    free(s.s);
    return -1;
}

/* ---- writes: the engineers' hints and reference documents (kfarm hint, kfarm docs) ---- */

#define KF_DOC_CHUNK_TARGET 1500
#define KF_DOC_CHUNK_MAX 3000

/* Insert the chunks of text as document doc (in the caller's transaction).
 * Returns the chunk count or -1. */
static int doc_chunks_insert(kf_db *db, const char *cid, const char *doc, char *text, char *err, size_t errlen)
{
    const char *pd[2] = { cid, doc };
    if (kf_db_cmd(db, "DELETE FROM doc_chunks WHERE campaign_id = $1::bigint AND document = $2",
                  2, pd, err, errlen) < 0)
        return -1;
    int n = 0;
    size_t len = strlen(text), pos = 0;
    while (pos < len) {
        size_t end = pos + KF_DOC_CHUNK_MAX < len ? pos + KF_DOC_CHUNK_MAX : len;
        if (end < len) {
            /* prefer a paragraph break after KF_DOC_CHUNK_TARGET/2, else a line break */
            size_t cut = 0;
            for (size_t i = pos + KF_DOC_CHUNK_TARGET / 2; i + 1 < end; i++)
                if (text[i] == '\n' && text[i + 1] == '\n') {
                    cut = i + 2;
                    if (i >= pos + KF_DOC_CHUNK_TARGET) break;
                }
            if (!cut)
                for (size_t i = end - 1; i > pos + KF_DOC_CHUNK_TARGET / 2; i--)
                    if (text[i] == '\n') {
                        cut = i + 1;
                        break;
                    }
            if (cut) end = cut;
        }
        /* never split a UTF-8 sequence */
        while (end < len && ((unsigned char)text[end] & 0xc0) == 0x80) end++;
        char save = text[end];
        text[end] = 0;
        const char *s = text + pos;
        while (*s == '\n' || *s == ' ') s++;
        if (*s) {
            char no[16];
            snprintf(no, sizeof(no), "%d", n);
            const char *p[4] = { cid, doc, no, s };
            if (kf_db_cmd(db, "INSERT INTO doc_chunks (campaign_id, document, chunk, content) "
                              "VALUES ($1::bigint, $2, $3::int, $4)", 4, p, err, errlen) < 0) {
                text[end] = save;
                return -1;
            }
            n++;
        }
        text[end] = save;
        pos = end;
    }
    return n;
}

int kf_prompt_doc_add(kf_db *db, int64_t campaign_id, const char *doc, char *text, char *err, size_t errlen)
{
    char cid[24];
    snprintf(cid, sizeof(cid), "%lld", (long long)campaign_id);
    if (kf_db_begin(db, err, errlen) < 0) return -1;
    int n = doc_chunks_insert(db, cid, doc, text, err, errlen);
    if (n < 0 || kf_db_commit(db, err, errlen) < 0) {
        kf_db_rollback(db);
        return -1;
    }
    return n;
}

int kf_prompt_hint_add(kf_db *db, int64_t campaign_id, const char *text, int64_t *id, char *err, size_t errlen)
{
    char cid[24];
    snprintf(cid, sizeof(cid), "%lld", (long long)campaign_id);
    const char *p[2] = { cid, text };
    PGresult *r = kf_db_exec(db, "INSERT INTO hints (campaign_id, text) VALUES ($1::bigint, $2) RETURNING id", 2, p,
                             err, errlen);
    if (!r) return -1;
    *id = kf_db_i64(r, 0, 0, 0);
    PQclear(r);
    return 0;
}
