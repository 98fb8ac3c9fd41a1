/*
 * test_device.c -- worker/device.c: cpuinfo/sysfs parsers on fixed text, and
 * discovery on this machine (fields a registration needs are filled).
 */
#include <stdio.h>
#include <string.h>

#include "device.h"
#include "kf_test.h"

static const char *x86 =
    "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13 64-Core Processor\n"
    "cpu MHz\t\t: 2450.000\nflags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw avx512_bf16 sse4_2\n\n"
    "processor\t: 1\nmodel name\t: AMD EPYC 7B13 64-Core Processor\n";
static const char *arm =
    "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 sve bf16\n";

int main(void)
{
    kf_test_state st = {0, 0};
    kf_device d;
    memset(&d, 0, sizeof(d));
    kf_device_parse_cpuinfo(x86, &d);
    CHECK(&st, !strcmp(d.name, "AMD EPYC 7B13 64-Core Processor"), "name '%s'", d.name);
    CHECK(&st, d.clock_mhz == 2450.0, "clock %g", d.clock_mhz);
    CHECK(&st, !strcmp(d.features, "sse2 sse4_2 avx avx2 fma avx512f avx512bw avx512_bf16"), "features '%s'",
          d.features);
    memset(&d, 0, sizeof(d));
    kf_device_parse_cpuinfo(arm, &d);
    CHECK(&st, strstr(d.features, "asimd") && strstr(d.features, "sve") && strstr(d.features, "bf16"),
          "arm features '%s'", d.features);
    CHECK(&st, !strstr(d.features, "sve2"), "no sve2 from 'sve': '%s'", d.features);

    CHECK(&st, kf_device_parse_size("32768K") == 32768ull << 10, "32768K");
    CHECK(&st, kf_device_parse_size("1M\n") == 1ull << 20, "1M");
    CHECK(&st, kf_device_parse_size("512") == 512, "512");
    CHECK(&st, kf_device_parse_size("x") == 0, "garbage");

    char err[256] = "";
    CHECK(&st, kf_device_discover_cpu(&d, err, sizeof(err)) == 0, "discover: %s", err);
    CHECK(&st, d.name[0] && d.arch[0] && d.sm_count >= 1 && d.memory_bytes > 0, "name '%s' arch '%s' cores %u mem %llu",
          d.name, d.arch, d.sm_count, (unsigned long long)d.memory_bytes);
    CHECK(&st, !strcmp(d.backend, "cpu"), "backend '%s'", d.backend);
    char classes[8][128];
    int n = 0;
    kf_device d2;
    CHECK(&st, kf_device_discover(&d2, -1, classes, 8, &n, err, sizeof(err)) == 0 && n >= 1, "discover classes: %s", err);
    if (!strcmp(d2.backend, "cpu")) CHECK(&st, n >= 1 && !strcmp(classes[0], "cpu"), "first class '%s'", classes[0]);
    printf("device: %s, %s, %u cores, %.0f MHz, %llu MiB, LLC %llu KiB, [%s], peak f32 %.0f GFLOP/s\n", d.name, d.arch,
           d.sm_count, d.clock_mhz, (unsigned long long)(d.memory_bytes >> 20), (unsigned long long)(d.l2_bytes >> 10),
           d.features, d.peak_gflops_f32);
    return kf_test_done(&st);
}
