/*
 * kf_task.c -- task spec parsing and validation. See kf_task.h and
 * docs/task-format.md.
 *
 * Every error names the offending field, because task files are written by
 * hand and a vague "invalid task" wastes a kernel engineer's evening. The
 * checks that protect the verdicts live here too: at least two validation
 * shapes, trials >= 2, every dimension resolvable, a tolerance for every
 * floating dtype an output uses.
 */
#include "kf_task.h"
#include "kf_util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static const char *dtype_names[KF_NDTYPES] = {"f32", "f16", "bf16", "i32", "f64"};
static const size_t dtype_sizes[KF_NDTYPES] = {4, 2, 2, 4, 8};

int kf_dtype_parse(const char *name)
{
    for (int i = 0; i < KF_NDTYPES; i++)
        if (name && !strcmp(name, dtype_names[i])) return i;
    return -1;
}

const char *kf_dtype_name(int d) { return d >= 0 && d < KF_NDTYPES ? dtype_names[d] : "?"; }
size_t kf_dtype_size(int d) { return d >= 0 && d < KF_NDTYPES ? dtype_sizes[d] : 0; }

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* Copy a required/optional string field; -1 on wrong type or too long. */
static int get_str(json_t *o, const char *key, char *dst, size_t cap, int required,
                   const char *ctx, char *err, size_t errlen)
{
    json_t *v = json_object_get(o, key);
    if (!v) {
        if (required) return fail(err, errlen, "%s%s: missing", ctx, key);
        return 0;
    }
    if (!json_is_string(v)) return fail(err, errlen, "%s%s: must be a string", ctx, key);
    if (strlen(json_string_value(v)) >= cap)
        return fail(err, errlen, "%s%s: too long (max %zu chars)", ctx, key, cap - 1);
    snprintf(dst, cap, "%s", json_string_value(v));
    return 0;
}

static int size_index(const kf_task *t, const char *name)
{
    for (int i = 0; i < t->n_sizes; i++)
        if (!strcmp(t->size_names[i], name)) return i;
    return -1;
}

static int parse_tensor(kf_task *t, json_t *o, kf_tensor_spec *ts, const char *ctx, int is_input,
                        char *err, size_t errlen)
{
    char dt[16] = "";
    if (!json_is_object(o)) return fail(err, errlen, "%s: must be an object", ctx);
    char c2[96];
    snprintf(c2, sizeof(c2), "%s.", ctx);
    if (get_str(o, "name", ts->name, sizeof(ts->name), 1, c2, err, errlen)) return -1;
    if (get_str(o, "dtype", dt, sizeof(dt), 1, c2, err, errlen)) return -1;
    if ((ts->dtype = kf_dtype_parse(dt)) < 0)
        return fail(err, errlen, "%s.dtype: unknown dtype '%s' (f32, f16, bf16, i32, f64)", ctx, dt);
    json_t *shape = json_object_get(o, "shape");
    if (!json_is_array(shape) || json_array_size(shape) == 0 ||
        json_array_size(shape) > KF_MAX_DIMS)
        return fail(err, errlen, "%s.shape: must be a list of 1..%d dimensions", ctx, KF_MAX_DIMS);
    ts->ndim = (int)json_array_size(shape);
    for (int d = 0; d < ts->ndim; d++) {
        json_t *v = json_array_get(shape, d);
        if (json_is_integer(v) && json_integer_value(v) > 0) {
            snprintf(ts->dims[d], sizeof(ts->dims[d]), "%lld", (long long)json_integer_value(v));
        } else if (json_is_string(v) && size_index(t, json_string_value(v)) >= 0) {
            snprintf(ts->dims[d], sizeof(ts->dims[d]), "%s", json_string_value(v));
        } else {
            return fail(err, errlen, "%s.shape[%d]: must be a positive integer or a size symbol from \"sizes\"",
                        ctx, d);
        }
    }
    ts->dist = KF_DIST_NORMAL;
    ts->p0 = 0;
    ts->p1 = 1;
    json_t *init = json_object_get(o, "init");
    if (init && is_input) {
        if (!json_is_object(init)) return fail(err, errlen, "%s.init: must be an object", ctx);
        const char *dist = json_string_value(json_object_get(init, "dist"));
        if (!dist || !strcmp(dist, "normal")) {
            json_t *m = json_object_get(init, "mean"), *s = json_object_get(init, "std");
            if (m && !json_is_number(m)) return fail(err, errlen, "%s.init.mean: must be a number", ctx);
            if (s && !json_is_number(s)) return fail(err, errlen, "%s.init.std: must be a number", ctx);
            ts->p0 = m ? json_number_value(m) : 0;
            ts->p1 = s ? json_number_value(s) : 1;
            if (ts->p1 < 0) return fail(err, errlen, "%s.init.std: must be >= 0", ctx);
        } else if (!strcmp(dist, "uniform")) {
            json_t *lo = json_object_get(init, "lo"), *hi = json_object_get(init, "hi");
            if (!json_is_number(lo) || !json_is_number(hi))
                return fail(err, errlen, "%s.init: uniform needs numbers lo and hi", ctx);
            ts->dist = KF_DIST_UNIFORM;
            ts->p0 = json_number_value(lo);
            ts->p1 = json_number_value(hi);
            if (ts->p1 < ts->p0) return fail(err, errlen, "%s.init: hi < lo", ctx);
        } else {
            return fail(err, errlen, "%s.init.dist: unknown distribution '%s' (normal, uniform)", ctx, dist);
        }
        json_t *sp = json_object_get(init, "special");
        if (sp) {
            if (!json_is_array(sp) || json_array_size(sp) > KF_MAX_SPECIAL)
                return fail(err, errlen, "%s.init.special: must be a list of at most %d numbers", ctx,
                            KF_MAX_SPECIAL);
            for (size_t i = 0; i < json_array_size(sp); i++) {
                json_t *v = json_array_get(sp, i);
                if (json_is_number(v))
                    ts->special[i] = json_number_value(v);
                else if (json_is_string(v) && !strcmp(json_string_value(v), "-0"))
                    ts->special[i] = -0.0;
                else
                    return fail(err, errlen, "%s.init.special[%zu]: must be a number or \"-0\"", ctx, i);
            }
            ts->n_special = (int)json_array_size(sp);
            json_t *fr = json_object_get(init, "special_fraction");
            ts->special_fraction = json_is_number(fr) ? json_number_value(fr) : 0.01;
            if (ts->special_fraction < 0 || ts->special_fraction > 1)
                return fail(err, errlen, "%s.init.special_fraction: must be in [0, 1]", ctx);
        }
    }
    return 0;
}

static int parse_sizes_obj(kf_task *t, json_t *o, kf_shape *sh, const char *ctx, char *err, size_t errlen)
{
    if (!json_is_object(o)) return fail(err, errlen, "%s: must be an object of sizes", ctx);
    for (int i = 0; i < t->n_sizes; i++) {
        json_t *v = json_object_get(o, t->size_names[i]);
        if (!json_is_integer(v) || json_integer_value(v) <= 0)
            return fail(err, errlen, "%s.%s: missing or not a positive integer", ctx, t->size_names[i]);
        sh->sizes[i] = json_integer_value(v);
    }
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
    {
        if (size_index(t, key) < 0) return fail(err, errlen, "%s.%s: not a size symbol of this task", ctx, key);
    }
    sh->weight = 1;
    return 0;
}

int kf_task_parse(const char *text, kf_task *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof(*t));
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    if (!root) return fail(err, errlen, "task.json: line %d: %s", je.line, je.text);
    int rc = -1;
    char tmp[64];
    if (!json_is_object(root)) {
        fail(err, errlen, "task.json: top level must be an object");
        goto out;
    }
    if (get_str(root, "name", t->name, sizeof(t->name), 1, "", err, errlen)) goto out;
    if (get_str(root, "backend", t->backend, sizeof(t->backend), 1, "", err, errlen)) goto out;
    if (strcmp(t->backend, "cpu") && strcmp(t->backend, "cuda")) {
        fail(err, errlen, "backend: must be \"cpu\" or \"cuda\", not '%s'", t->backend);
        goto out;
    }
    json_t *def = json_object_get(root, "definition");
    if (!json_is_string(def) || strlen(json_string_value(def)) < 10) {
        fail(err, errlen, "definition: missing or too short (the exact math goes into every prompt)");
        goto out;
    }
    t->definition = strdup(json_string_value(def));

    json_t *sizes = json_object_get(root, "sizes");
    if (!json_is_array(sizes) || json_array_size(sizes) == 0 || json_array_size(sizes) > KF_MAX_SIZES) {
        fail(err, errlen, "sizes: must be a list of 1..%d size symbols", KF_MAX_SIZES);
        goto out;
    }
    t->n_sizes = (int)json_array_size(sizes);
    for (int i = 0; i < t->n_sizes; i++) {
        const char *s = json_string_value(json_array_get(sizes, i));
        if (!s || !*s || strlen(s) >= sizeof(t->size_names[0]) || !(isalpha((unsigned char)s[0]) || s[0] == '_')) {
            fail(err, errlen, "sizes[%d]: must be an identifier", i);
            goto out;
        }
        for (int j = 0; j < i; j++)
            if (!strcmp(t->size_names[j], s)) {
                fail(err, errlen, "sizes[%d]: '%s' repeated", i, s);
                goto out;
            }
        snprintf(t->size_names[i], sizeof(t->size_names[i]), "%s", s);
    }

    for (int io = 0; io < 2; io++) {
        const char *key = io ? "outputs" : "inputs";
        json_t *arr = json_object_get(root, key);
        if (!json_is_array(arr) || json_array_size(arr) > KF_MAX_TENSORS ||
            (io && json_array_size(arr) == 0)) {
            fail(err, errlen, "%s: must be a list of at most %d tensors%s", key, KF_MAX_TENSORS,
                 io ? " (at least one)" : "");
            goto out;
        }
        for (size_t i = 0; i < json_array_size(arr); i++) {
            char ctx[48];
            snprintf(ctx, sizeof(ctx), "%s[%zu]", key, i);
            kf_tensor_spec *ts = io ? &t->outputs[i] : &t->inputs[i];
            if (parse_tensor(t, json_array_get(arr, i), ts, ctx, !io, err, errlen)) goto out;
        }
        if (io) t->n_outputs = (int)json_array_size(arr);
        else t->n_inputs = (int)json_array_size(arr);
    }

    json_t *val = json_object_get(root, "validation");
    if (!json_is_array(val) || json_array_size(val) < 2 || json_array_size(val) > KF_MAX_SHAPES) {
        fail(err, errlen, "validation: must list 2..%d shape sets (include the largest size the kernel targets)",
             KF_MAX_SHAPES);
        goto out;
    }
    t->n_validation = (int)json_array_size(val);
    for (int i = 0; i < t->n_validation; i++) {
        char ctx[48];
        snprintf(ctx, sizeof(ctx), "validation[%d]", i);
        if (parse_sizes_obj(t, json_array_get(val, i), &t->validation[i], ctx, err, errlen)) goto out;
    }
    json_t *bench = json_object_get(root, "benchmark");
    if (!json_is_array(bench) || json_array_size(bench) < 1 || json_array_size(bench) > KF_MAX_SHAPES) {
        fail(err, errlen, "benchmark: must list 1..%d {\"sizes\":{...},\"weight\":w}", KF_MAX_SHAPES);
        goto out;
    }
    t->n_benchmark = (int)json_array_size(bench);
    for (int i = 0; i < t->n_benchmark; i++) {
        char ctx[48];
        snprintf(ctx, sizeof(ctx), "benchmark[%d].sizes", i);
        json_t *b = json_array_get(bench, i);
        if (parse_sizes_obj(t, json_object_get(b, "sizes"), &t->benchmark[i], ctx, err, errlen)) goto out;
        json_t *w = json_object_get(b, "weight");
        if (w && (!json_is_number(w) || json_number_value(w) <= 0)) {
            fail(err, errlen, "benchmark[%d].weight: must be a positive number", i);
            goto out;
        }
        t->benchmark[i].weight = w ? json_number_value(w) : 1.0;
    }
    /* Every tensor of every shape set must have a representable size: a
     * wrapped byte count would under-allocate and blame the candidate. */
    for (int i = 0; i < t->n_validation + t->n_benchmark; i++) {
        const int64_t *sz = i < t->n_validation ? t->validation[i].sizes : t->benchmark[i - t->n_validation].sizes;
        for (int k = 0; k < t->n_inputs + t->n_outputs; k++) {
            const kf_tensor_spec *ts = k < t->n_inputs ? &t->inputs[k] : &t->outputs[k - t->n_inputs];
            int64_t shp[KF_MAX_DIMS];
            if (kf_task_shape(t, ts, sz, shp) <= 0) {
                if (i < t->n_validation) fail(err, errlen, "validation[%d]: tensor '%s' is too large", i, ts->name);
                else fail(err, errlen, "benchmark[%d].sizes: tensor '%s' is too large", i - t->n_validation, ts->name);
                goto out;
            }
        }
    }

    json_t *tol = json_object_get(root, "tolerance");
    if (tol && !json_is_object(tol)) {
        fail(err, errlen, "tolerance: must be an object {dtype: {rtol, atol}}");
        goto out;
    }
    const char *tk;
    json_t *tv;
    json_object_foreach(tol, tk, tv)
    {
        int d = kf_dtype_parse(tk);
        json_t *r = json_object_get(tv, "rtol"), *a = json_object_get(tv, "atol");
        if (d < 0) {
            fail(err, errlen, "tolerance.%s: unknown dtype", tk);
            goto out;
        }
        if (!json_is_number(r) || !json_is_number(a) || json_number_value(r) < 0 || json_number_value(a) < 0) {
            fail(err, errlen, "tolerance.%s: needs non-negative numbers rtol and atol", tk);
            goto out;
        }
        t->tol[d].rtol = json_number_value(r);
        t->tol[d].atol = json_number_value(a);
        t->tol[d].set = 1;
    }
    for (int i = 0; i < t->n_outputs; i++) {
        int d = t->outputs[i].dtype;
        if (d != KF_I32 && !t->tol[d].set) {
            fail(err, errlen, "tolerance.%s: missing (output '%s' is %s)", kf_dtype_name(d),
                 t->outputs[i].name, kf_dtype_name(d));
            goto out;
        }
    }

    snprintf(t->flops, sizeof(t->flops), "0");
    snprintf(t->bytes, sizeof(t->bytes), "0");
    snprintf(t->workspace, sizeof(t->workspace), "0");
    if (get_str(root, "flops", t->flops, sizeof(t->flops), 0, "", err, errlen) ||
        get_str(root, "bytes", t->bytes, sizeof(t->bytes), 0, "", err, errlen) ||
        get_str(root, "workspace_bytes", t->workspace, sizeof(t->workspace), 0, "", err, errlen))
        goto out;
    const char *exprs[3] = {t->flops, t->bytes, t->workspace};
    const char *enames[3] = {"flops", "bytes", "workspace_bytes"};
    for (int i = 0; i < 3; i++) {
        double v;
        char e2[200];
        if (kf_task_eval_expr(t, exprs[i], t->validation[0].sizes, &v, e2, sizeof(e2))) {
            fail(err, errlen, "%s: %s", enames[i], e2);
            goto out;
        }
    }

    json_t *forbid = json_object_get(root, "forbid");
    if (forbid) {
        if (!json_is_array(forbid) || json_array_size(forbid) > KF_MAX_FORBID) {
            fail(err, errlen, "forbid: must be a list of at most %d symbol names", KF_MAX_FORBID);
            goto out;
        }
        for (size_t i = 0; i < json_array_size(forbid); i++) {
            const char *s = json_string_value(json_array_get(forbid, i));
            if (!s || !*s || strlen(s) >= sizeof(t->forbid[0])) {
                fail(err, errlen, "forbid[%zu]: must be a symbol name (optionally ending in '*')", i);
                goto out;
            }
            snprintf(t->forbid[i], sizeof(t->forbid[i]), "%s", s);
        }
        t->n_forbid = (int)json_array_size(forbid);
    }
    json_t *link = json_object_get(root, "link");
    if (link) {
        if (!json_is_array(link) || json_array_size(link) > 4) {
            fail(err, errlen, "link: must be a list of at most 4 library names");
            goto out;
        }
        for (size_t i = 0; i < json_array_size(link); i++) {
            const char *s = json_string_value(json_array_get(link, i));
            int okname = s && *s && strlen(s) < sizeof(t->link[0]);
            for (const char *c = s; okname && *c; c++)
                if (!(isalnum((unsigned char)*c) || *c == '_' || *c == '-' || *c == '+')) okname = 0;
            if (!okname) {
                fail(err, errlen, "link[%zu]: must be a plain library name like \"cublas\"", i);
                goto out;
            }
            snprintf(t->link[i], sizeof(t->link[i]), "%s", s);
        }
        t->n_link = (int)json_array_size(link);
    }
    t->require_kernel = json_is_true(json_object_get(root, "require_kernel"));
    t->allow_nonfinite = json_is_true(json_object_get(root, "allow_nonfinite"));
    json_t *tr = json_object_get(root, "trials");
    t->trials = tr ? (int)json_integer_value(tr) : 2;
    if (tr && !json_is_integer(tr)) t->trials = 0;
    if (t->trials < 2 || t->trials > 100) {
        fail(err, errlen, "trials: must be an integer in 2..100 (a second call with new inputs catches cached results)");
        goto out;
    }
    json_t *to = json_object_get(root, "timeout_s");
    t->timeout_s = to ? json_number_value(to) : 60;
    if (to && (!json_is_number(to) || t->timeout_s <= 0)) {
        fail(err, errlen, "timeout_s: must be a positive number of seconds");
        goto out;
    }
    json_t *files = json_object_get(root, "files");
    if (!json_is_object(files)) {
        fail(err, errlen, "files: must be an object {\"reference\":..., \"baseline\":..., \"seed\":...}");
        goto out;
    }
    if (get_str(files, "reference", t->reference, sizeof(t->reference), 1, "files.", err, errlen) ||
        get_str(files, "baseline", t->baseline, sizeof(t->baseline), 1, "files.", err, errlen) ||
        get_str(files, "seed", t->seed, sizeof(t->seed), 0, "files.", err, errlen))
        goto out;
    const char *fns[3] = {t->reference, t->baseline, t->seed};
    for (int i = 0; i < 3; i++)
        if (strchr(fns[i], '/') || !strcmp(fns[i], "..")) {
            fail(err, errlen, "files: '%s' must be a plain file name in the task directory", fns[i]);
            goto out;
        }
    (void)tmp;
    rc = 0;
out:
    json_decref(root);
    if (rc) {
        free(t->definition);
        t->definition = NULL;
    }
    return rc;
}

int kf_task_load(const char *dir, kf_task *t, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/task.json", dir);
    char *text = kf_util_read_file(path, NULL, 1 << 20);
    if (!text) return fail(err, errlen, "%s: %s", path, strerror(errno));
    char e2[512];
    int rc = kf_task_parse(text, t, e2, sizeof(e2));
    free(text);
    if (rc) return fail(err, errlen, "%s: %s", path, e2);
    const char *fns[3] = {t->reference, t->baseline, t->seed};
    for (int i = 0; i < 3; i++) {
        if (!fns[i][0]) continue;
        snprintf(path, sizeof(path), "%s/%s", dir, fns[i]);
        FILE *f = fopen(path, "r");
        if (!f) {
            kf_task_free(t);
            return fail(err, errlen, "%s: %s (named in task.json files)", path, strerror(errno));
        }
        fclose(f);
    }
    return 0;
}

void kf_task_free(kf_task *t)
{
    free(t->definition);
    t->definition = NULL;
}

/* ---- expressions: recursive descent over + - * / ( ) numbers symbols ---- */

typedef struct {
    const char *p;
    const kf_task *t;
    const int64_t *sizes;
    char *err;
    size_t errlen;
    int bad;
} expr_ctx;

static double expr_sum(expr_ctx *c);

static void skip_ws(expr_ctx *c)
{
    while (isspace((unsigned char)*c->p)) c->p++;
}

static double expr_atom(expr_ctx *c)
{
    skip_ws(c);
    if (c->bad) return 0;
    if (*c->p == '(') {
        c->p++;
        double v = expr_sum(c);
        skip_ws(c);
        if (*c->p != ')') {
            if (!c->bad) fail(c->err, c->errlen, "expected ')' at '%s'", c->p);
            c->bad = 1;
            return 0;
        }
        c->p++;
        return v;
    }
    if (*c->p == '-') {
        c->p++;
        return -expr_atom(c);
    }
    if (isdigit((unsigned char)*c->p) || *c->p == '.') {
        char *end;
        double v = strtod(c->p, &end);
        c->p = end;
        return v;
    }
    if (isalpha((unsigned char)*c->p) || *c->p == '_') {
        char name[32];
        size_t n = 0;
        while ((isalnum((unsigned char)*c->p) || *c->p == '_') && n < sizeof(name) - 1) name[n++] = *c->p++;
        name[n] = 0;
        int i = size_index(c->t, name);
        if (i < 0) {
            fail(c->err, c->errlen, "unknown size symbol '%s'", name);
            c->bad = 1;
            return 0;
        }
        return (double)c->sizes[i];
    }
    fail(c->err, c->errlen, "syntax error at '%s'", *c->p ? c->p : "end of expression");
    c->bad = 1;
    return 0;
}

static double expr_prod(expr_ctx *c)
{
    double v = expr_atom(c);
    for (;;) {
        skip_ws(c);
        if (*c->p == '*') {
            c->p++;
            v *= expr_atom(c);
        } else if (*c->p == '/') {
            c->p++;
            double d = expr_atom(c);
            if (d == 0 && !c->bad) {
                fail(c->err, c->errlen, "division by zero");
                c->bad = 1;
            }
            v = c->bad ? 0 : v / d;
        } else {
            return v;
        }
    }
}

static double expr_sum(expr_ctx *c)
{
    double v = expr_prod(c);
    for (;;) {
        skip_ws(c);
        if (*c->p == '+') {
            c->p++;
            v += expr_prod(c);
        } else if (*c->p == '-') {
            c->p++;
            v -= expr_prod(c);
        } else {
            return v;
        }
    }
}

int kf_task_eval_expr(const kf_task *t, const char *expr, const int64_t *sizes, double *out,
                      char *err, size_t errlen)
{
    expr_ctx c = {expr, t, sizes, err, errlen, 0};
    double v = expr_sum(&c);
    skip_ws(&c);
    if (!c.bad && *c.p) {
        fail(err, errlen, "unexpected '%s' in expression '%s'", c.p, expr);
        c.bad = 1;
    }
    if (c.bad) return -1;
    *out = v;
    return 0;
}

int64_t kf_task_shape(const kf_task *t, const kf_tensor_spec *ts, const int64_t *sizes,
                      int64_t shape[KF_MAX_DIMS])
{
    int64_t n = 1;
    for (int d = 0; d < ts->ndim; d++) {
        const char *s = ts->dims[d];
        int64_t v;
        if (isdigit((unsigned char)s[0])) {
            v = strtoll(s, NULL, 10);
        } else {
            int i = size_index(t, s);
            if (i < 0) return -1;
            v = sizes[i];
        }
        if (v <= 0) return -1;
        shape[d] = v;
        /* at most INT64_MAX / 8 elements, so bytes (x dtype size) never wrap */
        if (__builtin_mul_overflow(n, v, &n) || n > INT64_MAX / 8) return -1;
    }
    return n;
}
