/*
 * cmd_worker.c -- `kfarm worker add|revoke|list`: worker identities.
 *
 * Design. Each worker speaks with its own credential (proto/kf_wire.h): a
 * name and a 32-byte random secret, printed once (or written to a 0600
 * file) by `kfarm worker add NAME`. The database keeps only the HKDF-derived
 * key (worker_credentials.mac_key), never the secret; losing the file means
 * issuing a new credential (`kfarm worker add NAME --rotate`). `revoke`
 * refuses every later message of that identity at once.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "kf_wire.h"
#include "kfarm_cli.h"
#include "server.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kfarm worker add NAME [--out FILE] [--rotate] [--db CONNINFO]\n"
               "       kfarm worker revoke NAME\n"
               "       kfarm worker list\n"
               "       kfarm worker release|quarantine NAME   (see kfarm workers --help)\n\n"
               "add: issue worker NAME its credential (a random secret): printed, or\n"
               "     written to FILE (mode 0600; the file must not exist). Give it to\n"
               "     the worker as `kfarm-worker run --credential FILE`. --rotate issues\n"
               "     a new secret for an existing NAME (the old one stops working).\n"
               "revoke: every later message from NAME is refused.\n"
               "list: enrolled identities, revocation and the live instance.\n");
}

static int write_new_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    size_t n = strlen(text);
    ssize_t w = write(fd, text, n);
    int rc = (w == (ssize_t)n && fsync(fd) == 0) ? 0 : -1;
    if (close(fd) < 0) rc = -1;
    if (rc < 0) unlink(path);
    return rc;
}

static int cmd_add(kf_db *db, const char *name, const char *out, int rotate)
{
    char err[1024];
    int applied;
    if (kf_db_migrate(db, &applied, err, sizeof(err)) < 0) return kf_cli_fail("%s", err);
    if (!kf_cred_name_ok(name))
        return kf_cli_fail("bad worker name '%s' (1..%d of A-Z a-z 0-9 . _ -)", name, KF_WIRE_ID_MAX);
    uint8_t secret[KF_WIRE_SECRET_LEN];
    char hex[2 * KF_WIRE_SECRET_LEN + 1], text[512], khex[2 * KF_WIRE_KEY_LEN + 1];
    kf_wire_key k;
    if (kf_cred_new_secret(secret, hex) < 0) return kf_cli_fail("no random source");
    int rc = kf_cred_derive(name, secret, sizeof(secret), &k, err, sizeof(err));
    OPENSSL_cleanse(secret, sizeof(secret));
    if (rc < 0) return kf_cli_fail("%s", err);
    kf_wire_hex(k.k, KF_WIRE_KEY_LEN, khex);
    OPENSSL_cleanse(&k, sizeof(k));
    kf_cred_format(name, hex, text, sizeof(text));
    OPENSSL_cleanse(hex, sizeof(hex));
    int n = kf_server_cred_store(db, name, khex, rotate, err, sizeof(err));
    OPENSSL_cleanse(khex, sizeof(khex));
    if (n < 0) {
        OPENSSL_cleanse(text, sizeof(text));
        return kf_cli_fail("%s", err);
    }
    if (n == 0) {
        OPENSSL_cleanse(text, sizeof(text));
        return kf_cli_fail("worker %s already has a credential (use --rotate to issue a new one, "
                           "or kfarm worker revoke %s)", name, name);
    }
    if (out) {
        if (write_new_file(out, text) < 0) {
            int e = errno;
            OPENSSL_cleanse(text, sizeof(text));
            /* the key is stored but nobody holds the secret: remove it again */
            kf_server_cred_forget(db, name, err, sizeof(err));
            return kf_cli_fail("cannot write %s: %s (nothing issued)", out, strerror(e));
        }
        fprintf(stderr, "kfarm: credential of worker %s written to %s (keep it secret; start the "
                        "worker with --credential %s)\n", name, out, out);
    } else {
        fputs(text, stdout);
    }
    OPENSSL_cleanse(text, sizeof(text));
    return 0;
}

int kf_cli_cmd_worker(int argc, char **argv)
{
    static const struct option opts[] = {
        { "db", required_argument, NULL, 'd' }, { "out", required_argument, NULL, 'o' },
        { "rotate", no_argument, NULL, 'r' }, { "help", no_argument, NULL, 'h' }, { 0 } };
    const char *conninfo = NULL, *out = NULL;
    int rotate = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        if (c == 'd') conninfo = optarg;
        else if (c == 'o') out = optarg;
        else if (c == 'r') rotate = 1;
        else if (c == 'h') return usage(stdout), 0;
        else return usage(stderr), 2;
    }
    const char *sub = optind < argc ? argv[optind] : NULL;
    if (sub && (!strcmp(sub, "release") || !strcmp(sub, "quarantine")))
        return kf_cli_cmd_workers(argc, argv); /* cmd_workers.c: the quarantine */
    if (!sub) return kf_cli_usage_error("worker", "missing subcommand (add, revoke, list, release, quarantine)");
    int list = !strcmp(sub, "list");
    if (strcmp(sub, "add") && strcmp(sub, "revoke") && !list)
        return kf_cli_usage_error("worker", "unknown subcommand '%s'", sub);
    if (!list && optind + 2 != argc) return kf_cli_usage_error("worker", "%s: expected one NAME", sub);
    if (list && optind + 1 != argc) return kf_cli_usage_error("worker", "list takes no argument");
    kf_db *db = kf_cli_connect(conninfo);
    if (!db) return 1;
    char err[1024];
    int rc = 0;
    if (!strcmp(sub, "add")) {
        rc = cmd_add(db, argv[optind + 1], out, rotate);
    } else if (!strcmp(sub, "revoke")) {
        int n = kf_server_cred_revoke(db, argv[optind + 1], err, sizeof(err));
        if (n < 0) rc = kf_cli_fail("%s", err);
        else if (n == 0) rc = kf_cli_fail("no worker credential '%s'", argv[optind + 1]);
        else printf("worker %s revoked: its messages are refused from now on\n", argv[optind + 1]);
    } else {
        PGresult *r = kf_db_exec(db,
            "SELECT name, to_char(created_at, 'YYYY-MM-DD HH24:MI'),"
            " CASE WHEN revoked_at IS NOT NULL THEN 'REVOKED' ELSE 'ok' END,"
            " COALESCE(left(instance_id, 8), '-'), COALESCE(instance_host, '-'),"
            " COALESCE((extract(epoch FROM now() - instance_seen))::int || ' s ago', '-')"
            " FROM worker_credentials ORDER BY name", 0, NULL, err, sizeof(err));
        if (!r) {
            rc = kf_cli_fail("%s", err);
        } else {
            static const char *const hdr[] = { "NAME", "ISSUED", "STATE", "INSTANCE", "HOST", "LAST MESSAGE" };
            kf_cli_table t;
            kf_cli_table_init(&t, 6, hdr);
            for (int i = 0; i < PQntuples(r); i++) {
                const char *row[6];
                for (int k = 0; k < 6; k++) row[k] = kf_db_str(r, i, k);
                kf_cli_table_row(&t, row);
            }
            kf_cli_table_print(&t, stdout, 48);
            PQclear(r);
        }
    }
    kf_db_close(db);
    return rc;
}
