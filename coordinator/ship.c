/*
 * ship.c -- ship the winners (see ship.h for the design: the choice per
 * class and shape, how several winners share one translation unit, the
 * files written).
 */
#define _GNU_SOURCE
#include "ship.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kf_util.h"
#include "noise.h"

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

void kf_ship_slug(const char *name, char *out, size_t cap)
{
    size_t i = 0;
    for (; name[i] && i + 1 < cap; i++)
        out[i] = (isalnum((unsigned char)name[i]) || name[i] == '_') ? name[i] : '_';
    out[i] = 0;
}

void kf_ship_plan_free(kf_ship_plan *p)
{
    if (!p) return;
    for (int c = 0; c < p->n_cls; c++)
        for (int i = 0; i < p->cls[c].n_e; i++) {
            free(p->cls[c].e[i].source);
            free(p->cls[c].e[i].defines_json);
        }
    free(p->baseline_src);
    free(p);
}

/* The speedup and its interval at benchmark shape `sizes` from an
 * evaluation's metrics.timing.shapes. 0 when found. */
static int shape_speedup(json_t *shapes, const kf_ship_plan *p, const int64_t *sizes, double *s, double *lo, double *hi)
{
    size_t i;
    json_t *sh;
    json_array_foreach(shapes, i, sh) {
        json_t *sz = json_object_get(sh, "sizes");
        int match = json_is_object(sz);
        for (int k = 0; match && k < p->n_sizes; k++) {
            json_t *v = json_object_get(sz, p->size_names[k]);
            match = json_is_integer(v) && json_integer_value(v) == sizes[k];
        }
        if (!match) continue;
        json_t *sp = json_object_get(sh, "speedup");
        if (!json_is_number(sp)) return -1;
        *s = json_number_value(sp);
        json_t *c = json_object_get(sh, "candidate"), *b = json_object_get(sh, "baseline");
        kf_noise_shape(*s, json_number_value(json_object_get(b, "cv")), json_number_value(json_object_get(c, "cv")), lo,
                       hi);
        return 0;
    }
    return -1;
}

/* Read the task: sizes, benchmark shapes, backend, dispatch rule, baseline. */
static int load_task(kf_db *db, kf_ship_plan *p, char *err, size_t errlen)
{
    char id[24];
    snprintf(id, sizeof(id), "%lld", (long long)p->task_id);
    const char *pr[1] = { id };
    PGresult *r = kf_db_exec(db, "SELECT name, spec::text, files::text FROM tasks WHERE id = $1::bigint", 1, pr, err,
                             errlen);
    if (!r) return -1;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return fail(err, errlen, "task %s not found", id);
    }
    snprintf(p->task_name, sizeof(p->task_name), "%s", PQgetvalue(r, 0, 0));
    json_error_t je;
    json_t *spec = json_loads(PQgetvalue(r, 0, 1), 0, &je);
    json_t *files = json_loads(PQgetvalue(r, 0, 2), 0, &je);
    PQclear(r);
    int rc = -1;
    if (!spec || !files) {
        fail(err, errlen, "task %s: stored spec or files are not JSON", p->task_name);
        goto out;
    }
    const char *backend = json_string_value(json_object_get(spec, "backend"));
    p->cuda = backend && !strcmp(backend, "cuda");
    json_t *sizes = json_object_get(spec, "sizes");
    p->n_sizes = (int)json_array_size(sizes);
    if (p->n_sizes < 1 || p->n_sizes > KF_SHIP_MAX_SIZES) {
        fail(err, errlen, "task %s: %d size symbols (1..%d)", p->task_name, p->n_sizes, KF_SHIP_MAX_SIZES);
        goto out;
    }
    for (int k = 0; k < p->n_sizes; k++)
        snprintf(p->size_names[k], sizeof(p->size_names[k]), "%s", json_string_value(json_array_get(sizes, (size_t)k)));
    json_t *bench = json_object_get(spec, "benchmark");
    p->n_shapes = (int)json_array_size(bench);
    if (p->n_shapes < 1 || p->n_shapes > KF_SHIP_MAX_SHAPES) {
        fail(err, errlen, "task %s: %d benchmark shapes (1..%d)", p->task_name, p->n_shapes, KF_SHIP_MAX_SHAPES);
        goto out;
    }
    for (int c = 0; c < KF_SHIP_MAX_CLASSES; c++)
        for (int s = 0; s < p->n_shapes; s++) {
            json_t *sz = json_object_get(json_array_get(bench, (size_t)s), "sizes");
            for (int k = 0; k < p->n_sizes; k++)
                p->cls[c].s[s].sizes[k] = json_integer_value(json_object_get(sz, p->size_names[k]));
        }
    snprintf(p->between, sizeof(p->between), "baseline");
    json_t *disp = json_object_get(spec, "dispatch");
    if (disp) {
        const char *b = json_string_value(json_object_get(disp, "between"));
        if (!json_is_object(disp) || !b || (strcmp(b, "baseline") && strcmp(b, "nearest"))) {
            fail(err, errlen, "task %s: \"dispatch\" must be {\"between\": \"baseline\"|\"nearest\"}", p->task_name);
            goto out;
        }
        snprintf(p->between, sizeof(p->between), "%s", b);
    }
    const char *bname = json_string_value(json_object_get(json_object_get(spec, "files"), "baseline"));
    const char *btext = bname ? json_string_value(json_object_get(files, bname)) : NULL;
    if (!btext) {
        fail(err, errlen, "task %s: its baseline file is not stored", p->task_name);
        goto out;
    }
    p->baseline_src = strdup(btext);
    rc = p->baseline_src ? 0 : fail(err, errlen, "out of memory");
out:
    json_decref(spec);
    json_decref(files);
    return rc;
}

/* Choose the winners of class c: the confirmed ok results of the plan's
 * campaigns on that target, per benchmark shape (ship.h). */
static int plan_class(kf_db *db, kf_ship_plan *p, kf_ship_class *cl, const char *ids, char *err, size_t errlen)
{
    const char *pr[2] = { ids, cl->name };
    PGresult *r = kf_db_exec(db,
        "SELECT e.id, k.id, k.source, k.defines::text, c.name, coalesce(e.worker_id, ''),"
        " coalesce(e.confirmed_by_worker, ''), coalesce(w.devices->0->>'name', ''),"
        " e.confirmation, coalesce((e.metrics->'timing'->'shapes')::text, '[]')"
        /* the campaigns' candidates, then their evaluations by candidate, with
         * the job's target and purpose from the evaluation's own columns
         * (schema 009): no index of jobs reads a campaign's jobs (schema 015) */
        " FROM candidates k JOIN evaluations e ON e.candidate_id = k.id"
        " JOIN campaigns c ON c.id = k.campaign_id LEFT JOIN workers w ON w.id = e.worker_id"
        " WHERE k.campaign_id = ANY($1::bigint[]) AND e.job_target = $2 AND e.job_purpose = 'eval'"
        "   AND e.is_final AND e.verdict = 'ok' ORDER BY k.id",
        2, pr, err, errlen);
    if (!r) return -1;
    int n = PQntuples(r);
    json_t **shapes = calloc((size_t)n + 1, sizeof(*shapes));
    if (!shapes) {
        PQclear(r);
        return fail(err, errlen, "out of memory");
    }
    json_error_t je;
    for (int i = 0; i < n; i++) {
        shapes[i] = json_loads(PQgetvalue(r, i, 9), 0, &je);
        if (!strcmp(PQgetvalue(r, i, 8), "confirmed")) cl->n_confirmed++;
    }
    int rc = 0;
    int row_of_entry[KF_SHIP_MAX_ENTRIES];
    for (int s = 0; s < p->n_shapes && rc == 0; s++) {
        kf_ship_shape *sh = &cl->s[s];
        sh->entry = -1;
        sh->speedup = sh->lo = sh->hi = 1.0;
        sh->noise_candidate = sh->noise_eval = 0;
        sh->noise_speedup = sh->noise_lo = sh->noise_hi = 0;
        int best = -1;
        double bs = 0, blo = 0, bhi = 0;
        for (int i = 0; i < n; i++) {
            double v, lo, hi;
            if (strcmp(PQgetvalue(r, i, 8), "confirmed") != 0 || shape_speedup(shapes[i], p, sh->sizes, &v, &lo, &hi) != 0) continue;
            if (lo > 1.0 && v > bs) { /* beats the baseline beyond the noise; the fastest such */
                best = i;
                bs = v, blo = lo, bhi = hi;
            } else if (lo <= 1.0 && v > 1.0 && v > sh->noise_speedup) { /* faster, within the noise */
                sh->noise_candidate = kf_db_i64(r, i, 1, 0);
                sh->noise_eval = kf_db_i64(r, i, 0, 0);
                sh->noise_speedup = v, sh->noise_lo = lo, sh->noise_hi = hi;
            }
        }
        if (best >= 0) sh->noise_candidate = 0; /* only said where the baseline serves */
        for (int i = 0; i < n; i++) { /* results the operator could confirm to ship more */
            double v, lo, hi;
            const char *st = PQgetvalue(r, i, 8); /* disputed ones are out for good */
            if (!strcmp(st, "confirmed") || !strcmp(st, "disputed") || shape_speedup(shapes[i], p, sh->sizes, &v, &lo, &hi) != 0) continue;
            if (lo > 1.0 && v > (best >= 0 ? bs : 1.0)) sh->unconfirmed_better++;
        }
        if (best < 0) continue;
        int e = 0;
        while (e < cl->n_e && row_of_entry[e] != best) e++;
        if (e == cl->n_e) {
            if (cl->n_e == KF_SHIP_MAX_ENTRIES) {
                rc = fail(err, errlen, "class %s: more than %d distinct winners", cl->name, KF_SHIP_MAX_ENTRIES);
                break;
            }
            kf_ship_entry *en = &cl->e[cl->n_e];
            row_of_entry[cl->n_e++] = best;
            en->eval_id = kf_db_i64(r, best, 0, 0);
            en->candidate_id = kf_db_i64(r, best, 1, 0);
            en->source = strdup(PQgetvalue(r, best, 2));
            en->defines_json = strdup(PQgetvalue(r, best, 3));
            snprintf(en->campaign, sizeof(en->campaign), "%s", PQgetvalue(r, best, 4));
            snprintf(en->worker, sizeof(en->worker), "%s", PQgetvalue(r, best, 5));
            snprintf(en->confirmed_by, sizeof(en->confirmed_by), "%s", PQgetvalue(r, best, 6));
            snprintf(en->device, sizeof(en->device), "%s", PQgetvalue(r, best, 7));
            if (!en->source || !en->defines_json) rc = fail(err, errlen, "out of memory");
        }
        sh->entry = e;
        sh->speedup = bs, sh->lo = blo, sh->hi = bhi;
    }
    for (int i = 0; i < n; i++) json_decref(shapes[i]);
    free(shapes);
    PQclear(r);
    return rc;
}

kf_ship_plan *kf_ship_plan_make(kf_db *db, const char *const *campaigns, int n, char *err, size_t errlen)
{
    if (n < 1 || n > KF_SHIP_MAX_CAMPAIGNS) {
        fail(err, errlen, "ship 1..%d campaigns", KF_SHIP_MAX_CAMPAIGNS);
        return NULL;
    }
    kf_ship_plan *p = calloc(1, sizeof(*p));
    if (!p) {
        fail(err, errlen, "out of memory");
        return NULL;
    }
    kf_strbuf ids = { 0 };
    kf_strbuf_add(&ids, "{");
    for (int i = 0; i < n; i++) {
        const char *pr[1] = { campaigns[i] };
        PGresult *r = kf_db_exec(db, "SELECT id, task_id, array_to_json(targets)::text FROM campaigns WHERE name = $1",
                                 1, pr, err, errlen);
        if (!r) goto bad;
        if (PQntuples(r) != 1) {
            PQclear(r);
            fail(err, errlen, "no campaign '%s'", campaigns[i]);
            goto bad;
        }
        int64_t task = kf_db_i64(r, 0, 1, 0);
        if (i > 0 && task != p->task_id) {
            PQclear(r);
            fail(err, errlen, "campaigns %s and %s are on different tasks: ship campaigns of one task together",
                 campaigns[0], campaigns[i]);
            goto bad;
        }
        p->task_id = task;
        snprintf(p->campaigns[p->n_campaigns++], sizeof(p->campaigns[0]), "%s", campaigns[i]);
        kf_strbuf_printf(&ids, "%s%s", i ? "," : "", PQgetvalue(r, 0, 0));
        json_error_t je;
        json_t *tg = json_loads(PQgetvalue(r, 0, 2), 0, &je);
        PQclear(r);
        size_t k;
        json_t *v;
        json_array_foreach(tg, k, v) {
            const char *name = json_string_value(v);
            int seen = 0;
            for (int c = 0; c < p->n_cls; c++) seen |= !strcmp(p->cls[c].name, name);
            if (seen) continue;
            if (p->n_cls == KF_SHIP_MAX_CLASSES) {
                json_decref(tg);
                fail(err, errlen, "more than %d target classes", KF_SHIP_MAX_CLASSES);
                goto bad;
            }
            snprintf(p->cls[p->n_cls++].name, sizeof(p->cls[0].name), "%s", name);
        }
        json_decref(tg);
    }
    kf_strbuf_add(&ids, "}");
    if (ids.oom) {
        fail(err, errlen, "out of memory");
        goto bad;
    }
    if (load_task(db, p, err, errlen) < 0) goto bad;
    for (int c = 0; c < p->n_cls; c++)
        if (plan_class(db, p, &p->cls[c], ids.s, err, errlen) < 0) goto bad;
    free(ids.s);
    return p;
bad:
    free(ids.s);
    kf_ship_plan_free(p);
    return NULL;
}

/* ---- code generation ---- */

/* Run a shell command line built from safe paths only; 0 when it exits 0. */
static int run_cmd(const char *cmd)
{
    int st = system(cmd);
    return (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0) ? 0 : -1;
}

/* A path we put into a command line between single quotes. */
static int quotable(const char *s)
{
    return s && !strchr(s, '\'');
}

/* First line of a file (for error messages), in buf. */
static const char *first_error(const char *path, char *buf, size_t cap)
{
    size_t n = 0;
    char *t = kf_util_read_file(path, &n, 1 << 20);
    buf[0] = 0;
    if (!t) return buf;
    char *e = strstr(t, "error");
    char *line = e ? e : t;
    while (e && line > t && line[-1] != '\n') line--;
    snprintf(buf, cap, "%.*s", (int)strcspn(line, "\n"), line);
    free(t);
    return buf;
}

/* The #define lines of a candidate's tunable values. */
static void add_defines(kf_strbuf *b, const char *defines_json)
{
    json_error_t je;
    json_t *d = json_loads(defines_json ? defines_json : "{}", 0, &je);
    const char *k;
    json_t *v;
    json_object_foreach(d, k, v) kf_strbuf_printf(b, "#define %s %s\n", k, json_is_string(v) ? json_string_value(v) : "");
    json_decref(d);
}

static void undef_defines(kf_strbuf *b, const char *defines_json)
{
    json_error_t je;
    json_t *d = json_loads(defines_json ? defines_json : "{}", 0, &je);
    const char *k;
    json_t *v;
    json_object_foreach(d, k, v) kf_strbuf_printf(b, "#undef %s\n", k);
    (void)v;
    json_decref(d);
}

/* #undef every macro the source #defines itself (not those of its headers). */
static void undef_own_macros(kf_strbuf *b, const char *src)
{
    for (const char *l = src; l && *l;) {
        const char *p = l + strspn(l, " \t");
        if (*p == '#') {
            p += 1 + strspn(p + 1, " \t");
            if (!strncmp(p, "define", 6) && (p[6] == ' ' || p[6] == '\t')) {
                p += 6 + strspn(p + 6, " \t");
                size_t n = 0;
                while (isalnum((unsigned char)p[n]) || p[n] == '_') n++;
                if (n) kf_strbuf_printf(b, "#undef %.*s\n", (int)n, p);
            }
        }
        l = strchr(l, '\n');
        if (l) l++;
    }
}

/* The #include lines of a source (CUDA: hoisted above the namespaces). */
static void add_includes(kf_strbuf *b, const char *src)
{
    for (const char *l = src; l && *l;) {
        const char *p = l + strspn(l, " \t");
        size_t n = strcspn(l, "\n");
        if (*p == '#') {
            const char *q = p + 1 + strspn(p + 1, " \t");
            if (!strncmp(q, "include", 7)) {
                char line[512];
                snprintf(line, sizeof(line), "%.*s\n", (int)n, l);
                if (!b->s || !strstr(b->s, line)) kf_strbuf_add(b, line);
            }
        }
        l = strchr(l, '\n');
        if (l) l++;
    }
}

/* C: the symbols a source defines (functions, file-scope variables; static
 * or not), found by compiling it alone. Appends "#define sym sym__<tag>"
 * lines to ren and "#undef sym" lines to unren. */
static int c_symbols(const char *src, const char *defines_json, const char *tag, const char *cc, const char *abi_dir,
                     const char *tmp, kf_strbuf *ren, kf_strbuf *unren, char *err, size_t errlen)
{
    kf_strbuf t = { 0 };
    add_defines(&t, defines_json);
    kf_strbuf_add(&t, src);
    char path[4096], obj[4096], log[4096], cmd[16384];
    snprintf(path, sizeof(path), "%s/%s.c", tmp, tag);
    snprintf(obj, sizeof(obj), "%s/%s.o", tmp, tag);
    snprintf(log, sizeof(log), "%s/%s.log", tmp, tag);
    if (t.oom || kf_util_write_file(path, t.s, t.len) < 0) {
        free(t.s);
        return fail(err, errlen, "cannot write %s", path);
    }
    free(t.s);
    snprintf(cmd, sizeof(cmd), "'%s' -c -O0 -w -fopenmp -march=native -I'%s' '%s' -o '%s' >'%s' 2>&1", cc, abi_dir, path,
             obj, log);
    if (run_cmd(cmd) < 0) {
        char line[512];
        return fail(err, errlen, "%s does not compile on its own with %s: %s", tag, cc, first_error(log, line, sizeof(line)));
    }
    snprintf(cmd, sizeof(cmd), "nm --defined-only '%s'", obj);
    FILE *f = popen(cmd, "r");
    if (!f) return fail(err, errlen, "nm: %s", strerror(errno));
    char line[1024];
    while (fgets(line, sizeof(line), f)) {
        char type = 0, name[512];
        if (sscanf(line, "%*s %c %511s", &type, name) != 2) continue;
        if (!strchr("TtDdBbRrCVWv", type) || strchr(name, '.') || !strcmp(name, "kf_entry")) continue;
        kf_strbuf_printf(ren, "#define %s %s__%s\n", name, name, tag);
        kf_strbuf_printf(unren, "#undef %s\n", name);
    }
    if (pclose(f) != 0) return fail(err, errlen, "nm failed on %s (binutils installed?)", obj);
    return 0;
}

/* One source inside a class file under the names of unit `tag`; its
 * kf_entry becomes `fn`. */
static int add_unit(kf_strbuf *b, const kf_ship_plan *p, const char *src, const char *defines_json, const char *tag,
                    const char *fn, const char *origin, const char *cc, const char *abi_dir, const char *tmp, char *err,
                    size_t errlen)
{
    kf_strbuf ren = { 0 }, unren = { 0 };
    if (!p->cuda && c_symbols(src, defines_json, tag, cc, abi_dir, tmp, &ren, &unren, err, errlen) < 0) {
        free(ren.s);
        free(unren.s);
        return -1;
    }
    kf_strbuf_printf(b, "\n/* ---- %s ---- */\n#define kf_entry %s\n", origin, fn);
    kf_strbuf_add(b, ren.s);
    add_defines(b, defines_json);
    if (p->cuda) kf_strbuf_printf(b, "namespace kf_ship_ns_%s {\nextern \"C\" int %s(const kf_call *call);\n", tag, fn);
    kf_strbuf_printf(b, "#line 1 \"%s\"\n", origin);
    /* its values are fixed above: "// kfarm:tune" lines would make the farm
     * sweep the shipped file again (kf_tune.h) */
    for (const char *q = src, *hit; *q; q = hit + 10) {
        hit = strstr(q, "kfarm:tune");
        if (!hit) {
            kf_strbuf_add(b, q);
            break;
        }
        kf_strbuf_addn(b, q, (size_t)(hit - q));
        kf_strbuf_add(b, "kfarm=tune");
    }
    if (b->len && b->s[b->len - 1] != '\n') kf_strbuf_add(b, "\n");
    if (p->cuda) kf_strbuf_printf(b, "} /* namespace kf_ship_ns_%s */\n", tag);
    kf_strbuf_add(b, "#undef kf_entry\n");
    kf_strbuf_add(b, unren.s);
    undef_defines(b, defines_json);
    undef_own_macros(b, src);
    if (p->cuda) kf_strbuf_printf(b, "extern \"C\" int %s(const kf_call *call);\n", fn);
    free(ren.s);
    free(unren.s);
    return 0;
}

static const char *ext_of(const kf_ship_plan *p)
{
    return p->cuda ? "cu" : "c";
}

/* The class file: every winner and the baseline, and the shape dispatch. */
static char *class_file(const kf_ship_plan *p, const kf_ship_class *cl, const char *cc, const char *abi_dir,
                        const char *tmp, char *err, size_t errlen)
{
    char slug[128];
    kf_ship_slug(cl->name, slug, sizeof(slug));
    kf_strbuf b = { 0 };
    kf_strbuf_printf(&b,
        "/*\n * kfarm ship: task %s, class %s. Generated; do not edit.\n"
        " * A valid candidate on its own (kf_entry dispatches on call->sizes); built with\n"
        " * -DKF_SHIP_ENTRY=NAME it is one class of the library in dispatch.%s.\n"
        " * Measured shapes not listed, and every shape when nothing won: the baseline%s.\n */\n",
        p->task_name, cl->name, ext_of(p),
        strcmp(p->between, "nearest") ? "" : " (here: the nearest measured shape's winner)");
    if (p->cuda) {
        kf_strbuf hoist = { 0 };
        add_includes(&hoist, p->baseline_src);
        for (int i = 0; i < cl->n_e; i++) add_includes(&hoist, cl->e[i].source);
        kf_strbuf_add(&b, "#include \"kf_abi.h\"\n");
        kf_strbuf_add(&b, hoist.s);
        free(hoist.s);
    } else {
        kf_strbuf_add(&b, "#include \"kf_abi.h\"\n");
    }
    kf_strbuf_add(&b, "#include <stdint.h>\n");
    char tag[160], fn[200], origin[300];
    for (int i = 0; i < cl->n_e; i++) {
        snprintf(tag, sizeof(tag), "%s_e%d", slug, i);
        snprintf(fn, sizeof(fn), "kf_ship_%s_e%d", slug, i);
        snprintf(origin, sizeof(origin), "candidate %lld of campaign %s, confirmed by %s", (long long)cl->e[i].candidate_id,
                 cl->e[i].campaign, cl->e[i].confirmed_by[0] ? cl->e[i].confirmed_by : "?");
        if (add_unit(&b, p, cl->e[i].source, cl->e[i].defines_json, tag, fn, origin, cc, abi_dir, tmp, err, errlen) < 0)
            goto bad;
    }
    snprintf(tag, sizeof(tag), "%s_base", slug);
    snprintf(fn, sizeof(fn), "kf_ship_%s_base", slug);
    if (add_unit(&b, p, p->baseline_src, "{}", tag, fn, "the task's baseline", cc, abi_dir, tmp, err, errlen) < 0) goto bad;

    /* the dispatch table: one row per benchmark shape that a winner serves */
    int rows = 0;
    for (int s = 0; s < p->n_shapes; s++) rows += cl->s[s].entry >= 0;
    kf_strbuf_printf(&b, "\n/* ---- dispatch on call->sizes (%d sizes:", p->n_sizes);
    for (int k = 0; k < p->n_sizes; k++) kf_strbuf_printf(&b, " %s", p->size_names[k]);
    kf_strbuf_add(&b, ") ---- */\n#ifndef KF_SHIP_ENTRY\n#define KF_SHIP_ENTRY kf_entry\n#endif\n");
    kf_strbuf_add(&b, "typedef int (*kf_ship_fn_t)(const kf_call *);\n");
    kf_strbuf_printf(&b, "static const kf_ship_fn_t kf_ship_fns[] = {");
    for (int i = 0; i < cl->n_e; i++) kf_strbuf_printf(&b, " kf_ship_%s_e%d,", slug, i);
    kf_strbuf_printf(&b, " kf_ship_%s_base };\n", slug);
    kf_strbuf_printf(&b, "#define KF_SHIP_ROWS %d\n#define KF_SHIP_NSIZES %d\n#define KF_SHIP_NEAREST %d\n", rows,
                     p->n_sizes, !strcmp(p->between, "nearest"));
    kf_strbuf_printf(&b, "static const int64_t kf_ship_rows[KF_SHIP_ROWS + 1][KF_SHIP_NSIZES] = {\n");
    for (int s = 0; s < p->n_shapes; s++) {
        const kf_ship_shape *sh = &cl->s[s];
        if (sh->entry < 0) continue;
        kf_strbuf_add(&b, "    {");
        for (int k = 0; k < p->n_sizes; k++) kf_strbuf_printf(&b, "%s%lld", k ? ", " : "", (long long)sh->sizes[k]);
        kf_strbuf_printf(&b, "}, /* %.3fx [%.3f, %.3f] */\n", sh->speedup, sh->lo, sh->hi);
    }
    kf_strbuf_add(&b, "    {0} };\nstatic const int kf_ship_row_fn[KF_SHIP_ROWS + 1] = {");
    for (int s = 0; s < p->n_shapes; s++)
        if (cl->s[s].entry >= 0) kf_strbuf_printf(&b, " %d,", cl->s[s].entry);
    kf_strbuf_add(&b, " 0 };\n");
    kf_strbuf_add(&b,
        "static int kf_ship_ilog2(int64_t v) { int r = 0; while (v > 1) { v >>= 1; r++; } return r; }\n"
        "#ifdef __cplusplus\nextern \"C\"\n#endif\n"
        "KF_EXPORT int KF_SHIP_ENTRY(const kf_call *call)\n{\n"
        "    int near = -1, near_d = 0;\n"
        "    if (call->n_sizes == KF_SHIP_NSIZES) {\n"
        "        for (int i = 0; i < KF_SHIP_ROWS; i++) {\n"
        "            int eq = 1, d = 0;\n"
        "            for (int k = 0; k < KF_SHIP_NSIZES; k++) {\n"
        "                int a = kf_ship_ilog2(call->sizes[k]), c = kf_ship_ilog2(kf_ship_rows[i][k]);\n"
        "                eq &= call->sizes[k] == kf_ship_rows[i][k];\n"
        "                d += a > c ? a - c : c - a;\n"
        "            }\n"
        "            if (eq) return kf_ship_fns[kf_ship_row_fn[i]](call);\n"
        "            if (KF_SHIP_NEAREST && (near < 0 || d < near_d)) near = i, near_d = d;\n"
        "        }\n"
        "    }\n"
        "    if (near >= 0) return kf_ship_fns[kf_ship_row_fn[near]](call);\n");
    kf_strbuf_printf(&b, "    return kf_ship_%s_base(call);\n}\n", slug);
    kf_strbuf_printf(&b,
        "#ifdef KF_SHIP_BASE_EXPORT /* the library's fallback when no class fits the machine */\n"
        "#ifdef __cplusplus\nextern \"C\"\n#endif\n"
        "KF_EXPORT int KF_SHIP_BASE_EXPORT(const kf_call *call) { return kf_ship_%s_base(call); }\n#endif\n", slug);
    if (b.oom) {
        fail(err, errlen, "out of memory");
        goto bad;
    }
    return b.s;
bad:
    free(b.s);
    return NULL;
}

/* The arch flag nvcc needs for a class ("sm_90a" -> "compute_90a"), or NULL. */
static int sm_digits(const char *cls, char *out, size_t cap)
{
    if (strncmp(cls, "sm_", 3) != 0) return -1;
    size_t n = strspn(cls + 3, "0123456789");
    if (n < 2 || (cls[3 + n] && strcmp(cls + 3 + n, "a"))) return -1;
    snprintf(out, cap, "%s", cls + 3);
    return 0;
}

static char *dispatch_file(const kf_ship_plan *p)
{
    kf_strbuf b = { 0 };
    kf_strbuf_printf(&b,
        "/*\n * kfarm ship: task %s, the library's kf_entry. Generated; do not edit.\n"
        " * Picks the class for the machine it runs on, once per %s, and calls\n"
        " * that class's shape dispatch (classes/); with no class for the machine,\n"
        " * the baseline (of the first class's file).\n */\n#include \"kf_abi.h\"\n#include <stdio.h>\n#include <string.h>\n",
        p->task_name, p->cuda ? "device" : "process");
    if (p->cuda) kf_strbuf_add(&b, "#include <cuda_runtime.h>\n");
    else kf_strbuf_add(&b, "#include <pthread.h>\n");
    const char *ext_c = p->cuda ? "extern \"C\" " : "";
    for (int c = 0; c < p->n_cls; c++)
        kf_strbuf_printf(&b, "%sint kf_ship_class_%d(const kf_call *call);\n%sint kf_ship_base_%d(const kf_call *call);\n",
                         ext_c, c, ext_c, c);
    kf_strbuf_add(&b, "typedef int (*kf_ship_fn_t)(const kf_call *);\nstatic const kf_ship_fn_t kf_ship_class_fn[] = {");
    for (int c = 0; c < p->n_cls; c++) kf_strbuf_printf(&b, " kf_ship_class_%d,", c);
    kf_strbuf_add(&b, " 0 };\nstatic const char *const kf_ship_class_name[] = {");
    for (int c = 0; c < p->n_cls; c++) {
        kf_strbuf_add(&b, " \"");
        for (const char *q = p->cls[c].name; *q; q++)
            if (*q == '"' || *q == '\\') kf_strbuf_printf(&b, "\\%c", *q);
            else if ((unsigned char)*q >= 0x20) kf_strbuf_addn(&b, q, 1);
        kf_strbuf_add(&b, "\",");
    }
    kf_strbuf_printf(&b, " 0 };\n#define KF_SHIP_NCLASS %d\n", p->n_cls);
    if (p->cuda) {
        kf_strbuf_add(&b,
            "/* a class named after a GPU model first (its name in the device's name),\n"
            " * then sm_XY for the device's compute capability, then sm_XYa */\n"
            "static int kf_ship_pick(int dev)\n{\n"
            "    int major = 0, minor = 0;\n"
            "    cudaDeviceProp prop;\n"
            "    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||\n"
            "        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess ||\n"
            "        cudaGetDeviceProperties(&prop, dev) != cudaSuccess) return -1;\n"
            "    char sm[16], sma[16];\n"
            "    snprintf(sm, sizeof(sm), \"sm_%d%d\", major, minor);\n"
            "    snprintf(sma, sizeof(sma), \"sm_%d%da\", major, minor);\n"
            "    for (int i = 0; i < KF_SHIP_NCLASS; i++)\n"
            "        if (strncmp(kf_ship_class_name[i], \"sm_\", 3) && strstr(prop.name, kf_ship_class_name[i])) return i;\n"
            "    for (int i = 0; i < KF_SHIP_NCLASS; i++) if (!strcmp(kf_ship_class_name[i], sm)) return i;\n"
            "    for (int i = 0; i < KF_SHIP_NCLASS; i++) if (!strcmp(kf_ship_class_name[i], sma)) return i;\n"
            "    return -1;\n}\n"
            "extern \"C\" KF_EXPORT int kf_entry(const kf_call *call)\n{\n"
            "    static int picked[64]; /* class + 2 per device; 0: not yet (benign race: same answer) */\n"
            "    int dev = 0;\n"
            "    if (cudaGetDevice(&dev) != cudaSuccess) return -1;\n"
            "    int c = dev >= 0 && dev < 64 && picked[dev] ? picked[dev] - 2 : kf_ship_pick(dev);\n"
            "    if (dev >= 0 && dev < 64) picked[dev] = c + 2;\n"
            "    return c >= 0 ? kf_ship_class_fn[c](call) : kf_ship_base_0(call);\n}\n");
    } else {
        kf_strbuf_add(&b,
            "/* a named CPU class first (its name in /proc/cpuinfo's model name), then \"cpu\" */\n"
            "static int kf_ship_class = -1;\n"
            "static pthread_once_t kf_ship_once = PTHREAD_ONCE_INIT;\n"
            "static void kf_ship_pick(void)\n{\n"
            "    char model[256] = \"\", line[512];\n"
            "    FILE *f = fopen(\"/proc/cpuinfo\", \"r\");\n"
            "    while (f && fgets(line, sizeof(line), f)) {\n"
            "        char *c = strchr(line, ':');\n"
            "        if (!strncmp(line, \"model name\", 10) && c) {\n"
            "            snprintf(model, sizeof(model), \"%s\", c + 1 + strspn(c + 1, \" \\t\"));\n"
            "            break;\n"
            "        }\n"
            "    }\n"
            "    if (f) fclose(f);\n"
            "    for (int i = 0; i < KF_SHIP_NCLASS; i++)\n"
            "        if (strcmp(kf_ship_class_name[i], \"cpu\") && model[0] && strstr(model, kf_ship_class_name[i])) {\n"
            "            kf_ship_class = i;\n"
            "            return;\n"
            "        }\n"
            "    for (int i = 0; i < KF_SHIP_NCLASS; i++)\n"
            "        if (!strcmp(kf_ship_class_name[i], \"cpu\")) kf_ship_class = i;\n"
            "}\n"
            "KF_EXPORT int kf_entry(const kf_call *call)\n{\n"
            "    pthread_once(&kf_ship_once, kf_ship_pick);\n"
            "    return kf_ship_class >= 0 ? kf_ship_class_fn[kf_ship_class](call) : kf_ship_base_0(call);\n}\n");
    }
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

static char *cmake_file(const kf_ship_plan *p, const char *lib)
{
    kf_strbuf b = { 0 };
    kf_strbuf_printf(&b,
        "# kfarm ship: task %s. Generated; builds lib%s.so, one shared library with\n"
        "# every class's code (one object per class, built for that class).\n"
        "cmake_minimum_required(VERSION 3.18)\nproject(%s LANGUAGES %s)\n",
        p->task_name, lib, lib, p->cuda ? "C CXX CUDA" : "C");
    if (p->cuda) {
        kf_strbuf_printf(&b,
            "find_package(CUDAToolkit REQUIRED)\nadd_library(%s SHARED dispatch.cu)\n"
            "set_target_properties(%s PROPERTIES CUDA_ARCHITECTURES OFF)\n"
            "target_link_libraries(%s PRIVATE CUDA::cudart)\n", lib, lib, lib);
    } else {
        kf_strbuf_printf(&b,
            "find_package(OpenMP REQUIRED)\nfind_package(Threads REQUIRED)\nadd_library(%s SHARED dispatch.c)\n"
            "target_link_libraries(%s PRIVATE OpenMP::OpenMP_C Threads::Threads m)\n", lib, lib);
    }
    kf_strbuf_printf(&b, "target_include_directories(%s PRIVATE include)\n", lib);
    for (int c = 0; c < p->n_cls; c++) {
        char slug[128], d[32];
        kf_ship_slug(p->cls[c].name, slug, sizeof(slug));
        kf_strbuf_printf(&b, "\n# class %s\nadd_library(%s_c%d OBJECT classes/%s.%s)\n", p->cls[c].name, lib, c, slug,
                         ext_of(p));
        kf_strbuf_printf(&b,
            "set_target_properties(%s_c%d PROPERTIES POSITION_INDEPENDENT_CODE ON%s)\n"
            "target_include_directories(%s_c%d PRIVATE include)\n"
            "target_compile_definitions(%s_c%d PRIVATE KF_SHIP_ENTRY=kf_ship_class_%d KF_SHIP_BASE_EXPORT=kf_ship_base_%d)\n",
            lib, c, p->cuda ? " CUDA_ARCHITECTURES OFF" : "", lib, c, lib, c, c, c);
        if (p->cuda) {
            if (sm_digits(p->cls[c].name, d, sizeof(d)) == 0)
                /* cubin for the class, and PTX (but not of an arch-specific sm_XYa) for newer GPUs */
                kf_strbuf_printf(&b, "target_compile_options(%s_c%d PRIVATE -O3 \"-gencode=arch=compute_%s,code=[sm_%s%s%s]\")\n",
                                 lib, c, d, d, strchr(d, 'a') ? "" : ",compute_", strchr(d, 'a') ? "" : d);
            else
                kf_strbuf_printf(&b, "target_compile_options(%s_c%d PRIVATE -O3)  # a GPU-model class: nvcc's default arch\n",
                                 lib, c);
        } else {
            /* the farm's own flags for candidates (worker/compile.c): -march=native is the build machine */
            kf_strbuf_printf(&b, "target_compile_options(%s_c%d PRIVATE -O3 -march=native)\n"
                                 "target_link_libraries(%s_c%d PRIVATE OpenMP::OpenMP_C)\n", lib, c, lib, c);
        }
        kf_strbuf_printf(&b, "target_sources(%s PRIVATE $<TARGET_OBJECTS:%s_c%d>)\n", lib, lib, c);
    }
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

static json_t *manifest(const kf_ship_plan *p, const char *commit)
{
    json_t *m = json_object();
    json_object_set_new(m, "task", json_string(p->task_name));
    json_object_set_new(m, "backend", json_string(p->cuda ? "cuda" : "cpu"));
    json_object_set_new(m, "kfarm_commit", json_string(commit ? commit : "unknown"));
    json_t *cs = json_array();
    for (int i = 0; i < p->n_campaigns; i++) json_array_append_new(cs, json_string(p->campaigns[i]));
    json_object_set_new(m, "campaigns", cs);
    json_object_set_new(m, "between_measured_shapes", json_string(p->between));
    json_object_set_new(m, "interval", json_string("95%: speedup * exp(+-1.96 sqrt(cv_baseline^2 + cv_candidate^2)), "
                                                   "the farm's noise model (coordinator/noise.h)"));
    json_t *classes = json_array();
    for (int c = 0; c < p->n_cls; c++) {
        const kf_ship_class *cl = &p->cls[c];
        json_t *o = json_object();
        char slug[128], file[200];
        kf_ship_slug(cl->name, slug, sizeof(slug));
        snprintf(file, sizeof(file), "classes/%s.%s", slug, ext_of(p));
        json_object_set_new(o, "class", json_string(cl->name));
        json_object_set_new(o, "file", json_string(file));
        json_object_set_new(o, "confirmed_results_considered", json_integer(cl->n_confirmed));
        json_t *shapes = json_array();
        for (int s = 0; s < p->n_shapes; s++) {
            const kf_ship_shape *sh = &cl->s[s];
            json_t *so = json_object(), *sz = json_object();
            for (int k = 0; k < p->n_sizes; k++) json_object_set_new(sz, p->size_names[k], json_integer(sh->sizes[k]));
            json_object_set_new(so, "sizes", sz);
            if (sh->entry < 0) {
                json_object_set_new(so, "entry", json_string("baseline"));
            } else {
                const kf_ship_entry *e = &cl->e[sh->entry];
                json_object_set_new(so, "entry", json_integer(sh->entry));
                json_object_set_new(so, "candidate_id", json_integer(e->candidate_id));
                json_object_set_new(so, "evaluation_id", json_integer(e->eval_id));
                json_object_set_new(so, "campaign", json_string(e->campaign));
                json_object_set_new(so, "worker", json_string(e->worker));
                json_object_set_new(so, "confirmed_by", json_string(e->confirmed_by));
                json_object_set_new(so, "device", json_string(e->device));
                json_object_set_new(so, "speedup", json_real(sh->speedup));
                json_object_set_new(so, "speedup_interval", json_pack("[f,f]", sh->lo, sh->hi));
                json_t *d = json_loads(e->defines_json, 0, NULL);
                json_object_set_new(so, "defines", d ? d : json_object());
            }
            if (sh->unconfirmed_better)
                json_object_set_new(so, "unconfirmed_better_results", json_integer(sh->unconfirmed_better));
            if (sh->entry < 0 && sh->noise_candidate) { /* a bound a worker's absurd CV made infinite: null */
                json_t *wn = json_object(), *iv = json_array();
                json_object_set_new(wn, "candidate_id", json_integer(sh->noise_candidate));
                json_object_set_new(wn, "evaluation_id", json_integer(sh->noise_eval));
                json_object_set_new(wn, "speedup", isfinite(sh->noise_speedup) ? json_real(sh->noise_speedup) : json_null());
                json_array_append_new(iv, isfinite(sh->noise_lo) ? json_real(sh->noise_lo) : json_null());
                json_array_append_new(iv, isfinite(sh->noise_hi) ? json_real(sh->noise_hi) : json_null());
                json_object_set_new(wn, "speedup_interval", iv);
                json_object_set_new(so, "within_noise", wn);
            }
            json_array_append_new(shapes, so);
        }
        json_object_set_new(o, "shapes", shapes);
        json_array_append_new(classes, o);
    }
    json_object_set_new(m, "classes", classes);
    return m;
}

static int write_text(const char *dir, const char *rel, const char *text, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    if (!text) return fail(err, errlen, "out of memory writing %s", rel);
    if (kf_util_write_file(path, text, strlen(text)) < 0) return fail(err, errlen, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

int kf_ship_write(const kf_ship_plan *p, const char *dir, const char *cc, const char *nvcc, const char *abi_dir,
                  const char *commit, char *err, size_t errlen)
{
    if (!cc) cc = "cc";
    if (!nvcc) {
#ifdef KFARM_NVCC
        nvcc = access(KFARM_NVCC, X_OK) == 0 ? KFARM_NVCC : "nvcc";
#else
        nvcc = "nvcc";
#endif
    }
    char abi[4096];
    snprintf(abi, sizeof(abi), "%s/kf_abi.h", abi_dir ? abi_dir : "");
    if (!abi_dir || access(abi, R_OK) != 0) return fail(err, errlen, "kf_abi.h not found in %s", abi_dir ? abi_dir : "(none)");
    if (!quotable(dir) || !quotable(cc) || !quotable(nvcc) || !quotable(abi_dir))
        return fail(err, errlen, "paths with a single quote are not supported");
    char sub[4096];
    const char *subs[] = { "", "/classes", "/sources", "/include" };
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
        snprintf(sub, sizeof(sub), "%s%s", dir, subs[i]);
        if (kf_util_mkdirs(sub) < 0) return fail(err, errlen, "cannot create %s: %s", sub, strerror(errno));
    }
    size_t n = 0;
    char *h = kf_util_read_file(abi, &n, 1 << 20);
    int rc = h ? write_text(dir, "include/kf_abi.h", h, err, errlen) : fail(err, errlen, "cannot read %s", abi);
    free(h);
    if (rc < 0) return -1;
    char tmp[] = "/tmp/kfarm-ship.XXXXXX";
    if (!mkdtemp(tmp)) return fail(err, errlen, "mkdtemp: %s", strerror(errno));
    char rel[512], slug[128], cmd[16384];
    for (int c = 0; c < p->n_cls && rc == 0; c++) {
        const kf_ship_class *cl = &p->cls[c];
        kf_ship_slug(cl->name, slug, sizeof(slug));
        for (int i = 0; i < cl->n_e && rc == 0; i++) { /* each shipped source as the farm judged it */
            kf_strbuf s = { 0 };
            kf_strbuf_printf(&s, "/* candidate %lld of campaign %s, class %s: its defines, then its source */\n",
                             (long long)cl->e[i].candidate_id, cl->e[i].campaign, cl->name);
            add_defines(&s, cl->e[i].defines_json);
            kf_strbuf_add(&s, cl->e[i].source);
            snprintf(rel, sizeof(rel), "sources/%s-candidate%lld.%s", slug, (long long)cl->e[i].candidate_id, ext_of(p));
            rc = s.oom ? fail(err, errlen, "out of memory") : write_text(dir, rel, s.s, err, errlen);
            free(s.s);
        }
        if (rc < 0) break;
        char *text = class_file(p, cl, cc, abi_dir, tmp, err, errlen);
        if (!text) {
            rc = -1;
            break;
        }
        snprintf(rel, sizeof(rel), "classes/%s.%s", slug, ext_of(p));
        rc = write_text(dir, rel, text, err, errlen);
        free(text);
        if (rc < 0) break;
        /* the class file must compile as the candidate the farm will judge */
        char d[32];
        if (p->cuda)
            snprintf(cmd, sizeof(cmd), "'%s' -c -O0 -w %s%s -I'%s/include' '%s/%s' -o '%s/class%d.o' >'%s/class%d.log' 2>&1",
                     nvcc, sm_digits(cl->name, d, sizeof(d)) == 0 ? "-arch=sm_" : "", sm_digits(cl->name, d, sizeof(d)) == 0 ? d : "",
                     dir, dir, rel, tmp, c, tmp, c);
        else
            snprintf(cmd, sizeof(cmd), "'%s' -c -O0 -w -fopenmp -march=native -I'%s/include' '%s/%s' -o '%s/class%d.o' >'%s/class%d.log' 2>&1",
                     cc, dir, dir, rel, tmp, c, tmp, c);
        if (run_cmd(cmd) < 0) {
            char log[4200], line[512];
            snprintf(log, sizeof(log), "%s/class%d.log", tmp, c);
            rc = fail(err, errlen, "%s does not compile (winners that cannot share one file?): %s", rel,
                      first_error(log, line, sizeof(line)));
        }
    }
    if (rc == 0) {
        kf_strbuf s = { 0 };
        kf_strbuf_add(&s, "/* the task's baseline: the fallback wherever nothing beat it */\n");
        kf_strbuf_add(&s, p->baseline_src);
        snprintf(rel, sizeof(rel), "sources/baseline.%s", ext_of(p));
        rc = write_text(dir, rel, s.s, err, errlen);
        free(s.s);
    }
    char lib[200];
    char tslug[128];
    kf_ship_slug(p->task_name, tslug, sizeof(tslug));
    snprintf(lib, sizeof(lib), "kfship_%s", tslug);
    if (rc == 0) {
        char *t = dispatch_file(p);
        snprintf(rel, sizeof(rel), "dispatch.%s", ext_of(p));
        rc = write_text(dir, rel, t, err, errlen);
        free(t);
    }
    if (rc == 0) {
        char *t = cmake_file(p, lib);
        rc = write_text(dir, "CMakeLists.txt", t, err, errlen);
        free(t);
    }
    if (rc == 0) {
        json_t *m = manifest(p, commit);
        char *t = json_dumps(m, JSON_INDENT(2) | JSON_ENSURE_ASCII);
        json_decref(m);
        rc = write_text(dir, "MANIFEST.json", t, err, errlen);
        free(t);
    }
    kf_util_rmtree(tmp);
    return rc;
}
