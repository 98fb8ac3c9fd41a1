/* test_cuda_compile.c -- nvcc builds without a GPU (skips cleanly when nvcc
 * is absent): every tasks/<name>_cuda reference, baseline and seed builds for
 * sm_75, sm_80, sm_86, sm_89 and sm_90; every tests/cases_cuda/NAME case
 * builds, or fails to exactly as its case.json says (compile_error, unsupported);
 * an sm_90a-only instruction is an arch failure (B1) for sm_86 and plain sm_90
 * and builds for sm_90a; cache keys
 * differ by define, arch and source; a cache hit keeps the ptxas info; a
 * failed build is never cached (B2); a missing nvcc is an infra failure. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/wait.h>
#include <jansson.h>
#include "kf_cuda.h"
#include "kf_test.h"
#include "kf_util.h"

static char scratch[] = "/tmp/kf-cuda-test-XXXXXX";

static int build(const char *src, const char *arch, const char *cache, int nd, const char **dn, const char **dv,
                 kf_cuda_build_res *r)
{
    char out[600];
    snprintf(out, sizeof(out), "%s/out.so", scratch);
    kf_cuda_build_req q = {.source_path = src, .out_path = out, .scratch_dir = scratch, .cache_dir = cache,
                           .arch = arch, .n_defines = nd, .define_names = dn, .define_values = dv};
    return kf_cuda_build(&q, r);
}

static void write_src(const char *name, const char *text, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", scratch, name);
    kf_util_write_file(path, text, strlen(text));
}

/* Build reference, baseline and seed of every tasks/<name>_cuda for one arch;
 * returns the number of failures (each printed). */
/* KFARM_TEST_CUDA_QUICK=1 (tools/test's AddressSanitizer half): the same C
 * paths on fewer sources -- the first CUDA task only, and of the CUDA cases
 * only the first run of each build outcome (built, failed, wrong arch). The
 * other sources cost ~2 minutes of nvcc there and run no C code the first
 * build of their kind did not; the full set runs in the first half. */
static int quick_mode(void)
{
    const char *q = getenv("KFARM_TEST_CUDA_QUICK");
    return q && *q && strcmp(q, "0") != 0;
}

static int build_tasks(const char *tasks, const char *arch)
{
    int fails = 0, ntasks = 0;
    DIR *d = opendir(tasks);
    struct dirent *e;
    kf_cuda_build_res r;
    while (d && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, "_cuda") != 0) continue;
        char tj[1400];
        snprintf(tj, sizeof(tj), "%s/%s/task.json", tasks, e->d_name);
        json_t *j = json_load_file(tj, 0, NULL);
        if (!j) {
            printf("note: %s has no readable task.json yet: skipped\n", e->d_name);
            continue;
        }
        if (quick_mode() && ntasks > 0) {
            json_decref(j);
            continue;
        }
        ntasks++;
        json_t *files = json_object_get(j, "files");
        const char *roles[] = {"reference", "baseline", "seed"};
        for (int ri = 0; ri < 3; ri++) {
            const char *fn = json_string_value(json_object_get(files, roles[ri]));
            if (!fn) continue;
            char src[1600];
            snprintf(src, sizeof(src), "%s/%s/%s", tasks, e->d_name, fn);
            const char *libs[4];
            int nl = 0;
            json_t *lk = json_object_get(j, "link");
            for (size_t i = 0; ri < 2 && i < json_array_size(lk) && nl < 4; i++)
                libs[nl++] = json_string_value(json_array_get(lk, i));
            char out[600];
            snprintf(out, sizeof(out), "%s/t_%s.so", scratch, arch);
            kf_cuda_build_req q = {.source_path = src, .out_path = out, .scratch_dir = scratch, .arch = arch,
                                   .n_libs = nl, .libs = libs};
            kf_cuda_build(&q, &r);
            if (r.status != KF_CUDA_BUILD_OK) {
                fails++;
                fprintf(stderr, "FAIL %s %s for %s: %s\n", e->d_name, roles[ri], arch, r.detail);
            }
            kf_cuda_build_res_free(&r);
        }
        json_decref(j);
    }
    if (d) closedir(d);
    printf("%s: built %d CUDA tasks, %d failures\n", arch, ntasks, fails);
    return fails;
}

/* What a run of a case expects from the build: its verdict(s) -> OK, FAILED or ARCH;
 * -1 when both FAILED and ARCH are accepted. */
static int want_build(json_t *verdict)
{
    size_t n = json_is_array(verdict) ? json_array_size(verdict) : 1;
    int nfail = 0, narch = 0;
    for (size_t i = 0; i < n; i++) {
        const char *v = json_string_value(json_is_array(verdict) ? json_array_get(verdict, i) : verdict);
        if (v && !strcmp(v, "compile_error")) nfail++;
        if (v && !strcmp(v, "unsupported")) narch++;
    }
    if (n == 0 || (size_t)(nfail + narch) != n) return KF_CUDA_BUILD_OK;
    return nfail == 0 ? KF_CUDA_BUILD_ARCH : narch == 0 ? KF_CUDA_BUILD_FAILED : -1;
}

/* a case named by another ("then", "baseline_like", "candidate_like") must exist */
static void check_ref(kf_test_state *st, const char *cdir, const char *name, json_t *cj, const char *key)
{
    const char *ref = json_string_value(json_object_get(cj, key));
    if (!json_object_get(cj, key)) return;
    char p[1600];
    struct stat sb;
    snprintf(p, sizeof(p), "%s/%s/case.json", cdir, ref ? ref : "");
    CHECK(st, ref && *ref && stat(p, &sb) == 0, "case %s: \"%s\" names no case (%s)", name, key, ref ? ref : "?");
}

/* Builds every run of every case in cdir; returns the number of cases. */
static int check_cases(kf_test_state *st, const char *cdir, const char *cache)
{
    DIR *cd = opendir(cdir);
    struct dirent *ce;
    int ncases = 0, seen[8] = {0}; /* quick mode: builds done per outcome */
    kf_cuda_build_res r;
    while (cd && (ce = readdir(cd))) {
        if (ce->d_name[0] == '.') continue;
        char dir[1400], src[1500], cjp[1500], tj[1500];
        struct stat sb;
        snprintf(dir, sizeof(dir), "%s/%s", cdir, ce->d_name);
        if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            size_t l = strlen(ce->d_name);
            CHECK(st, !(l > 3 && !strcmp(ce->d_name + l - 3, ".cu")),
                  "%s: a flat .cu case; cases are folders NAME/{candidate.cu,case.json}", ce->d_name);
            continue;
        }
        snprintf(tj, sizeof(tj), "%s/task.json", dir);
        if (stat(tj, &sb) == 0) continue; /* the cases' task, not a case */
        snprintf(src, sizeof(src), "%s/candidate.cu", dir);
        snprintf(cjp, sizeof(cjp), "%s/case.json", dir);
        json_error_t jerr;
        json_t *cj = json_load_file(cjp, 0, &jerr);
        CHECK(st, cj != NULL, "case %s: case.json: %s", ce->d_name, cj ? "" : jerr.text);
        CHECK(st, stat(src, &sb) == 0, "case %s: no candidate.cu", ce->d_name);
        if (!cj) continue;
        ncases++;
        const char *task = json_string_value(json_object_get(cj, "task"));
        char tdir[1600];
        snprintf(tdir, sizeof(tdir), "%s/../../%s/task.json", cdir, task ? task : "");
        CHECK(st, task && stat(tdir, &sb) == 0, "case %s: \"task\" is not a task folder: %s", ce->d_name,
              task ? task : "(none)");
        check_ref(st, cdir, ce->d_name, cj, "then");
        check_ref(st, cdir, ce->d_name, cj, "baseline_like");
        check_ref(st, cdir, ce->d_name, cj, "candidate_like");
        /* defines */
        const char *dn[8], *dv[8];
        char dbuf[8][32];
        int nd = 0;
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(cj, "defines"), k, v)
        {
            if (nd >= 8) break;
            if (json_is_integer(v)) snprintf(dbuf[nd], sizeof(dbuf[nd]), "%lld", (long long)json_integer_value(v));
            else snprintf(dbuf[nd], sizeof(dbuf[nd]), "%s", json_string_value(v) ? json_string_value(v) : "");
            dn[nd] = k, dv[nd] = dbuf[nd], nd++;
        }
        /* runs: one, or one per entry of an "arch" list (each may override "verdict") */
        json_t *arch = json_object_get(cj, "arch");
        size_t nruns = json_is_array(arch) ? json_array_size(arch) : 1;
        CHECK(st, nruns > 0, "case %s: empty \"arch\" list", ce->d_name);
        for (size_t i = 0; i < nruns; i++) {
            json_t *run = json_is_array(arch) ? json_array_get(arch, i) : NULL;
            const char *a = json_string_value(run ? json_object_get(run, "arch") : arch);
            if (!a) a = "sm_90";
            json_t *verdict = run && json_object_get(run, "verdict") ? json_object_get(run, "verdict")
                                                                      : json_object_get(cj, "verdict");
            CHECK(st, json_is_string(verdict) || (json_is_array(verdict) && json_array_size(verdict) > 0),
                  "case %s (%s): no \"verdict\"", ce->d_name, a);
            int want = want_build(verdict);
            int kind = want < 0 ? 7 : want & 7;
            if (quick_mode() && seen[kind]++) continue;
            build(src, a, cache, nd, dn, dv, &r);
            int as_wanted = want < 0 ? (r.status == KF_CUDA_BUILD_FAILED || r.status == KF_CUDA_BUILD_ARCH)
                                : (int)r.status == want;
            CHECK(st, as_wanted, "case %s for %s: build status %d, want %d: %s", ce->d_name, a, r.status, want, r.detail);
            if (as_wanted) printf("case %-24s %-7s build status %d as expected\n", ce->d_name, a, r.status);
            kf_cuda_build_res_free(&r);
        }
        json_decref(cj);
    }
    if (cd) closedir(cd);
    return ncases;
}

int main(void)
{
    kf_test_state st = {0};
    char nvcc[1024];
    if (kf_cuda_find_nvcc(nvcc, sizeof(nvcc)) != 0) {
        printf("SKIP: nvcc not found (KFARM_NVCC, $KFARM_NVCC, PATH, /usr/local/cuda/bin): CUDA compile tests skipped\n");
        return kf_test_done(&st);
    }
    if (!mkdtemp(scratch)) return 1;
    const char *srcdir = getenv("KFARM_SRC");
    char tasks[1024];
    snprintf(tasks, sizeof(tasks), "%s/tasks", srcdir ? srcdir : ".");
    char cache[600];
    snprintf(cache, sizeof(cache), "%s/cache", scratch);
    kf_cuda_build_res r;

    /* every CUDA task builds for every supported arch: one child per arch.
     * KFARM_TEST_ARCHS="sm_90" (a comma list) narrows it: tools/test's
     * AddressSanitizer half, where the four other archs cost ~2 minutes of
     * nvcc and run no C code the first half did not. */
    const char *archs[8] = {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90"};
    int na = 5;
    char only[128] = "";
    if (getenv("KFARM_TEST_ARCHS") && *getenv("KFARM_TEST_ARCHS")) {
        snprintf(only, sizeof(only), "%s", getenv("KFARM_TEST_ARCHS"));
        na = 0;
        for (char *sv = NULL, *t = strtok_r(only, ",", &sv); t && na < 8; t = strtok_r(NULL, ",", &sv))
            archs[na++] = t;
    }
    pid_t pids[8];
    for (int a = 0; a < na; a++) {
        fflush(stdout);
        pids[a] = fork();
        if (pids[a] == 0) {
            int f = build_tasks(tasks, archs[a]);
            fflush(stdout); /* _exit does not flush: keep the child's summary line */
            _exit(f ? 1 : 0);
        }
    }
    for (int a = 0; a < na; a++) {
        int status = 0;
        waitpid(pids[a], &status, 0);
        CHECK(&st, WIFEXITED(status) && WEXITSTATUS(status) == 0, "task builds for %s failed (see above)", archs[a]);
    }

    /* the CUDA hostile cases: tests/cases_cuda/NAME/{candidate.cu,case.json}, the same
     * files tools/gpu-check runs on a GPU. Each run (the case's "arch", default sm_90, or
     * each entry of an "arch" list) builds, except where every verdict it accepts is a
     * build verdict: compile_error -> a failed build (never infra: I9), unsupported -> an
     * arch failure (B1 wrong_arch on sm_86 and plain sm_90). */
    char cdir[1100];
    snprintf(cdir, sizeof(cdir), "%s/tests/cases_cuda", srcdir ? srcdir : ".");
    int ncases = check_cases(&st, cdir, cache);
    CHECK(&st, ncases >= 20, "found %d CUDA cases in %s", ncases, cdir);

    /* B1: sm_90a-only instructions */
    char wg[700];
    write_src("wgmma.cu",
              "#include \"kf_abi.h\"\n"
              "__global__ void k(float *o){ asm volatile(\"setmaxnreg.inc.sync.aligned.u32 232;\\n\" ::);\n"
              "  asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::); o[0] = 1; }\n"
              "extern \"C\" int kf_entry(const kf_call *c){ k<<<1,128>>>((float*)c->outputs[0].data); return 0; }\n",
              wg, sizeof(wg));
    build(wg, "sm_86", NULL, 0, NULL, NULL, &r);
    CHECK(&st, r.status == KF_CUDA_BUILD_ARCH, "sm_86: %d %s", r.status, r.detail);
    kf_cuda_build_res_free(&r);
    build(wg, "sm_90", NULL, 0, NULL, NULL, &r);
    CHECK(&st, r.status == KF_CUDA_BUILD_ARCH, "plain sm_90: %d %s", r.status, r.detail);
    kf_cuda_build_res_free(&r);
    build(wg, "sm_90a", NULL, 0, NULL, NULL, &r);
    CHECK(&st, r.status == KF_CUDA_BUILD_OK, "sm_90a: %s", r.detail);
    kf_cuda_build_res_free(&r);

    /* plain compile error */
    char bad[700];
    write_src("bad.cu", "#include \"kf_abi.h\"\nextern \"C\" int kf_entry(const kf_call *c){ return undefined_x; }\n",
              bad, sizeof(bad));
    build(bad, "sm_80", cache, 0, NULL, NULL, &r);
    CHECK(&st, r.status == KF_CUDA_BUILD_FAILED && strstr(r.detail, "undefined_x"), "compile error: %s", r.detail);
    kf_cuda_build_res_free(&r);

    /* cache keys, hits and ptxas info */
    char good[700];
    write_src("good.cu",
              "#include \"kf_abi.h\"\n#ifndef B\n#define B 128\n#endif\n"
              "__global__ void k(float *o){ __shared__ float s[B]; s[threadIdx.x] = 1; __syncthreads(); o[threadIdx.x] = s[B-1-threadIdx.x]; }\n"
              "extern \"C\" int kf_entry(const kf_call *c){ k<<<1,B>>>((float*)c->outputs[0].data); return 0; }\n",
              good, sizeof(good));
    const char *dn[] = {"B"}, *v1[] = {"64"}, *v2[] = {"256"};
    char k1[65], k2[65], k3[65], k4[65];
    build(good, "sm_80", cache, 1, dn, v1, &r);
    CHECK(&st, r.status == KF_CUDA_BUILD_OK && !r.cached, "first build: %s", r.detail);
    CHECK(&st, r.n_fn == 1 && r.fn[0].smem_bytes == 256 && r.fn[0].registers > 0, "ptxas: n=%d smem=%d", r.n_fn,
          r.n_fn ? r.fn[0].smem_bytes : -1);
    memcpy(k1, r.key, 65);
    kf_cuda_build_res_free(&r);
    build(good, "sm_80", cache, 1, dn, v1, &r);
    CHECK(&st, r.status == KF_CUDA_BUILD_OK && r.cached && !strcmp(r.key, k1), "second build is a hit");
    CHECK(&st, r.n_fn == 1 && r.fn[0].smem_bytes == 256, "ptxas info survives a hit");
    kf_cuda_build_res_free(&r);
    build(good, "sm_80", cache, 1, dn, v2, &r);
    memcpy(k2, r.key, 65);
    CHECK(&st, !r.cached && strcmp(k1, k2) != 0, "define changes the key");
    kf_cuda_build_res_free(&r);
    build(good, "sm_86", cache, 1, dn, v1, &r);
    memcpy(k3, r.key, 65);
    CHECK(&st, !r.cached && strcmp(k1, k3) != 0, "arch changes the key");
    kf_cuda_build_res_free(&r);
    build(good, "sm_90a", cache, 1, dn, v1, &r);
    memcpy(k4, r.key, 65);
    CHECK(&st, strcmp(k4, k1) != 0 && strcmp(k4, k3) != 0, "sm_90a differs from sm_80/sm_86");
    kf_cuda_build_res_free(&r);

    /* B2: a failed build is not cached; after the fix the same path rebuilds */
    build(bad, "sm_80", cache, 0, NULL, NULL, &r);
    CHECK(&st, r.status == KF_CUDA_BUILD_FAILED && !r.cached, "failed build again, not a hit");
    kf_cuda_build_res_free(&r);
    setenv("KFARM_NVCC", "/nonexistent/nvcc", 1);
    char good2[700];
    write_src("good2.cu", "#include \"kf_abi.h\"\nextern \"C\" int kf_entry(const kf_call *c){ return 0; }\n", good2,
              sizeof(good2));
    build(good2, "sm_80", cache, 0, NULL, NULL, &r);
    CHECK(&st, r.status == KF_CUDA_BUILD_INFRA && strstr(r.detail, "nvcc not found"), "missing nvcc is infra: %s",
          r.detail);
    kf_cuda_build_res_free(&r);
    unsetenv("KFARM_NVCC");
    build(good2, "sm_80", cache, 0, NULL, NULL, &r);
    CHECK(&st, r.status == KF_CUDA_BUILD_OK && !r.cached, "after the fix: built, not a hit (%s)", r.detail);
    kf_cuda_build_res_free(&r);
    build(good2, "sm_80", cache, 0, NULL, NULL, &r);
    CHECK(&st, r.cached, "then cached");
    kf_cuda_build_res_free(&r);

    const char *bn[] = {"X"}, *bv[] = {"1 -Xcompiler -evil"};
    build(good, "sm_80", cache, 1, bn, bv, &r);
    CHECK(&st, r.status == KF_CUDA_BUILD_FAILED && strstr(r.detail, "invalid define"), "define validated: %s", r.detail);
    kf_cuda_build_res_free(&r);

    kf_util_rmtree(scratch);
    return kf_test_done(&st);
}
