/*
 * cmd_campaign.c -- `kfarm campaign create|start|pause|status|list|wait`.
 *
 * create validates the task directory, has the task checked by
 * `kfarm-worker check-task` (beside this binary: the baseline and the seed
 * must pass validation against the reference, the largest shape must fit;
 * --no-task-check skips it, e.g. on a coordinator that cannot run the task's
 * backend), and stores task, campaign and seed (campaign.h); start/pause flip the state (the running coordinator notices
 * within a second and runs the strategy); status prints coordinator/status.c's
 * report, from a running coordinator's operator socket when one is named
 * (operator.h) and otherwise from the database; list summarizes from the
 * database; wait polls until the campaign is done (for scripts).
 */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <string.h>
#include <unistd.h>
#include <jansson.h>

#include "campaign.h"
#include "health.h"
#include "kf_util.h"
#include "kfarm_cli.h"
#include "operator.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: kfarm campaign create NAME --task DIR [--strategy tune] [--target CLASS]...\n"
        "                             [--max-candidates N] [--seed FILE] [--max-attempts N]\n"
        "                             [--config FILE] [--no-task-check] [--share X]\n"
        "       kfarm campaign start NAME\n"
        "       kfarm campaign pause NAME\n"
        "       kfarm campaign status NAME [--json] [--operator-socket PATH]\n"
        "       kfarm campaign list [--json] [--wide]\n"
        "       kfarm campaign extend NAME [--max-candidates N] [--max-rounds N]\n"
        "                             [--max-hours H] [--max-tokens N] [--share X]\n"
        "       kfarm campaign delete NAME\n"
        "       kfarm campaign wait NAME [--timeout S] [--blocked-after S] [--quiet]\n"
        "\n"
        "All take --db CONNINFO (default $KFARM_DB).\n"
        "  --task DIR          task directory (task.json, reference, baseline, seed)\n"
        "  --strategy S        search strategy (tune: sweep the seed's // kfarm:tune values)\n"
        "  --target CLASS      routing class to evaluate on, repeatable (cpu, sm_90, ...;\n"
        "                      default cpu for cpu tasks)\n"
        "  --max-candidates N  candidate budget (tune: an even sample of the variants;\n"
        "                      default: all of them, at most 100000)\n"
        "  --seed FILE         seed candidate (default: the task's seed file)\n"
        "  --max-attempts N    leases per job before it ends as a verdict (default 3)\n"
        "  --config FILE       campaign file (JSON): strategy, LLM endpoint, budgets, review\n"
        "  extend              raise budgets (never lowers them); a done campaign runs\n"
        "                      again (tune adds the larger sample's untried variants)\n"
        "  --share X           the campaign's share of the workers while several run\n"
        "                      (default 1: equal shares; 2 gets twice the leases of 1)\n"
        "  delete              remove a campaign that is not running, with everything\n"
        "                      it evaluated (the task stays)\n"
        "  --no-task-check     create: do not run `kfarm-worker check-task` on the task first\n"
        "                      (docs/campaign-config.md); command-line options win\n"
        "  --timeout S         wait: give up after S seconds (exit 1)\n"
        "  --blocked-after S   wait: exit 3 once the campaign has been blocked (no live\n"
        "                      worker, model errors, ...) for S seconds (default 60);\n"
        "                      a paused campaign exits 3 at once\n"
        "  --quiet             wait: no progress lines on stderr\n"
        "  --operator-socket PATH\n"
        "                      status: ask the coordinator started with this\n"
        "                      --operator-socket (default $KFARM_OPERATOR_SOCKET), which\n"
        "                      answers from its warm connection for the same database;\n"
        "                      otherwise (none listens, another database or build) the\n"
        "                      database is read directly\n"
        "\n"
        "status and wait say why a campaign is not progressing (\"blocked:\" lines).\n"
        "status --json lists at most 100 ties per target (\"ties_more\": true when there\n"
        "are more; kfarm best NAME --json lists them all).\n");
}

/* Run `kfarm-worker check-task DIR [--seed FILE]` (the worker binary beside
 * this one). 0 when the task passed or no worker binary is here (said so),
 * else prints the worker's reason and returns 1. */
static int check_task(const kf_campaign_spec *spec)
{
    char exe[PATH_MAX], worker[PATH_MAX + 16];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) return 0;
    exe[n] = 0;
    snprintf(worker, sizeof(worker), "%s/kfarm-worker", dirname(exe));
    if (access(worker, X_OK) != 0) {
        fprintf(stderr, "kfarm campaign create: %s not found: the task was not checked\n", worker);
        return 0;
    }
    char *argv[7];
    int a = 0;
    argv[a++] = worker;
    argv[a++] = "check-task";
    argv[a++] = (char *)spec->task_dir;
    if (spec->seed_path) {
        argv[a++] = "--seed";
        argv[a++] = (char *)spec->seed_path;
    }
    argv[a] = NULL;
    fflush(NULL);
    pid_t pid;
    extern char **environ;
    int e = posix_spawn(&pid, worker, NULL, NULL, argv, environ);
    if (e) {
        fprintf(stderr, "kfarm campaign create: cannot run %s: %s: the task was not checked\n", worker, strerror(e));
        return 0;
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    /* skipping the check helps only a task that exists and cannot be run
     * here; a folder without task.json is refused by the campaign anyway */
    char tj[PATH_MAX + 16];
    snprintf(tj, sizeof(tj), "%s/task.json", spec->task_dir);
    if (access(tj, R_OK) != 0)
        return kf_cli_fail("campaign not created: no task at %s (a task is a folder with task.json: "
                           "see tasks/)", spec->task_dir);
    return kf_cli_fail("campaign not created: the task %s was refused (see above; --no-task-check skips the check)",
                       spec->task_dir);
}

static int do_create(kf_db *db, const char *name, kf_campaign_spec *spec)
{
    char err[1024];
    int64_t id;
    spec->name = name;
    if (kf_campaign_create(db, spec, &id, err, sizeof(err)) < 0) return kf_cli_fail("%s", err);
    printf("campaign %s created (id %lld); start it with: kfarm campaign start %s\n", name,
           (long long)id, name);
    return 0;
}

static int do_list(kf_db *db)
{
    char err[1024];
    PGresult *r = kf_db_exec(db,
        "SELECT c.name, c.state, t.name AS task,"
        " (SELECT count(*) FROM candidates k WHERE k.campaign_id = c.id)::text AS candidates,"
        /* evaluation jobs done / all: all from job_keys_campaign, less the
         * queued and leased ones from their partial indexes (the job row
         * has no index of a campaign's jobs whatever their state: schema
         * 015); the best from the evaluations' own campaign column
         * (evaluations_ok_target: a stored speedup is > 0 or NULL) */
        " (n.all_jobs - n.open_jobs)::text || '/' || n.all_jobs AS jobs_done,"
        " (SELECT to_char(max(e.speedup), 'FM999990.000') || 'x' FROM evaluations e"
        "    WHERE e.job_campaign_id = c.id AND e.job_purpose = 'eval' AND e.is_final"
        "    AND e.verdict = 'ok' AND e.speedup > 0 AND e.confirmation <> 'disputed') AS best_speedup,"
        " c.strategy, array_to_string(c.targets, ',') AS targets, to_char(c.created_at, 'MM-DD HH24:MI') AS created"
        " FROM campaigns c JOIN tasks t ON t.id = c.task_id"
        " CROSS JOIN LATERAL (SELECT"
        "   (SELECT count(*) FROM job_keys jk WHERE jk.campaign_id = c.id AND jk.verifies IS NULL) AS all_jobs,"
        "   (SELECT count(*) FROM jobs j WHERE j.campaign_id = c.id AND j.state = 'queued' AND j.purpose = 'eval')"
        "   + (SELECT count(*) FROM jobs j WHERE j.campaign_id = c.id AND j.state = 'leased'"
        "      AND j.purpose = 'eval') AS open_jobs) n"
        " ORDER BY c.id",
        0, NULL, err, sizeof(err));
    if (!r) return kf_cli_fail("%s", err);
    if (kf_cli_json) {
        kf_cli_print_json(r, stdout);
        PQclear(r);
        return 0;
    }
    /* the name is never shortened (every other campaign command takes it);
     * strategy, targets and creation time only with --wide */
    static const char *const hdr[] = { "NAME", "STATE", "TASK", "CANDS", "DONE", "BEST",
                                       "STRATEGY", "TARGETS", "CREATED" };
    int nc = kf_cli_wide ? 9 : 6;
    kf_cli_table t;
    kf_cli_table_init(&t, nc, hdr);
    t.right[3] = t.right[4] = t.right[5] = 1;
    t.keep[0] = 1;
    for (int i = 0; i < PQntuples(r); i++) {
        const char *row[9];
        for (int c = 0; c < nc; c++) row[c] = kf_db_str(r, i, c);
        kf_cli_table_row(&t, row);
    }
    if (PQntuples(r) == 0) {
        printf("no campaigns yet (see kfarm campaign create --help)\n");
        kf_cli_table_free(&t);
    } else {
        kf_cli_table_print(&t, stdout, 40);
    }
    PQclear(r);
    return 0;
}

/* "1h02m", "3m05s", "42s" into buf. */
static const char *dur(double s, char *buf, size_t cap)
{
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, cap, "%lds", t);
    return buf;
}

/* The ETA of `campaign wait`'s lines: the estimate made when the count of
 * done jobs last changed, counted down from then. The health estimate is
 * the queued jobs over the rate since the start, which grows while a long
 * job runs and nothing finishes (a newcomer saw the ETA count up). */
typedef struct {
    long long done;
    double eta_s, at_s; /* the estimate, and when it was made (at_s 0: none yet) */
} eta_clock;

/* One progress line: "running: jobs 5/12 done, 2 leased; round 2/5; ETA 1m20s".
 * ec: the countdown across lines (NULL: the estimate as it is). */
static void progress_line(json_t *pg, eta_clock *ec, char *out, size_t cap)
{
    json_t *j = json_object_get(pg, "jobs");
    long long done = json_integer_value(json_object_get(j, "done"));
    long long total = json_integer_value(json_object_get(j, "total"));
    long long leased = json_integer_value(json_object_get(j, "leased"));
    long long round = json_integer_value(json_object_get(pg, "round"));
    long long dead = json_integer_value(json_object_get(pg, "rounds_without_reply"));
    long long maxr = json_integer_value(json_object_get(pg, "max_rounds"));
    double eta = json_number_value(json_object_get(pg, "eta_s"));
    if (ec && eta >= 0) {
        double now = kf_util_now_s();
        if (ec->at_s > 0 && ec->done == done) {
            eta = ec->eta_s - (now - ec->at_s);
            if (eta < 0) eta = 0;
        } else {
            *ec = (eta_clock){ done, eta, now };
        }
    }
    size_t n = (size_t)snprintf(out, cap, "%s: jobs %lld/%lld done, %lld leased",
                                json_string_value(json_object_get(pg, "state")), done, total, leased);
    if (strcmp(json_string_value(json_object_get(pg, "strategy")), "tune") != 0 && n < cap) {
        n += (size_t)snprintf(out + n, cap - n, "; round %lld", round);
        if (maxr > 0 && n < cap) n += (size_t)snprintf(out + n, cap - n, " of %lld", maxr);
        if (dead > 0 && n < cap)
            n += (size_t)snprintf(out + n, cap - n, " (%lld without reply, not counted)", dead);
    }
    char b[32];
    if (eta >= 0 && done < total && n < cap)
        snprintf(out + n, cap - n, "; ETA %s for the queued jobs", dur(eta, b, sizeof(b)));
}

/* Poll until done (0), timeout (1) or blocked for blocked_after s (3). */
static int do_wait(kf_db *db, const char *name, double timeout, double blocked_after, int quiet)
{
    double start = kf_util_now_s(), blocked_since = -1, last_print = 0;
    char state[16] = "", err[1024], last[512] = "";
    eta_clock ec = { 0 };
    int64_t id;
    for (;;) {
        if (kf_db_ensure(db, err, sizeof(err)) == 0) {
            int lrc = kf_campaign_lookup(db, name, &id, state, err, sizeof(err));
            if (lrc == 1) return kf_cli_fail("%s", err);
            if (lrc < 0) {
                /* a database error: tried again on the next poll */
            } else if (strcmp(state, "done") == 0) {
                printf("campaign %s is done\n", name);
                return 0;
            } else {
                json_t *pg = kf_health_progress(db, id, err, sizeof(err));
                json_t *bl = kf_health_blockers(db, id, name, err, sizeof(err));
                double now = kf_util_now_s();
                if (pg && !quiet) {
                    char line[512];
                    progress_line(pg, &ec, line, sizeof(line));
                    if (strcmp(line, last) || now - last_print >= 30) {
                        fprintf(stderr, "kfarm: campaign %s %s\n", name, line);
                        snprintf(last, sizeof(last), "%s", line);
                        last_print = now;
                    }
                }
                if (bl && json_array_size(bl) > 0) {
                    if (blocked_since < 0) blocked_since = now;
                    if (!strcmp(state, "paused") || now - blocked_since >= blocked_after) {
                        size_t i;
                        json_t *b;
                        json_array_foreach(bl, i, b)
                            fprintf(stderr, "kfarm: campaign %s is blocked: [%s] %s\n", name,
                                    json_string_value(json_object_get(b, "kind")),
                                    json_string_value(json_object_get(b, "text")));
                        json_decref(pg);
                        json_decref(bl);
                        return 3;
                    }
                } else if (bl) {
                    blocked_since = -1;
                }
                json_decref(pg);
                json_decref(bl);
            }
        }
        if (timeout > 0 && kf_util_now_s() - start >= timeout)
            return kf_cli_fail("campaign %s not done after %.0f s (state %s)", name, timeout,
                               state[0] ? state : "unknown");
        usleep(500000);
    }
}

int kf_cli_cmd_campaign(int argc, char **argv)
{
    static const struct option opts[] = {
        { "db", required_argument, NULL, 'd' },
        { "task", required_argument, NULL, 't' },
        { "strategy", required_argument, NULL, 's' },
        { "target", required_argument, NULL, 'T' },
        { "max-candidates", required_argument, NULL, 'm' },
        { "seed", required_argument, NULL, 'S' },
        { "max-attempts", required_argument, NULL, 'a' },
        { "timeout", required_argument, NULL, 'w' },
        { "config", required_argument, NULL, 'C' },
        { "no-task-check", no_argument, NULL, 'N' },
        { "blocked-after", required_argument, NULL, 'B' },
        { "quiet", no_argument, NULL, 'q' },
        { "max-rounds", required_argument, NULL, 'R' },
        { "max-hours", required_argument, NULL, 'H' },
        { "max-tokens", required_argument, NULL, 'K' },
        { "share", required_argument, NULL, 'X' },
        { "operator-socket", required_argument, NULL, 'O' },
        { "help", no_argument, NULL, 'h' },
        { 0 },
    };
    kf_campaign_spec spec;
    memset(&spec, 0, sizeof(spec));
    const char *conninfo = NULL, *config_path = NULL, *ops_path = getenv("KFARM_OPERATOR_SOCKET");
    int no_check = 0;
    double timeout = 0, blocked_after = 60;
    kf_campaign_budget budget = { 0, 0, 0, 0 };
    int quiet = 0;
    long v;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': conninfo = optarg; break;
        case 't': spec.task_dir = optarg; break;
        case 's': spec.strategy = optarg; break;
        case 'T':
            if (spec.n_targets == KF_CAMPAIGN_MAX_TARGETS)
                return kf_cli_usage_error("campaign", "too many --target (max %d)",
                                          KF_CAMPAIGN_MAX_TARGETS);
            spec.targets[spec.n_targets++] = optarg;
            break;
        case 'm':
            if (kf_cli_parse_long(optarg, &v) < 0 || v < 1)
                return kf_cli_usage_error("campaign", "--max-candidates: expected a positive number");
            spec.max_candidates = v;
            break;
        case 'S': spec.seed_path = optarg; break;
        case 'a':
            if (kf_cli_parse_long(optarg, &v) < 0 || v < 1 || v > 100)
                return kf_cli_usage_error("campaign", "--max-attempts: expected 1..100");
            spec.max_attempts = (int)v;
            break;
        case 'w':
            if (kf_cli_parse_double(optarg, &timeout) < 0)
                return kf_cli_usage_error("campaign", "--timeout: expected seconds");
            break;
        case 'C': config_path = optarg; break;
        case 'O': ops_path = optarg; break;
        case 'N': no_check = 1; break;
        case 'B':
            if (kf_cli_parse_double(optarg, &blocked_after) < 0)
                return kf_cli_usage_error("campaign", "--blocked-after: expected seconds");
            break;
        case 'q': quiet = 1; break;
        case 'R':
            if (kf_cli_parse_long(optarg, &v) < 0 || v < 1)
                return kf_cli_usage_error("campaign", "--max-rounds: expected a positive number");
            budget.max_rounds = v;
            break;
        case 'H':
            if (kf_cli_parse_double(optarg, &budget.max_hours) < 0 || budget.max_hours <= 0)
                return kf_cli_usage_error("campaign", "--max-hours: expected hours");
            break;
        case 'X':
            if (kf_cli_parse_double(optarg, &spec.share) < 0 || !(spec.share > 0))
                return kf_cli_usage_error("campaign", "--share: expected a number > 0");
            break;
        case 'K':
            if (kf_cli_parse_long(optarg, &v) < 0 || v < 1)
                return kf_cli_usage_error("campaign", "--max-tokens: expected a positive number");
            budget.max_tokens = v;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind >= argc)
        return kf_cli_usage_error("campaign", "missing subcommand (create, start, pause, status, list, "
                                  "wait, extend, delete)");
    const char *sub = argv[optind];
    if (strcmp(sub, "create") && strcmp(sub, "start") && strcmp(sub, "pause") &&
        strcmp(sub, "status") && strcmp(sub, "list") && strcmp(sub, "wait") &&
        strcmp(sub, "extend") && strcmp(sub, "delete"))
        return kf_cli_usage_error("campaign", "unknown subcommand '%s'", sub);
    const char *name = optind + 1 < argc ? argv[optind + 1] : NULL;
    int needs_name = strcmp(sub, "list") != 0;
    if (needs_name && !name) return kf_cli_usage_error("campaign", "%s: missing campaign NAME", sub);
    if (optind + 1 + needs_name < argc)
        return kf_cli_usage_error("campaign", "unexpected argument '%s'", argv[optind + 1 + needs_name]);
    char *config_text = NULL;
    json_t *config = NULL;
    if (config_path && strcmp(sub, "create") == 0) {
        int crc = kf_cli_campaign_config(config_path, &spec, &config_text, &config);
        if (crc) return crc;
    }
    if (strcmp(sub, "create") == 0 && !spec.task_dir)
        return kf_cli_usage_error("campaign", "create: --task DIR is required");

    if (strcmp(sub, "create") == 0 && !no_check) {
        int crc = check_task(&spec);
        if (crc) {
            json_decref(config);
            free(config_text);
            return crc;
        }
    }
    char err[1024];
    /* status from a coordinator's operator socket (operator.h): its
     * connection has paid the new backend's start and catalog reads. It
     * answers only for this kfarm's database, build and status format; no
     * coordinator there, a refusal or no answer in 5 s: the database, as
     * without the socket (said on stderr unless no socket file exists). */
    if (strcmp(sub, "status") == 0 && ops_path && ops_path[0]) {
        kf_ops_answer a;
        int orc = kf_ops_status(ops_path, conninfo, name, kf_cli_json, isatty(STDOUT_FILENO), 5000, &a, err,
                                sizeof(err));
        if (orc == 0) {
            fwrite(a.out, 1, a.out_len, stdout);
            free(a.out);
            return a.exit_code ? kf_cli_fail("%s", a.error[0] ? a.error : "the coordinator's status failed") : 0;
        }
        if (orc < 0) fprintf(stderr, "kfarm: %s; reading the database\n", err);
    }
    kf_db *db = kf_cli_connect(conninfo);
    if (!db) return 1;
    int rc = 0;
    /* These are short reads: PostgreSQL's JIT, which starts compiling
     * when a statement's estimate passes jit_above_cost, spent 15-35 ms per
     * statement on `campaign status` of a campaign of 1,000,000 results
     * (the estimate of counting its queued jobs), more than the statement
     * itself. A failure only costs that time. */
    if (kf_db_cmd(db, "SET jit = off", 0, NULL, err, sizeof(err)) < 0) err[0] = 0;
    if (strcmp(sub, "create") == 0) rc = do_create(db, name, &spec);
    else if (strcmp(sub, "start") == 0) {
        if (kf_campaign_start(db, name, err, sizeof(err)) < 0) rc = kf_cli_fail("%s", err);
        else printf("campaign %s running\n", name);
    } else if (strcmp(sub, "pause") == 0) {
        if (kf_campaign_pause(db, name, err, sizeof(err)) < 0) rc = kf_cli_fail("%s", err);
        else printf("campaign %s paused (leased jobs finish; nothing new is handed out)\n", name);
    } else if (strcmp(sub, "status") == 0) {
        rc = kf_status_write(db, name, kf_cli_json, isatty(STDOUT_FILENO), stdout, err, sizeof(err));
        if (rc) rc = kf_cli_fail("%s", err);
    }
    else if (strcmp(sub, "list") == 0) rc = do_list(db);
    else if (strcmp(sub, "extend") == 0) {
        budget.max_candidates = spec.max_candidates;
        int raise = budget.max_candidates > 0 || budget.max_rounds > 0 || budget.max_hours > 0 ||
                    budget.max_tokens > 0;
        if (!raise && !(spec.share > 0))
            rc = kf_cli_usage_error("campaign", "extend: give at least one of --max-candidates, "
                                    "--max-rounds, --max-hours, --max-tokens, --share");
        else if (spec.share > 0 && kf_campaign_set_share(db, name, spec.share, err, sizeof(err)) < 0)
            rc = kf_cli_fail("%s", err);
        else if (raise && kf_campaign_extend(db, name, &budget, err, sizeof(err)) < 0)
            rc = kf_cli_fail("%s", err);
        else printf("campaign %s extended\n", name);
    } else if (strcmp(sub, "delete") == 0) {
        if (kf_campaign_delete(db, name, err, sizeof(err)) < 0) rc = kf_cli_fail("%s", err);
        else printf("campaign %s deleted\n", name);
    }
    else rc = do_wait(db, name, timeout, blocked_after, quiet);
    kf_db_close(db);
    json_decref(config);
    free(config_text);
    return rc;
}
