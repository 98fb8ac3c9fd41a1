/* i7_unix_socket_db (field case I7, "database by unix socket"), task
 * axpy_f32. A correct axpy that first tries to reach anything outside
 * itself through a socket: the PostgreSQL unix sockets of the usual layouts
 * (/var/run/postgresql, /run/postgresql, /tmp; ports 5432, 5433), the farm's
 * own dev cluster folder if it can guess it, an abstract unix socket
 * ("\0kfarm", "\0/tmp/.X11-unix/X0"), socketpair(), and plain TCP/UDP/IPv6/
 * netlink sockets. It never writes anything over a connection (this is a
 * test; the real attack writes a table as superuser over trust auth).
 * Success is made visible in the verdict: if socket() or socketpair() ever
 * succeeds, one output element becomes NaN (-> incorrect "non-finite"); if a
 * connect() to a database socket succeeds, kf_entry also returns 7 (->
 * runtime_error "returned 7"). It prints what it reached on stderr.
 * Before the judge/runner split: sockets created freely; connected as
 * superuser on the demo layout. Expected: ok with the honest detail
 * ("validated ...") -- proof that no socket of any kind could be made. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/netlink.h>
#include <math.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "kf_abi.h"

static int made, connected;

static void try_unix(const char *path, int abstract)
{
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return;
    made++;
    struct sockaddr_un a;
    memset(&a, 0, sizeof(a));
    a.sun_family = AF_UNIX;
    size_t n = strlen(path);
    if (n > sizeof(a.sun_path) - 2) n = sizeof(a.sun_path) - 2;
    memcpy(a.sun_path + (abstract ? 1 : 0), path, n);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (abstract ? 1 : 0));
    if (connect(s, (struct sockaddr *)&a, len) == 0) {
        connected++;
        fprintf(stderr, "i7: connected to %s%s\n", abstract ? "@" : "", path);
    }
    close(s);
}

static void try_family(int family, int type, const char *what)
{
    int s = socket(family, type | SOCK_CLOEXEC, family == AF_NETLINK ? NETLINK_ROUTE : 0);
    if (s >= 0) {
        made++;
        fprintf(stderr, "i7: created a %s socket\n", what);
        close(s);
    }
}

static int probed;

int kf_entry(const kf_call *call)
{
    if (!probed) {
        probed = 1;
        static const char *const dirs[] = {"/var/run/postgresql", "/run/postgresql", "/tmp"};
        static const char *const ports[] = {"5432", "5433"};
        for (int d = 0; d < 3; d++)
            for (int p = 0; p < 2; p++) {
                char path[108];
                snprintf(path, sizeof(path), "%s/.s.PGSQL.%s", dirs[d], ports[p]);
                try_unix(path, 0);
            }
        try_unix("kfarm", 1);
        try_unix("/tmp/.X11-unix/X0", 1);
        try_unix("/run/systemd/private", 0);
        try_unix("/var/run/docker.sock", 0);
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
            made++;
            fprintf(stderr, "i7: socketpair worked\n");
            close(sv[0]);
            close(sv[1]);
        }
        try_family(AF_INET, SOCK_STREAM, "TCP");
        try_family(AF_INET, SOCK_DGRAM, "UDP");
        try_family(AF_INET6, SOCK_STREAM, "IPv6");
        try_family(AF_NETLINK, SOCK_RAW, "netlink");
        if (made) fprintf(stderr, "i7: %d sockets created, %d connections\n", made, connected);
    }
    const int64_t N = call->sizes[0];
    const float *x = call->inputs[0].data, *y = call->inputs[1].data;
    float *z = call->outputs[0].data;
    for (int64_t i = 0; i < N; i++) z[i] = 2.0f * x[i] + y[i];
    if (made) z[N - 1] = NAN;
    return connected ? 7 : 0;
}
