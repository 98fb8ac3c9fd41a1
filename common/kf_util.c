/* kf_util.c -- file, hashing and clock helpers. See kf_util.h. */
#include "kf_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

char *kf_util_read_file(const char *path, size_t *len, size_t max_bytes)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        fclose(f);
        errno = ENOMEM;
        return NULL;
    }
    for (;;) {
        if (n == cap) {
            if (cap >= max_bytes) {
                free(buf);
                fclose(f);
                errno = EFBIG;
                return NULL;
            }
            cap *= 2;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                fclose(f);
                errno = ENOMEM;
                return NULL;
            }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad || n > max_bytes) {
        free(buf);
        errno = bad ? EIO : EFBIG;
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

int kf_util_write_file(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return close(fd);
}

int kf_util_mkdirs(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) < 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(buf, 0755) < 0 && errno != EEXIST) return -1;
    return 0;
}

void kf_util_rmtree(const char *path)
{
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    struct dirent *e;
    char sub[4096];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
        struct stat st;
        if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
            kf_util_rmtree(sub);
        else
            unlink(sub);
    }
    closedir(d);
    rmdir(path);
}

void kf_util_sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[32];
    unsigned int mdlen = 0;
    EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
    out[64] = 0;
}

double kf_util_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int kf_strbuf_reserve(kf_strbuf *b, size_t n)
{
    if (b->oom) return -1;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = 1;
            return -1;
        }
        b->s = p;
        b->cap = cap;
    }
    return 0;
}

void kf_strbuf_addn(kf_strbuf *b, const char *s, size_t n)
{
    if (b->oom || !s || kf_strbuf_reserve(b, n) < 0) return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void kf_strbuf_add(kf_strbuf *b, const char *s)
{
    if (s) kf_strbuf_addn(b, s, strlen(s));
}

void kf_strbuf_printf(kf_strbuf *b, const char *fmt, ...)
{
    char tmp[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0) return;
    kf_strbuf_addn(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

size_t kf_util_utf8_sanitize(char *buf, size_t len)
{
    size_t bad = 0;
    unsigned char *p = (unsigned char *)buf;
    for (size_t i = 0; i < len;) {
        unsigned c = p[i];
        size_t n = c < 0x80 ? 1 : (c >= 0xc2 && c <= 0xdf) ? 2 : (c >= 0xe0 && c <= 0xef) ? 3
                 : (c >= 0xf0 && c <= 0xf4) ? 4 : 0;
        int ok = n > 0 && i + n <= len && c != 0;
        for (size_t k = 1; ok && k < n; k++) ok = (p[i + k] & 0xc0) == 0x80;
        if (ok && n == 3) {
            if (c == 0xe0 && p[i + 1] < 0xa0) ok = 0;            /* overlong */
            if (c == 0xed && p[i + 1] >= 0xa0) ok = 0;           /* surrogate */
        }
        if (ok && n == 4) {
            if (c == 0xf0 && p[i + 1] < 0x90) ok = 0;            /* overlong */
            if (c == 0xf4 && p[i + 1] >= 0x90) ok = 0;           /* above U+10FFFF */
        }
        if (!ok) {
            p[i++] = '?';
            bad++;
            continue;
        }
        i += n;
    }
    return bad;
}
