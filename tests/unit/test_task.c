/* test_task.c -- task spec parsing: good specs parse, bad ones name the field. */
#include <stdlib.h>
#include <string.h>
#include "kf_task.h"
#include "kf_test.h"

static const char *GOOD =
    "{\"name\":\"softmax_f32\",\"backend\":\"cpu\","
    "\"definition\":\"y[m,n] = exp(x[m,n]-max) / sum exp(x-max)\","
    "\"sizes\":[\"M\",\"N\"],"
    "\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[\"M\",\"N\"],"
    "  \"init\":{\"dist\":\"normal\",\"mean\":0,\"std\":3,\"special\":[\"-0\",1e30],\"special_fraction\":0.01}}],"
    "\"outputs\":[{\"name\":\"y\",\"dtype\":\"f32\",\"shape\":[\"M\",\"N\"]}],"
    "\"validation\":[{\"M\":3,\"N\":17},{\"M\":8,\"N\":200000}],"
    "\"benchmark\":[{\"sizes\":{\"M\":1024,\"N\":1024},\"weight\":2}],"
    "\"tolerance\":{\"f32\":{\"rtol\":1e-5,\"atol\":1e-6}},"
    "\"flops\":\"5*M*N\",\"bytes\":\"(4+4)*M*N\",\"forbid\":[\"cblas_*\"],"
    "\"files\":{\"reference\":\"reference.c\",\"baseline\":\"baseline.c\",\"seed\":\"seed.c\"}}";

/* Replace the first occurrence of `from` in GOOD by `to` and parse. */
static int parse_mut(const char *from, const char *to, char *err, size_t errlen)
{
    const char *p = strstr(GOOD, from);
    if (!p) return 99;
    char buf[4096];
    snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(p - GOOD), GOOD, to, p + strlen(from));
    kf_task t;
    int rc = kf_task_parse(buf, &t, err, errlen);
    if (rc == 0) kf_task_free(&t);
    return rc;
}

int main(void)
{
    kf_test_state st = {0};
    char err[512];
    kf_task t;
    int rc = kf_task_parse(GOOD, &t, err, sizeof(err));
    CHECK(&st, rc == 0, "good spec failed: %s", err);
    if (rc == 0) {
        CHECK(&st, t.n_sizes == 2 && t.n_inputs == 1 && t.n_outputs == 1, "counts");
        CHECK(&st, t.validation[1].sizes[1] == 200000, "validation sizes");
        CHECK(&st, t.benchmark[0].weight == 2, "weight");
        CHECK(&st, t.trials == 2, "default trials");
        CHECK(&st, t.inputs[0].n_special == 2 && t.inputs[0].special[1] == 1e30, "special values");
        CHECK(&st, t.tol[KF_F32].rtol == 1e-5, "tolerance");
        double v;
        int64_t sz[2] = {1024, 1024};
        CHECK(&st, kf_task_eval_expr(&t, t.bytes, sz, &v, err, sizeof(err)) == 0 && v == 8.0 * 1024 * 1024,
              "bytes expr");
        CHECK(&st, kf_task_eval_expr(&t, "2*M*N/(N-24)", sz, &v, err, sizeof(err)) == 0 &&
                       v == 2.0 * 1024 * 1024 / 1000, "expr precedence");
        CHECK(&st, kf_task_eval_expr(&t, "2*K", sz, &v, err, sizeof(err)) < 0 && strstr(err, "'K'"),
              "unknown symbol: %s", err);
        CHECK(&st, kf_task_eval_expr(&t, "2*(M", sz, &v, err, sizeof(err)) < 0, "unbalanced paren");
        int64_t shape[KF_MAX_DIMS];
        CHECK(&st, kf_task_shape(&t, &t.outputs[0], sz, shape) == 1024 * 1024 && shape[1] == 1024, "shape");
        kf_task_free(&t);
    }

    /* Bad files: each error names the field. */
    struct { const char *from, *to, *expect; } bad[] = {
        {"\"dtype\":\"f32\"", "\"dtype\":\"f8\"", "inputs[0].dtype"},
        {"\"backend\":\"cpu\"", "\"backend\":\"tpu\"", "backend"},
        {"[{\"M\":3,\"N\":17},", "[", "validation"},
        {"\"shape\":[\"M\",\"N\"],  \"init\"", "\"shape\":[\"M\",\"Q\"],  \"init\"", "inputs[0].shape[1]"},
        {"\"tolerance\":{\"f32\"", "\"tolerance\":{\"f16\"", "tolerance.f32"},
        {"\"flops\":\"5*M*N\"", "\"flops\":\"5*M*Z\"", "flops"},
        {"{\"M\":8,\"N\":200000}", "{\"M\":8}", "validation[1].N"},
        {"\"reference\":\"reference.c\"", "\"reference\":\"../etc/passwd\"", "files"},
        {"\"softmax_f32\",", "\"softmax_f32\",\"trials\":1,", "trials"},
        {"\"dist\":\"normal\"", "\"dist\":\"cauchy\"", "inputs[0].init.dist"},
        {"\"sizes\":[\"M\",\"N\"],", "\"sizes\":[\"M\",\"N\"],,", "line 1"},
        /* 2^31 x 2^31 f32 = 2^64 bytes: wraps to 0 if unchecked */
        {"{\"M\":8,\"N\":200000}", "{\"M\":2147483648,\"N\":2147483648}", "validation[1]: tensor"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = 0;
        int r = parse_mut(bad[i].from, bad[i].to, err, sizeof(err));
        CHECK(&st, r == -1, "bad spec %zu parsed (rc %d)", i, r);
        CHECK(&st, strstr(err, bad[i].expect) != NULL, "bad spec %zu: error '%s' lacks '%s'", i, err,
              bad[i].expect);
    }

    CHECK(&st, kf_task_parse("[1]", &t, err, sizeof(err)) == -1 && strstr(err, "top level"), "array: %s", err);

    /* Loading a directory checks the named files exist. */
    rc = kf_task_load("/nonexistent-kfarm-task", &t, err, sizeof(err));
    CHECK(&st, rc == -1 && strstr(err, "task.json"), "missing dir: %s", err);
    return kf_test_done(&st);
}
