/*
 * kf_util.h -- small helpers shared by every binary (prefix kf_util_).
 */
#ifndef KF_UTIL_H
#define KF_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Read a whole file into a NUL-terminated malloc'ed buffer (len optional).
 * Returns NULL with errno set on failure. max_bytes caps the size (ENOSPC-like
 * EFBIG if larger). */
char *kf_util_read_file(const char *path, size_t *len, size_t max_bytes);

/* Write len bytes to path (created 0644, truncated). 0 or -1 with errno. */
int kf_util_write_file(const char *path, const void *data, size_t len);

/* mkdir -p with mode 0755. 0 or -1 with errno. */
int kf_util_mkdirs(const char *path);

/* Remove a directory tree (best effort). */
void kf_util_rmtree(const char *path);

/* SHA-256 of data as 64 lowercase hex chars + NUL. */
void kf_util_sha256_hex(const void *data, size_t len, char out[65]);

/* Monotonic clock in seconds. */
double kf_util_now_s(void);

/* Replace every byte of buf[0..len) that is not part of a valid UTF-8
 * sequence (RFC 3629: no overlongs, no surrogates, at most U+10FFFF) and
 * every NUL with '?', in place, so untrusted text (a candidate's output, a
 * compile log) can always go into JSON. Returns the number replaced. */
size_t kf_util_utf8_sanitize(char *buf, size_t len);

/* A growable NUL-terminated string (zero-initialize to start: {0}). An
 * allocation failure sets oom, after which appends are ignored; the owner
 * checks oom once at the end and frees s. */
typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} kf_strbuf;

/* Append n bytes of s (NULL is ignored). */
void kf_strbuf_addn(kf_strbuf *b, const char *s, size_t n);
/* Append the string s (NULL is ignored). */
void kf_strbuf_add(kf_strbuf *b, const char *s);
/* Make room for n more bytes and the NUL after them, so that a caller may
 * write b->s[b->len .. b->len + n) directly and then set b->len. Returns 0,
 * or -1 (oom set). */
int kf_strbuf_reserve(kf_strbuf *b, size_t n);
/* Append printf-style text; output longer than 2 KiB is cut there. */
void kf_strbuf_printf(kf_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
