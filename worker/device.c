/*
 * device.c -- CPU discovery from /proc and /sys. See device.h.
 *
 * Everything is read as text with small parsers; a missing file leaves a
 * field at zero rather than failing, because containers hide parts of /sys.
 */
#define _GNU_SOURCE
#include "device.h"
#include "kf_util.h"
#include "kfarm.pb-c.h"
#ifdef KFARM_HAVE_CUDA
#include "kf_cuda.h"
#endif

#include <ctype.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

uint64_t kf_device_parse_size(const char *s)
{
    if (!s) return 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) return 0;
    while (*end == ' ') end++;
    switch (toupper((unsigned char)*end)) {
    case 'K': return v << 10;
    case 'M': return v << 20;
    case 'G': return v << 30;
    case 0: case '\n': return v;
    }
    return 0;
}

/* Value after "key<spaces>: " on a line of cpuinfo, into out. */
static int cpuinfo_field(const char *text, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key);
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        if (!strncmp(line, key, kl) && (line[kl] == ' ' || line[kl] == '\t' || line[kl] == ':')) {
            const char *c = strchr(line, ':');
            if (c && (!nl || c < nl)) {
                c++;
                while (*c == ' ' || *c == '\t') c++;
                size_t l = nl ? (size_t)(nl - c) : strlen(c);
                if (l >= cap) l = cap - 1;
                memcpy(out, c, l);
                out[l] = 0;
                return 0;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return -1;
}

static int has_flag(const char *flags, const char *f)
{
    size_t fl = strlen(f);
    for (const char *p = flags; (p = strstr(p, f)); p += fl)
        if ((p == flags || p[-1] == ' ') && (p[fl] == ' ' || p[fl] == 0)) return 1;
    return 0;
}

void kf_device_parse_cpuinfo(const char *text, kf_device *d)
{
    char buf[4096];
    if (cpuinfo_field(text, "model name", buf, sizeof(buf)) == 0 ||
        cpuinfo_field(text, "Model Name", buf, sizeof(buf)) == 0 ||
        cpuinfo_field(text, "Hardware", buf, sizeof(buf)) == 0)
        snprintf(d->name, sizeof(d->name), "%.127s", buf);
    if (cpuinfo_field(text, "cpu MHz", buf, sizeof(buf)) == 0 && d->clock_mhz == 0)
        d->clock_mhz = atof(buf);
    /* x86 "flags", arm64 "Features" */
    if (cpuinfo_field(text, "flags", buf, sizeof(buf)) != 0 &&
        cpuinfo_field(text, "Features", buf, sizeof(buf)) != 0)
        return;
    static const char *const interesting[] = {
        "sse2", "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw",
        "avx512vl", "avx512dq", "avx512_bf16", "avx512_fp16", "avx512_vnni", "avx_vnni",
        "amx_tile", "amx_bf16", "amx_int8", "asimd", "asimdhp", "sve", "sve2", "bf16", "i8mm",
    };
    d->features[0] = 0;
    for (size_t i = 0; i < sizeof(interesting) / sizeof(interesting[0]); i++) {
        if (!has_flag(buf, interesting[i])) continue;
        size_t l = strlen(d->features);
        snprintf(d->features + l, sizeof(d->features) - l, "%s%s", l ? " " : "", interesting[i]);
    }
}

uint64_t kf_device_llc_bytes(void)
{
    uint64_t best = 0;
    int best_level = -1;
    for (int i = 0; i < 16; i++) {
        char p[128];
        snprintf(p, sizeof(p), "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        char *lv = kf_util_read_file(p, NULL, 64);
        if (!lv) break;
        int level = atoi(lv);
        free(lv);
        snprintf(p, sizeof(p), "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        char *ty = kf_util_read_file(p, NULL, 64);
        int instr = ty && !strncmp(ty, "Instruction", 11);
        free(ty);
        if (instr) continue;
        snprintf(p, sizeof(p), "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        char *sz = kf_util_read_file(p, NULL, 64);
        uint64_t b = kf_device_parse_size(sz);
        free(sz);
        if (level > best_level && b > 0) {
            best_level = level;
            best = b;
        }
    }
    return best;
}

int kf_device_discover_cpu(kf_device *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof(*d));
    snprintf(d->backend, sizeof(d->backend), "cpu");
    struct utsname u;
    if (uname(&u) == 0) snprintf(d->arch, sizeof(d->arch), "%.31s", u.machine);
    /* cores this process may use (containers and taskset restrict it) */
    cpu_set_t set;
    long n = 0;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) n = CPU_COUNT(&set);
    if (n <= 0) n = sysconf(_SC_NPROCESSORS_ONLN);
    d->sm_count = n > 0 ? (uint32_t)n : 1;

    char *ci = kf_util_read_file("/proc/cpuinfo", NULL, 16u << 20);
    if (!ci) {
        snprintf(err, errlen, "cannot read /proc/cpuinfo");
        return -1;
    }
    /* cpufreq max wins over the momentary "cpu MHz" */
    char *mx = kf_util_read_file("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", NULL, 64);
    if (mx) {
        d->clock_mhz = atof(mx) / 1000.0;
        free(mx);
    }
    kf_device_parse_cpuinfo(ci, d);
    free(ci);
    if (!d->name[0]) snprintf(d->name, sizeof(d->name), "%s CPU", d->arch);

    char *mi = kf_util_read_file("/proc/meminfo", NULL, 1 << 20);
    if (mi) {
        char v[64];
        if (cpuinfo_field(mi, "MemTotal", v, sizeof(v)) == 0)
            d->memory_bytes = (uint64_t)strtoull(v, NULL, 10) * 1024; /* "kB" */
        free(mi);
    }
    d->l2_bytes = kf_device_llc_bytes();

    double fpc = 0; /* fp32 FLOP per cycle per core: 2 FMA pipes x lanes x 2 */
    if (has_flag(d->features, "avx512f")) fpc = 64;
    else if (has_flag(d->features, "avx2") && has_flag(d->features, "fma")) fpc = 32;
    else if (has_flag(d->features, "avx")) fpc = 16;
    else if (has_flag(d->features, "sse2") || has_flag(d->features, "asimd")) fpc = 8;
    d->peak_gflops_f32 = fpc * d->clock_mhz * 1e-3 * d->sm_count;
    if (has_flag(d->features, "avx512_bf16") || has_flag(d->features, "amx_bf16") ||
        has_flag(d->features, "bf16"))
        d->peak_gflops_bf16 = 2 * d->peak_gflops_f32;
    return 0;
}

static void add_class(char classes[][128], int max, int *n, const char *c)
{
    if (!c || !*c || *n >= max) return;
    for (int i = 0; i < *n; i++)
        if (!strcmp(classes[i], c)) return;
    snprintf(classes[*n], 128, "%s", c);
    (*n)++;
}

int kf_device_discover(kf_device *d, int gpu, char classes[][128], int max_classes, int *n_classes,
                       char *err, size_t errlen)
{
    *n_classes = 0;
#ifdef KFARM_HAVE_CUDA
    kf_cuda_gpu gs[KF_CUDA_MAX_GPUS];
    char cerr[256] = "";
    int ng = gpu >= 0 ? kf_cuda_discover(gs, KF_CUDA_MAX_GPUS, cerr, sizeof(cerr)) : 0;
    if (gpu >= 0 && ng > 0 && gpu >= ng) {
        snprintf(err, errlen, "GPU %d requested but only %d visible", gpu, ng);
        return -1;
    }
    const kf_cuda_gpu *g = ng > 0 ? &gs[gpu] : NULL;
    if (ng > 0) {
        memset(d, 0, sizeof(*d));
        snprintf(d->backend, sizeof(d->backend), "cuda");
        snprintf(d->name, sizeof(d->name), "%s", g->name);
        snprintf(d->arch, sizeof(d->arch), "%s", g->arch);
        d->sm_count = (uint32_t)g->sm_count;
        d->memory_bytes = g->memory_bytes;
        d->bandwidth_gbs = g->peak_gbs;
        d->clock_mhz = g->sm_clock_mhz;
        d->l2_bytes = g->l2_bytes;
        snprintf(d->features, sizeof(d->features), "cc %d.%d driver %s", g->cc_major, g->cc_minor,
                 g->driver);
        d->peak_gflops_f32 = g->peak_gflops_f32;
        d->peak_gflops_bf16 = g->peak_gflops_bf16;
        add_class(classes, max_classes, n_classes, "cuda");
        add_class(classes, max_classes, n_classes, d->arch);
        add_class(classes, max_classes, n_classes, d->name);
        return 0;
    }
#else
    (void)gpu;
#endif
    if (kf_device_discover_cpu(d, err, errlen) != 0) return -1;
    add_class(classes, max_classes, n_classes, "cpu");
    add_class(classes, max_classes, n_classes, d->name);
    return 0;
}

void kf_device_to_proto(const kf_device *d, struct Kfarm__Device *out)
{
    out->name = (char *)d->name;
    out->arch = (char *)d->arch;
    out->has_sm_count = 1;
    out->sm_count = d->sm_count;
    out->has_memory_bytes = d->memory_bytes > 0;
    out->memory_bytes = d->memory_bytes;
    out->has_bandwidth_gbs = d->bandwidth_gbs > 0;
    out->bandwidth_gbs = d->bandwidth_gbs;
    out->has_clock_mhz = d->clock_mhz > 0;
    out->clock_mhz = d->clock_mhz;
    out->has_l2_bytes = d->l2_bytes > 0;
    out->l2_bytes = d->l2_bytes;
    out->features = (char *)d->features;
    out->has_peak_gflops_f32 = d->peak_gflops_f32 > 0;
    out->peak_gflops_f32 = d->peak_gflops_f32;
    out->has_peak_gflops_bf16 = d->peak_gflops_bf16 > 0;
    out->peak_gflops_bf16 = d->peak_gflops_bf16;
}
