/* test_tune.c -- `// kfarm:tune` parsing and variant enumeration. */
#include <string.h>
#include "kf_test.h"
#include "kf_tune.h"

int main(void)
{
    kf_test_state st = {0};
    kf_tunable t[KF_TUNE_MAX];
    int n;
    char err[256];
    const char *src = "#include <x.h>\n"
                      "// kfarm:tune BM=16,32,64\n"
                      "  //kfarm:tune UNROLL = 1, 2\n"
                      "/* kfarm:tune IGNORED=1 */\n"
                      "int x; // kfarm:tune NOT_AT_LINE_START=1\n";
    CHECK(&st, kf_tune_parse(src, t, KF_TUNE_MAX, &n, err, sizeof(err)) == 0, "parse: %s", err);
    CHECK(&st, n == 2, "n=%d", n);
    CHECK(&st, !strcmp(t[0].name, "BM") && t[0].n == 3 && !strcmp(t[0].values[2], "64"), "BM");
    CHECK(&st, !strcmp(t[1].name, "UNROLL") && t[1].n == 2 && !strcmp(t[1].values[1], "2"), "UNROLL");
    CHECK(&st, kf_tune_count(t, n) == 6, "count");
    const char *v[KF_TUNE_MAX];
    kf_tune_variant(t, n, 0, v);
    CHECK(&st, !strcmp(v[0], "16") && !strcmp(v[1], "1"), "variant 0");
    kf_tune_variant(t, n, 3, v);
    CHECK(&st, !strcmp(v[0], "32") && !strcmp(v[1], "2"), "variant 3 = %s,%s", v[0], v[1]);
    kf_tune_variant(t, n, 5, v);
    CHECK(&st, !strcmp(v[0], "64") && !strcmp(v[1], "2"), "variant 5");

    /* No declarations: one variant (the source as is). */
    CHECK(&st, kf_tune_parse("int main;", t, KF_TUNE_MAX, &n, err, sizeof(err)) == 0 && n == 0, "none");
    CHECK(&st, kf_tune_count(t, 0) == 1, "count none");

    /* Hostile or malformed declarations are refused with the line number. */
    const char *bad[] = {
        "// kfarm:tune BM=1 -fplugin=evil.so\n",
        "// kfarm:tune BM=1;rm\n",
        "// kfarm:tune 9X=1\n",
        "// kfarm:tune BM\n",
        "// kfarm:tune BM=\n",
        "// kfarm:tune BM=1\n// kfarm:tune BM=2\n",
        "// kfarm:tune BM=1,1\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = 0;
        CHECK(&st, kf_tune_parse(bad[i], t, KF_TUNE_MAX, &n, err, sizeof(err)) == -1, "bad %zu accepted", i);
        CHECK(&st, strstr(err, "line ") != NULL, "bad %zu: no line in '%s'", i, err);
    }
    CHECK(&st, kf_tune_valid_value("1.5e-3") && !kf_tune_valid_value("a b") && !kf_tune_valid_value("$(x)"),
          "value tokens");
    return kf_test_done(&st);
}
