/* kf_tune.c -- parse and enumerate `// kfarm:tune` declarations. See kf_tune.h. */
#include "kf_tune.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

int kf_tune_valid_name(const char *s)
{
    if (!s || !*s || !(isalpha((unsigned char)*s) || *s == '_')) return 0;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_')) return 0;
    return 1;
}

int kf_tune_valid_value(const char *s)
{
    if (!s || !*s) return 0;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || strchr("_.-+", *s))) return 0;
    return 1;
}

int kf_tune_parse(const char *src, kf_tunable *t, int max, int *n, char *err, size_t errlen)
{
    static const char tag[] = "kfarm:tune";
    *n = 0;
    int line = 1;
    for (const char *p = src; *p; line++) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *q = p;
        while (q < p + len && isspace((unsigned char)*q)) q++;
        if (len - (size_t)(q - p) >= 2 && q[0] == '/' && q[1] == '/') {
            q += 2;
            while (q < p + len && isspace((unsigned char)*q)) q++;
            if ((size_t)(p + len - q) >= sizeof(tag) - 1 && !strncmp(q, tag, sizeof(tag) - 1)) {
                q += sizeof(tag) - 1;
                char buf[1024];
                size_t bl = (size_t)(p + len - q);
                if (bl >= sizeof(buf)) {
                    snprintf(err, errlen, "line %d: kfarm:tune declaration too long", line);
                    return -1;
                }
                memcpy(buf, q, bl);
                buf[bl] = 0;
                char *s = buf;
                while (isspace((unsigned char)*s)) s++;
                char *eq = strchr(s, '=');
                if (!eq) {
                    snprintf(err, errlen, "line %d: expected 'kfarm:tune NAME=v1,v2,...'", line);
                    return -1;
                }
                *eq = 0;
                char *name = s, *e = eq - 1;
                while (e >= name && isspace((unsigned char)*e)) *e-- = 0;
                if (!kf_tune_valid_name(name) || strlen(name) >= sizeof(t[0].name)) {
                    snprintf(err, errlen, "line %d: invalid tunable name '%s'", line, name);
                    return -1;
                }
                for (int i = 0; i < *n; i++)
                    if (!strcmp(t[i].name, name)) {
                        snprintf(err, errlen, "line %d: tunable %s declared twice", line, name);
                        return -1;
                    }
                if (*n >= max) {
                    snprintf(err, errlen, "line %d: more than %d tunables", line, max);
                    return -1;
                }
                kf_tunable *cur = &t[*n];
                memset(cur, 0, sizeof(*cur));
                memcpy(cur->name, name, strlen(name) + 1);
                char *save = NULL;
                for (char *v = strtok_r(eq + 1, ",", &save); v; v = strtok_r(NULL, ",", &save)) {
                    while (isspace((unsigned char)*v)) v++;
                    char *ve = v + strlen(v);
                    while (ve > v && isspace((unsigned char)ve[-1])) *--ve = 0;
                    if (!kf_tune_valid_value(v) || strlen(v) >= sizeof(cur->values[0])) {
                        snprintf(err, errlen, "line %d: invalid value '%s' for %s", line, v, name);
                        return -1;
                    }
                    if (cur->n >= KF_TUNE_MAX_VALUES) {
                        snprintf(err, errlen, "line %d: more than %d values for %s", line,
                                 KF_TUNE_MAX_VALUES, name);
                        return -1;
                    }
                    for (int i = 0; i < cur->n; i++)
                        if (!strcmp(cur->values[i], v)) {
                            snprintf(err, errlen, "line %d: value %s repeated for %s", line, v, name);
                            return -1;
                        }
                    memcpy(cur->values[cur->n++], v, strlen(v) + 1);
                }
                if (cur->n == 0) {
                    snprintf(err, errlen, "line %d: no values for %s", line, name);
                    return -1;
                }
                (*n)++;
            }
        }
        if (!eol) break;
        p = eol + 1;
    }
    return 0;
}

long kf_tune_count(const kf_tunable *t, int n)
{
    long c = 1;
    for (int i = 0; i < n; i++) c *= t[i].n;
    return c;
}

void kf_tune_variant(const kf_tunable *t, int n, long i, const char *values[])
{
    for (int k = n - 1; k >= 0; k--) {
        values[k] = t[k].values[i % t[k].n];
        i /= t[k].n;
    }
}
