/*
 * harness.c -- validation and timing inside the sandboxed child (cpu backend).
 * See harness.h for the report protocol.
 *
 * Validation, for every validation shape and every trial (task->trials >= 2):
 *   - fresh inputs from (seed, shape, trial, tensor): new values every trial,
 *     and new buffers (the previous trial's stay mapped until the next one
 *     is allocated, so addresses differ too)                       [C6]
 *   - the reference gets its own copy of the inputs, made from a pristine
 *     copy, and runs before the candidate: it never sees memory the
 *     candidate touched                                            [C5]
 *   - every buffer is mmap'ed with a PROT_NONE guard page right after its
 *     (64-byte rounded) end and before its start, so a write past the end
 *     faults at once and is blamed on the call that made it        [R1]
 *   - outputs and workspace are poisoned before the call; the outputs are
 *     snapshotted the moment kf_entry returns                      [C4]
 *   - 20 ms later the live outputs are compared with the snapshot: a change
 *     means work was left running after return -> rejected_cheat   [T2]
 *   - inputs are compared with the pristine copy: any change -> incorrect
 *     "candidate modified input X" (a kernel that writes its inputs is
 *     simply wrong under the ABI; the reference never saw the damage, so
 *     this is a correctness failure, not an integrity one)          [C5]
 *   - any output element still holding poison -> incorrect "not written" [C4]
 *   - compare.c decides the rest (scaled atol, non-finite, trivial) [C1,C2]
 *   - the task lists the largest shape among its validation shapes [C7]
 *
 * Timing, only after validation passed, per benchmark shape: K = 3 input sets
 * rotate; before every call the inputs are re-copied from the pristine set and
 * a few elements (always the first and last) get fresh values, so no two
 * calls see the same inputs; outputs and workspace are re-poisoned; a buffer
 * larger than the last-level cache is written to flush it; then
 * CLOCK_MONOTONIC around the call. Baseline and candidate alternate
 * (B C B C ...) with identical inputs. A random subset of the candidate's
 * timed calls (plus the first call that reuses a buffer set) is checked
 * against a reference run on the same inputs, so a cache that only kicks in
 * once validation is over still fails                               [C6]
 * Repetitions are time-based (min reps and a time target per side, capped by
 * a per-shape wall budget and the evaluation's own budget).
 *
 * The first failure ends the run: the child reports it and exits, before a
 * misbehaving candidate can do more damage.
 */
#define _GNU_SOURCE
#include "harness.h"
#include "compare.h"
#include "inputs.h"
#include "kf_util.h"
#include "kf_verdict.h"
#include "sandbox.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

typedef int (*entry_fn)(const kf_call *);

#define NSETS 3            /* rotating input sets while timing */
#define LATE_CHECK_MS 20   /* delay before re-reading outputs */

/* ---- guarded buffers ---- */

typedef struct {
    void *base;            /* mmap base */
    size_t map_len;
    void *data;            /* 64-byte aligned, ends 0..63 bytes before the tail guard */
    size_t bytes;
} gbuf;

static int gbuf_alloc(gbuf *g, size_t bytes)
{
    memset(g, 0, sizeof(*g));
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded == 0) rounded = 64;
    size_t body = (rounded + pg - 1) / pg * pg;
    size_t len = body + 2 * pg;
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return -1;
    mprotect(m, pg, PROT_NONE);
    mprotect((char *)m + pg + body, pg, PROT_NONE);
    g->base = m;
    g->map_len = len;
    g->data = (char *)m + pg + body - rounded;
    g->bytes = bytes;
    return 0;
}

static void gbuf_free(gbuf *g)
{
    if (g->base) munmap(g->base, g->map_len);
    memset(g, 0, sizeof(*g));
}

/* One complete set of call buffers for one shape. */
typedef struct {
    int n_in, n_out;
    gbuf in[KF_MAX_TENSORS], out[KF_MAX_TENSORS], ws;
    int64_t in_n[KF_MAX_TENSORS], out_n[KF_MAX_TENSORS];
    kf_tensor tin[KF_MAX_TENSORS], tout[KF_MAX_TENSORS];
    int64_t sizes[KF_MAX_SIZES];
    kf_call call;
} bufset;

static void bufset_free(bufset *b)
{
    for (int i = 0; i < b->n_in; i++) gbuf_free(&b->in[i]);
    for (int i = 0; i < b->n_out; i++) gbuf_free(&b->out[i]);
    gbuf_free(&b->ws);
    memset(b, 0, sizeof(*b));
}

/* ---- run state ---- */

typedef struct {
    const kf_harness_cfg *cfg;
    const kf_task *t;
    int fd;
    pid_t pid;
    double t_start;
    entry_fn ref, base, cand;
    void *h_ref, *h_base, *h_cand;
    json_t *metrics;
    json_t *validation;
    char errbuf[512];
} run;

static void progress(run *r, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + 2, sizeof(line) - 3, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof(line) - 4) n = (int)sizeof(line) - 4;
    line[0] = 'P';
    line[1] = ' ';
    line[2 + n] = '\n';
    kf_sandbox_write_all(r->fd, line, (size_t)n + 3);
}

/* Write the result record and end the child: nothing the candidate left
 * running gets another chance to act. */
__attribute__((noreturn, format(printf, 3, 4))) static int finish(run *r, kf_verdict v, const char *fmt, ...)
{
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    if (getpid() != r->pid) _exit(0); /* a fork the candidate made: never report */
    fflush(stdout); /* keep what the candidate printed: _exit skips stdio */
    fflush(stderr);
    json_t *o = json_object();
    json_object_set_new(o, "verdict", json_string(kf_verdict_name(v)));
    json_object_set_new(o, "detail", json_string(detail));
    json_object_set(o, "metrics", r->metrics);
    char *txt = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (txt) {
        char head[64];
        snprintf(head, sizeof(head), "R %s ", r->cfg->nonce);
        kf_sandbox_write_all(r->fd, head, strlen(head));
        kf_sandbox_write_all(r->fd, txt, strlen(txt));
        kf_sandbox_write_all(r->fd, "\n", 1);
        free(txt);
    }
    _exit(0);
}

static void shape_str(const kf_task *t, const int64_t *sizes, char *out, size_t cap)
{
    size_t p = 0;
    out[0] = 0;
    for (int i = 0; i < t->n_sizes && p < cap; i++)
        p += (size_t)snprintf(out + p, cap - p, "%s%s=%lld", i ? "," : "", t->size_names[i],
                              (long long)sizes[i]);
}

static json_t *shape_json(const kf_task *t, const int64_t *sizes)
{
    json_t *o = json_object();
    for (int i = 0; i < t->n_sizes; i++) json_object_set_new(o, t->size_names[i], json_integer(sizes[i]));
    return o;
}

/* Allocate b for sizes; inputs are left uninitialised, outputs/ws poisoned. */
static int bufset_alloc(run *r, bufset *b, const int64_t *sizes)
{
    const kf_task *t = r->t;
    memset(b, 0, sizeof(*b));
    memcpy(b->sizes, sizes, sizeof(b->sizes));
    for (int io = 0; io < 2; io++) {
        int n = io ? t->n_outputs : t->n_inputs;
        for (int i = 0; i < n; i++) {
            const kf_tensor_spec *ts = io ? &t->outputs[i] : &t->inputs[i];
            kf_tensor *kt = io ? &b->tout[i] : &b->tin[i];
            memset(kt, 0, sizeof(*kt));
            int64_t cnt = kf_task_shape(t, ts, sizes, kt->shape);
            if (cnt <= 0) {
                snprintf(r->errbuf, sizeof(r->errbuf), "tensor '%s': bad shape", ts->name);
                return -1;
            }
            kt->dtype = ts->dtype;
            kt->ndim = ts->ndim;
            gbuf *g = io ? &b->out[i] : &b->in[i];
            if (gbuf_alloc(g, (size_t)cnt * kf_dtype_size(ts->dtype)) != 0) {
                snprintf(r->errbuf, sizeof(r->errbuf), "tensor '%s': cannot allocate %lld bytes", ts->name,
                         (long long)cnt * (long long)kf_dtype_size(ts->dtype));
                return -1;
            }
            kt->data = g->data;
            if (io) {
                b->out_n[i] = cnt;
                b->n_out = i + 1;
                kf_inputs_poison(g->data, ts->dtype, cnt);
            } else {
                b->in_n[i] = cnt;
                b->n_in = i + 1;
            }
        }
    }
    double wsb = 0;
    char err[128];
    if (t->workspace[0] && kf_task_eval_expr(t, t->workspace, sizes, &wsb, err, sizeof(err)) != 0) wsb = 0;
    if (wsb < 0) wsb = 0;
    if (wsb > 0) {
        if (gbuf_alloc(&b->ws, (size_t)wsb) != 0) {
            snprintf(r->errbuf, sizeof(r->errbuf), "workspace: cannot allocate %.0f bytes", wsb);
            return -1;
        }
        memset(b->ws.data, 0xff, b->ws.bytes);
    }
    b->call.inputs = b->tin;
    b->call.n_inputs = t->n_inputs;
    b->call.outputs = b->tout;
    b->call.n_outputs = t->n_outputs;
    b->call.sizes = b->sizes;
    b->call.n_sizes = t->n_sizes;
    b->call.stream = NULL;
    b->call.workspace = b->ws.data;
    b->call.workspace_bytes = b->ws.bytes;
    return 0;
}

static void bufset_poison(const kf_task *t, bufset *b)
{
    for (int i = 0; i < b->n_out; i++) kf_inputs_poison(b->out[i].data, t->outputs[i].dtype, b->out_n[i]);
    if (b->ws.data) memset(b->ws.data, 0xff, b->ws.bytes);
}

static void bufset_copy_inputs(bufset *dst, const bufset *src)
{
    for (int i = 0; i < src->n_in; i++) memcpy(dst->in[i].data, src->in[i].data, src->in[i].bytes);
}

static double now_s(void) { return kf_util_now_s(); }

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---- loading ---- */

static void *load(run *r, const char *path, entry_fn *fn, char *err, size_t cap)
{
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(err, cap, "dlopen failed: %s", e ? e : "unknown error");
        return NULL;
    }
    dlerror();
    void *sym = dlsym(h, "kf_entry");
    if (!sym) {
        const char *e = dlerror();
        snprintf(err, cap, "kf_entry not found: %s", e ? e : "no such symbol");
        return NULL;
    }
    memcpy(fn, &sym, sizeof(sym));
    return h;
}

/* ---- checks shared by validation and timed-call verification ---- */

/* After a candidate call: snapshot is taken by the caller. Check it against
 * the reference outputs in rb. Returns 0 if fine, or finishes the run. */
static void judge_outputs(run *r, bufset *cb, gbuf *snap, bufset *rb, const char *where, json_t *rec)
{
    const kf_task *t = r->t;
    json_t *outs = json_array();
    for (int o = 0; o < t->n_outputs; o++) {
        const kf_tensor_spec *ts = &t->outputs[o];
        int64_t n = cb->out_n[o];
        /* the reference must have written everything */
        for (int64_t i = 0; i < n; i++)
            if (kf_inputs_is_poison(rb->out[o].data, ts->dtype, i)) {
                json_decref(outs);
                finish(r, KF_INFRA_ERROR, "reference did not write output '%s' element %lld (%s): task bug",
                       ts->name, (long long)i, where);
            }
        int64_t unwritten = 0, first = -1;
        for (int64_t i = 0; i < n; i++)
            if (kf_inputs_is_poison(snap[o].data, ts->dtype, i)) {
                if (first < 0) first = i;
                unwritten++;
            }
        if (unwritten) {
            json_object_set_new(rec, "unwritten", json_integer(unwritten));
            json_decref(outs);
            finish(r, KF_INCORRECT,
                   "output '%s' element %lld not written (%lld of %lld elements still hold the poison "
                   "pattern) %s",
                   ts->name, (long long)first, (long long)unwritten, (long long)n, where);
        }
        kf_compare_res cr;
        kf_compare(snap[o].data, rb->out[o].data, ts->dtype, n, &t->tol[ts->dtype], t->allow_nonfinite, &cr);
        json_t *oj = json_object();
        json_object_set_new(oj, "name", json_string(ts->name));
        json_object_set_new(oj, "max_abs_err", json_real(cr.max_abs_err));
        json_object_set_new(oj, "max_rel_err", json_real(cr.max_rel_err));
        json_object_set_new(oj, "scale", json_real(cr.scale));
        json_object_set_new(oj, "n_bad", json_integer(cr.n_bad));
        json_object_set_new(oj, "ok", json_boolean(cr.ok));
        if (cr.first_bad >= 0) {
            json_object_set_new(oj, "first_bad", json_integer(cr.first_bad));
            json_object_set_new(oj, "candidate", isfinite(cr.first_cand) ? json_real(cr.first_cand)
                                                                          : json_string(isnan(cr.first_cand) ? "nan" : (cr.first_cand > 0 ? "inf" : "-inf")));
            json_object_set_new(oj, "reference", isfinite(cr.first_ref) ? json_real(cr.first_ref)
                                                                         : json_string(isnan(cr.first_ref) ? "nan" : "inf"));
        }
        json_array_append_new(outs, oj);
        if (!cr.ok) {
            json_object_set_new(rec, "outputs", outs);
            if (cr.ref_nonfinite && !t->allow_nonfinite)
                finish(r, KF_INFRA_ERROR, "output '%s': %s (%s): task bug", ts->name, cr.reason, where);
            finish(r, KF_INCORRECT, "output '%s' %s: %s", ts->name, where, cr.reason);
        }
    }
    json_object_set_new(rec, "outputs", outs);
}

/* Snapshot outputs right after return, wait, and look for late writes. */
static void snapshot_and_late_check(run *r, bufset *cb, gbuf *snap, const char *where)
{
    for (int o = 0; o < cb->n_out; o++) memcpy(snap[o].data, cb->out[o].data, cb->out[o].bytes);
    sleep_ms(LATE_CHECK_MS);
    for (int o = 0; o < cb->n_out; o++) {
        if (!memcmp(snap[o].data, cb->out[o].data, cb->out[o].bytes)) continue;
        size_t es = kf_dtype_size(r->t->outputs[o].dtype);
        int64_t idx = 0;
        const unsigned char *a = snap[o].data, *b = cb->out[o].data;
        for (size_t i = 0; i < cb->out[o].bytes; i++)
            if (a[i] != b[i]) {
                idx = (int64_t)(i / es);
                break;
            }
        finish(r, KF_REJECTED_CHEAT,
               "output '%s' changed after kf_entry returned (element %lld, within %d ms) %s: work was left "
               "running after return",
               r->t->outputs[o].name, (long long)idx, LATE_CHECK_MS, where);
    }
}

static void check_inputs(run *r, bufset *cb, const bufset *pristine, const char *where)
{
    for (int i = 0; i < cb->n_in; i++) {
        if (!memcmp(cb->in[i].data, pristine->in[i].data, cb->in[i].bytes)) continue;
        const kf_tensor_spec *ts = &r->t->inputs[i];
        size_t es = kf_dtype_size(ts->dtype);
        int64_t idx = 0;
        const unsigned char *a = pristine->in[i].data, *b = cb->in[i].data;
        for (size_t k = 0; k < cb->in[i].bytes; k++)
            if (a[k] != b[k]) {
                idx = (int64_t)(k / es);
                break;
            }
        finish(r, KF_INCORRECT, "candidate modified input '%s' (element %lld: was %.9g, now %.9g) %s",
               ts->name, (long long)idx, kf_inputs_get(pristine->in[i].data, ts->dtype, idx),
               kf_inputs_get(cb->in[i].data, ts->dtype, idx), where);
    }
}

static int snap_alloc(run *r, gbuf *snap, const bufset *b)
{
    for (int o = 0; o < b->n_out; o++)
        if (gbuf_alloc(&snap[o], b->out[o].bytes) != 0) {
            snprintf(r->errbuf, sizeof(r->errbuf), "cannot allocate output snapshot");
            return -1;
        }
    return 0;
}

static void snap_free(gbuf *snap, int n)
{
    for (int o = 0; o < n; o++) gbuf_free(&snap[o]);
}

/* ---- validation ---- */

static void validate(run *r)
{
    const kf_task *t = r->t;
    bufset prev_c, cur_p, cur_r, cur_c;
    memset(&prev_c, 0, sizeof(prev_c));
    for (int s = 0; s < t->n_validation; s++) {
        const int64_t *sizes = t->validation[s].sizes;
        char sh[160];
        shape_str(t, sizes, sh, sizeof(sh));
        for (int tr = 0; tr < t->trials; tr++) {
            char where[256];
            snprintf(where, sizeof(where), "(validation shape %s, trial %d)", sh, tr);
            if (bufset_alloc(r, &cur_p, sizes) || bufset_alloc(r, &cur_r, sizes) ||
                bufset_alloc(r, &cur_c, sizes))
                finish(r, KF_INFRA_ERROR, "%s %s", r->errbuf, where);
            for (int i = 0; i < t->n_inputs; i++)
                kf_inputs_fill(cur_p.in[i].data, t->inputs[i].dtype, cur_p.in_n[i], &t->inputs[i],
                               kf_inputs_derive_seed(r->cfg->seed, (uint64_t)s, (uint64_t)tr, (uint64_t)i));
            bufset_copy_inputs(&cur_r, &cur_p);
            bufset_copy_inputs(&cur_c, &cur_p);
            /* the previous trial's buffers are released only now, so the
             * allocator cannot hand the candidate the same addresses */
            bufset_free(&prev_c);

            progress(r, "validate reference %s", where);
            int rc = r->ref(&cur_r.call);
            if (rc != 0) finish(r, KF_INFRA_ERROR, "reference kf_entry returned %d %s: task bug", rc, where);

            gbuf snap[KF_MAX_TENSORS];
            memset(snap, 0, sizeof(snap));
            if (snap_alloc(r, snap, &cur_c)) finish(r, KF_INFRA_ERROR, "%s", r->errbuf);

            progress(r, "validate candidate %s", where);
            double t0 = now_s();
            rc = r->cand(&cur_c.call);
            double t1 = now_s();
            if (getpid() != r->pid) _exit(0);
            if (rc != 0) finish(r, KF_RUNTIME_ERROR, "candidate kf_entry returned %d %s", rc, where);
            progress(r, "check candidate %s", where);
            snapshot_and_late_check(r, &cur_c, snap, where);
            check_inputs(r, &cur_c, &cur_p, where);

            json_t *rec = json_object();
            json_object_set_new(rec, "shape", shape_json(t, sizes));
            json_object_set_new(rec, "trial", json_integer(tr));
            json_object_set_new(rec, "candidate_call_us", json_real((t1 - t0) * 1e6));
            json_array_append_new(r->validation, rec);
            judge_outputs(r, &cur_c, snap, &cur_r, where, rec);

            snap_free(snap, cur_c.n_out);
            bufset_free(&cur_p);
            bufset_free(&cur_r);
            prev_c = cur_c;
        }
    }
    bufset_free(&prev_c);
}

/* ---- timing ---- */

typedef struct {
    double *v;
    int n, cap;
    double sum;
} samples;

static int samples_add(samples *s, double x)
{
    if (s->n == s->cap) {
        int nc = s->cap ? s->cap * 2 : 64;
        double *nv = realloc(s->v, (size_t)nc * sizeof(double));
        if (!nv) return -1;
        s->v = nv;
        s->cap = nc;
    }
    s->v[s->n++] = x;
    s->sum += x;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    double median, min, mean, cv;
    int reps;
} stats;

static stats stats_of(samples *s)
{
    stats st = {0};
    if (s->n == 0) return st;
    qsort(s->v, (size_t)s->n, sizeof(double), cmp_double);
    st.reps = s->n;
    st.min = s->v[0];
    st.median = s->n % 2 ? s->v[s->n / 2] : 0.5 * (s->v[s->n / 2 - 1] + s->v[s->n / 2]);
    st.mean = s->sum / s->n;
    double var = 0;
    for (int i = 0; i < s->n; i++) var += (s->v[i] - st.mean) * (s->v[i] - st.mean);
    st.cv = s->n > 1 && st.mean > 0 ? sqrt(var / (s->n - 1)) / st.mean : 0;
    return st;
}

static json_t *stats_json(const stats *st)
{
    json_t *o = json_object();
    json_object_set_new(o, "median_us", json_real(st->median * 1e6));
    json_object_set_new(o, "min_us", json_real(st->min * 1e6));
    json_object_set_new(o, "mean_us", json_real(st->mean * 1e6));
    json_object_set_new(o, "cv", json_real(st->cv));
    json_object_set_new(o, "reps", json_integer(st->reps));
    return o;
}

/* Prepare side buffers for a timed call: pristine copy + perturbation +
 * poison. The perturbation seed depends on (shape, rep) only, so baseline
 * and candidate see identical inputs on the same rep. */
static void prep_call(run *r, bufset *dst, const bufset *pristine, int b, int rep)
{
    const kf_task *t = r->t;
    bufset_copy_inputs(dst, pristine);
    for (int i = 0; i < t->n_inputs; i++)
        kf_inputs_perturb(dst->in[i].data, t->inputs[i].dtype, dst->in_n[i], &t->inputs[i],
                          kf_inputs_derive_seed(r->cfg->seed, 2000u + (uint64_t)b, (uint64_t)rep, (uint64_t)i),
                          8);
    bufset_poison(t, dst);
}

static void flush_cache(unsigned char *buf, size_t len, int salt)
{
    memset(buf, salt & 0xff, len);
    __asm__ volatile("" : : "r"(buf) : "memory");
}

static void timing(run *r)
{
    const kf_task *t = r->t;
    const kf_harness_cfg *cfg = r->cfg;
    uint64_t llc = cfg->llc_bytes ? cfg->llc_bytes : (64u << 20);
    size_t flush_len = (size_t)(llc + llc / 2);
    if (flush_len < (8u << 20)) flush_len = 8u << 20;
    if (flush_len > (64u << 20)) flush_len = 64u << 20;
    unsigned char *flush = malloc(flush_len);
    if (!flush) finish(r, KF_INFRA_ERROR, "cannot allocate the cache flush buffer");

    int min_reps = cfg->quick ? 3 : 5, max_reps = cfg->quick ? 50 : 5000;
    double target = cfg->quick ? 0.02 : 0.3;     /* measured seconds per side */
    double shape_cap = cfg->quick ? 0.5 : 4.0;   /* wall seconds per shape */
    double deadline = r->t_start + (cfg->budget_s > 0 ? cfg->budget_s : 1e9);

    json_t *tj = json_object();
    json_t *shapes = json_array();
    json_t *flags = json_array();
    json_object_set_new(tj, "flush_bytes", json_integer((json_int_t)flush_len));
    json_object_set_new(tj, "shapes", shapes);
    json_object_set_new(tj, "flags", flags);
    json_object_set_new(r->metrics, "timing", tj);
    int noisy = 0, truncated = 0;
    double wsum = 0, lsp = 0, lc = 0, lb = 0;

    kf_rng vr;
    kf_inputs_rng_seed(&vr, kf_inputs_derive_seed(cfg->seed, 3000, 0, 0));

    for (int b = 0; b < t->n_benchmark; b++) {
        const int64_t *sizes = t->benchmark[b].sizes;
        char sh[160];
        shape_str(t, sizes, sh, sizeof(sh));
        bufset P[NSETS], B[NSETS], C[NSETS], R;
        gbuf snap[KF_MAX_TENSORS];
        memset(snap, 0, sizeof(snap));
        for (int k = 0; k < NSETS; k++) {
            if (bufset_alloc(r, &P[k], sizes) || bufset_alloc(r, &B[k], sizes) || bufset_alloc(r, &C[k], sizes))
                finish(r, KF_INFRA_ERROR, "%s (benchmark shape %s)", r->errbuf, sh);
            for (int i = 0; i < t->n_inputs; i++)
                kf_inputs_fill(P[k].in[i].data, t->inputs[i].dtype, P[k].in_n[i], &t->inputs[i],
                               kf_inputs_derive_seed(cfg->seed, 1000u + (uint64_t)b, (uint64_t)k, (uint64_t)i));
        }
        if (bufset_alloc(r, &R, sizes) || snap_alloc(r, snap, &C[0]))
            finish(r, KF_INFRA_ERROR, "%s (benchmark shape %s)", r->errbuf, sh);

        /* warm-up: every set once per side (OpenMP pools, page faults) */
        progress(r, "warm-up (benchmark shape %s)", sh);
        for (int k = 0; k < NSETS; k++) {
            prep_call(r, &B[k], &P[k], b, -1 - k);
            if (r->base(&B[k].call) != 0) finish(r, KF_INFRA_ERROR, "baseline kf_entry failed (shape %s)", sh);
            prep_call(r, &C[k], &P[k], b, -1 - k);
            int rc = r->cand(&C[k].call);
            if (getpid() != r->pid) _exit(0);
            if (rc != 0) finish(r, KF_RUNTIME_ERROR, "candidate kf_entry returned %d (warm-up, benchmark shape %s)", rc, sh);
        }

        samples sb = {0}, sc = {0};
        int verified = 0;
        double shape_t0 = now_s();
        progress(r, "time (benchmark shape %s)", sh);
        for (int rep = 0;; rep++) {
            int k = rep % NSETS;
            prep_call(r, &B[k], &P[k], b, rep);
            flush_cache(flush, flush_len, rep);
            double t0 = now_s();
            int rc = r->base(&B[k].call);
            double t1 = now_s();
            if (rc != 0) finish(r, KF_INFRA_ERROR, "baseline kf_entry returned %d (shape %s)", rc, sh);

            prep_call(r, &C[k], &P[k], b, rep);
            flush_cache(flush, flush_len, rep + 1);
            double t2 = now_s();
            rc = r->cand(&C[k].call);
            double t3 = now_s();
            if (getpid() != r->pid) _exit(0);
            if (rc != 0)
                finish(r, KF_RUNTIME_ERROR, "candidate kf_entry returned %d (timed call %d, benchmark shape %s)",
                       rc, rep, sh);
            if (samples_add(&sb, t1 - t0) || samples_add(&sc, t3 - t2))
                finish(r, KF_INFRA_ERROR, "out of memory while timing");

            /* verify a random subset of timed calls, and the first reuse of a set */
            int verify = (rep == NSETS) || (verified < 4 && kf_inputs_rng_next(&vr) % 4 == 0);
            if (verify) {
                char where[200];
                snprintf(where, sizeof(where), "(timed call %d, benchmark shape %s)", rep, sh);
                progress(r, "verify %s", where);
                snapshot_and_late_check(r, &C[k], snap, where);
                prep_call(r, &R, &P[k], b, rep);
                if (r->ref(&R.call) != 0) finish(r, KF_INFRA_ERROR, "reference failed %s", where);
                json_t *rec = json_object();
                judge_outputs(r, &C[k], snap, &R, where, rec);
                json_decref(rec);
                /* inputs must still equal what this call was given */
                prep_call(r, &R, &P[k], b, rep);
                check_inputs(r, &C[k], &R, where);
                verified++;
                progress(r, "time (benchmark shape %s)", sh);
            }

            double now = now_s();
            int n = rep + 1;
            if (now >= deadline) {
                truncated = 1;
                break;
            }
            if (n >= max_reps) break;
            if (n >= min_reps && ((sb.sum >= target && sc.sum >= target) || now - shape_t0 >= shape_cap)) break;
        }
        stats bs = stats_of(&sb), cs = stats_of(&sc);
        free(sb.v);
        free(sc.v);
        double sp = cs.median > 0 ? bs.median / cs.median : 0;
        json_t *so = json_object();
        json_object_set_new(so, "sizes", shape_json(t, sizes));
        json_object_set_new(so, "weight", json_real(t->benchmark[b].weight));
        json_object_set_new(so, "baseline", stats_json(&bs));
        json_object_set_new(so, "candidate", stats_json(&cs));
        json_object_set_new(so, "speedup", json_real(sp));
        json_object_set_new(so, "verified_calls", json_integer(verified));
        double v;
        char err[128];
        if (t->flops[0] && kf_task_eval_expr(t, t->flops, sizes, &v, err, sizeof(err)) == 0 && cs.median > 0) {
            json_object_set_new(so, "flops", json_real(v));
            json_object_set_new(so, "gflops", json_real(v / cs.median * 1e-9));
            json_object_set_new(so, "baseline_gflops", json_real(v / bs.median * 1e-9));
        }
        if (t->bytes[0] && kf_task_eval_expr(t, t->bytes, sizes, &v, err, sizeof(err)) == 0 && cs.median > 0) {
            json_object_set_new(so, "bytes", json_real(v));
            json_object_set_new(so, "gbs", json_real(v / cs.median * 1e-9));
            json_object_set_new(so, "baseline_gbs", json_real(v / bs.median * 1e-9));
        }
        int shape_noisy = bs.cv > 0.10 || cs.cv > 0.10;
        json_object_set_new(so, "noisy", json_boolean(shape_noisy));
        noisy |= shape_noisy;
        json_array_append_new(shapes, so);

        double w = t->benchmark[b].weight;
        if (cs.median > 0 && bs.median > 0) {
            wsum += w;
            lsp += w * log(sp);
            lc += w * log(cs.median);
            lb += w * log(bs.median);
        }
        for (int k = 0; k < NSETS; k++) {
            bufset_free(&P[k]);
            bufset_free(&B[k]);
            bufset_free(&C[k]);
        }
        bufset_free(&R);
        snap_free(snap, t->n_outputs);
        if (truncated) break;
    }
    free(flush);
    if (noisy) json_array_append_new(flags, json_string("noisy"));
    if (truncated) json_array_append_new(flags, json_string("timing_truncated"));
    if (wsum > 0) {
        /* weighted geometric means: baseline_us / candidate_us == speedup */
        json_object_set_new(tj, "speedup", json_real(exp(lsp / wsum)));
        json_object_set_new(tj, "candidate_us", json_real(exp(lc / wsum) * 1e6));
        json_object_set_new(tj, "baseline_us", json_real(exp(lb / wsum) * 1e6));
    }
}

/* ---- entry ---- */

int kf_harness_child(void *arg, int report_fd)
{
    const kf_harness_cfg *cfg = arg;
    run rs;
    memset(&rs, 0, sizeof(rs));
    run *r = &rs;
    r->cfg = cfg;
    r->t = cfg->task;
    r->fd = report_fd;
    r->pid = getpid();
    r->t_start = now_s();
    r->metrics = json_object();
    r->validation = json_array();
    json_object_set_new(r->metrics, "validation", r->validation);
    json_object_set_new(r->metrics, "seed", json_integer((json_int_t)cfg->seed));

    char err[600];
    progress(r, "load reference");
    if (!(r->h_ref = load(r, cfg->reference_so, &r->ref, err, sizeof(err))))
        finish(r, KF_INFRA_ERROR, "reference: %s", err);
    progress(r, "load baseline");
    if (!(r->h_base = load(r, cfg->baseline_so, &r->base, err, sizeof(err))))
        finish(r, KF_INFRA_ERROR, "baseline: %s", err);
    progress(r, "load candidate");
    if (!(r->h_cand = load(r, cfg->candidate_so, &r->cand, err, sizeof(err))))
        finish(r, KF_LOAD_ERROR, "candidate: %s", err);
    if (getpid() != r->pid) _exit(0);

    validate(r);
    json_object_set_new(r->metrics, "validation_s", json_real(now_s() - r->t_start));
    if (!cfg->validate_only) {
        double t0 = now_s();
        timing(r);
        json_object_set_new(r->metrics, "timing_s", json_real(now_s() - t0));
    }
    progress(r, "report");
    return finish(r, KF_OK, "validated on %d shapes x %d trials%s", r->t->n_validation, r->t->trials,
                  cfg->validate_only ? " (not timed)" : "");
}

void kf_harness_new_nonce(kf_harness_cfg *cfg)
{
    unsigned char b[16];
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
        uint64_t x = (uint64_t)(now_s() * 1e9) ^ ((uint64_t)getpid() << 32);
        for (int i = 0; i < 16; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            b[i] = (unsigned char)(x >> 56);
        }
    }
    for (int i = 0; i < 16; i++) snprintf(cfg->nonce + 2 * i, 3, "%02x", b[i]);
}

char *kf_harness_parse_report(const char *report, const char *nonce, char *phase, size_t phase_cap,
                              int *loaded_candidate)
{
    char *result = NULL;
    if (phase_cap) phase[0] = 0;
    if (loaded_candidate) *loaded_candidate = 0;
    size_t nl_len = strlen(nonce);
    for (const char *line = report; line && *line;) {
        const char *nl = strchr(line, '\n');
        if (!nl) break; /* an incomplete last line is not a record */
        size_t l = (size_t)(nl - line);
        if (l >= 2 && line[0] == 'P' && line[1] == ' ') {
            size_t pl = l - 2 < phase_cap - 1 ? l - 2 : phase_cap - 1;
            memcpy(phase, line + 2, pl);
            phase[pl] = 0;
            if (loaded_candidate && pl >= 14 && !strncmp(phase, "load candidate", 14)) *loaded_candidate = 1;
        } else if (l > 3 + nl_len && line[0] == 'R' && line[1] == ' ' && !strncmp(line + 2, nonce, nl_len) &&
                   line[2 + nl_len] == ' ' && !result) {
            result = strndup(line + 3 + nl_len, l - 3 - nl_len);
        }
        line = nl + 1;
    }
    return result;
}
