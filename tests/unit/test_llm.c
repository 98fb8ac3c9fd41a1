/*
 * test_llm.c -- the LLM client against a scripted OpenAI-compatible server.
 *
 * Spawns tests/llm/fake_llm.py (real HTTP over loopback) with a script
 * written here, submits one request per scenario *at once* (they run
 * concurrently in one curl multi handle), and checks each outcome: a good
 * reply with usage parsed, replies the worker will later reject (compile
 * error, wrong result: for the client they are ordinary replies), a reply
 * with no code, 429 + Retry-After then success (the wait honours the
 * header), 500 once then success, 500 until retries run out, a reply slower
 * than the timeout (reported as a timeout, not retried beyond max_retries),
 * a cut-off reply (finish_reason "length"), a non-retryable 404, and the
 * API key sent as a Bearer token from the named environment variable.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <curl/curl.h>

#include "kf_test.h"
#include "kf_util.h"
#include "llm.h"

static const char *SCRIPT =
    "{\"require_key\": \"sk-test-123\",\n"
    " \"scenarios\": {\n"
    "  \"good\": [{\"content\": \"Faster:\\n```c\\n#include \\\"kf_abi.h\\\"\\nint kf_entry(const kf_call *c){return 0;}\\n```\\n\","
    "             \"usage\": {\"prompt_tokens\": 123, \"completion_tokens\": 456}}],\n"
    "  \"compile_fail\": [{\"content\": \"```c\\nint kf_entry(const kf_call *c) { return syntax error }\\n```\"}],\n"
    "  \"wrong\": [{\"content\": \"```c\\n#include \\\"kf_abi.h\\\"\\nint kf_entry(const kf_call *c){return 0; /* writes nothing */}\\n```\"}],\n"
    "  \"nocode\": [{\"content\": \"I think you should use vector instructions.\"}],\n"
    "  \"rate\": [{\"status\": 429, \"headers\": {\"Retry-After\": \"1\"}}, {\"content\": \"```c\\nint kf_entry(void*c){return 0;}\\n```\"}],\n"
    "  \"flaky\": [{\"status\": 500}, {\"content\": \"ok after 500\"}],\n"
    "  \"broken\": [{\"status\": 500}],\n"
    "  \"slow\": [{\"delay_s\": 3, \"content\": \"too late\"}],\n"
    "  \"cut\": [{\"content\": \"```c\\nint kf_entry(const kf_call *c) {\\n  for (\", \"finish_reason\": \"length\","
    "            \"usage\": {\"prompt_tokens\": 7, \"completion_tokens\": 4096}}]\n"
    " }}\n";

enum { GOOD, COMPILE_FAIL, WRONG, NOCODE, RATE, FLAKY, BROKEN, SLOW, CUT, MISSING, N_SCEN };
static const char *MODELS[N_SCEN] = { "good", "compile_fail", "wrong", "nocode", "rate",
                                      "flaky", "broken", "slow", "cut", "no-such-model" };

static pid_t spawn_server(const char *dir, int *port)
{
    char script[512], portf[512], logf[512], py[512];
    snprintf(script, sizeof(script), "%s/script.json", dir);
    snprintf(portf, sizeof(portf), "%s/port", dir);
    snprintf(logf, sizeof(logf), "%s/requests.log", dir);
    snprintf(py, sizeof(py), "%s/tests/llm/fake_llm.py", KFARM_SOURCE_DIR);
    if (kf_util_write_file(script, SCRIPT, strlen(SCRIPT)) < 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        execlp("python3", "python3", py, "--script", script, "--port", "0", "--port-file", portf,
               "--log", logf, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) {
        char *s = kf_util_read_file(portf, NULL, 64);
        if (s) {
            *port = atoi(s);
            free(s);
            return pid;
        }
        usleep(50000);
    }
    kill(pid, SIGKILL);
    return -1;
}

int main(void)
{
    kf_test_state st = { 0, 0 };
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char dir[] = "/tmp/kf-test-llm.XXXXXX";
    if (!mkdtemp(dir)) return 1;
    int port = 0;
    pid_t srv = spawn_server(dir, &port);
    CHECK(&st, srv > 0, "fake server did not start");
    if (srv <= 0) return kf_test_done(&st);

    char err[512];
    /* Config parsing. */
    json_t *j = json_loads("{\"base_url\": \"http://x/v1\", \"model\": \"m\", \"tmperature\": 1}", 0, NULL);
    kf_llm_config cfg;
    CHECK(&st, kf_llm_config_from_json(j, &cfg, err, sizeof(err)) < 0 && strstr(err, "tmperature"),
          "unknown field rejected: %s", err);
    json_decref(j);
    j = json_loads("{\"base_url\": \"http://x/v1\", \"model\": \"m\", \"api_key_env\": \"sk-abc def\"}", 0, NULL);
    CHECK(&st, kf_llm_config_from_json(j, &cfg, err, sizeof(err)) < 0 && strstr(err, "api_key_env"),
          "a key in place of a variable name is rejected: %s", err);
    json_decref(j);
    j = json_loads("{\"base_url\": \"http://x/v1\", \"model\": \"m\", \"temperature\": 0.2, \"timeout_s\": 5}", 0, NULL);
    CHECK(&st, kf_llm_config_from_json(j, &cfg, err, sizeof(err)) == 0 && cfg.temperature == 0.2 &&
          cfg.timeout_s == 5, "config parsed: %s", err);
    json_decref(j);
    CHECK(&st, kf_llm_parse_retry_after("7", 0) == 7, "Retry-After seconds");
    CHECK(&st, kf_llm_parse_retry_after("Thu, 01 Jan 1970 00:01:40 GMT", 40) == 60,
          "Retry-After HTTP date");
    CHECK(&st, kf_llm_parse_retry_after("soon", 0) < 0, "bad Retry-After");

    kf_llm_client *c = kf_llm_client_new(err, sizeof(err));
    CHECK(&st, c != NULL, "client: %s", err);
    kf_llm_config_default(&cfg);
    snprintf(cfg.base_url, sizeof(cfg.base_url), "http://127.0.0.1:%d/v1/", port);
    snprintf(cfg.api_key_env, sizeof(cfg.api_key_env), "KF_TEST_LLM_KEY");
    cfg.timeout_s = 1.0;
    cfg.connect_timeout_s = 1.0;
    cfg.max_retries = 2;
    cfg.backoff_s = 0.05;
    cfg.backoff_max_s = 0.2;

    unsetenv("KF_TEST_LLM_KEY");
    snprintf(cfg.model, sizeof(cfg.model), "good");
    CHECK(&st, kf_llm_submit(c, &cfg, "sys", "user", 99, err, sizeof(err)) < 0 &&
          strstr(err, "KF_TEST_LLM_KEY"), "unset key variable refused: %s", err);
    setenv("KF_TEST_LLM_KEY", "sk-test-123", 1);

    double t0 = kf_util_now_s();
    for (int i = 0; i < N_SCEN; i++) {
        kf_llm_config k = cfg;
        snprintf(k.model, sizeof(k.model), "%s", MODELS[i]);
        if (i == SLOW) k.max_retries = 0;
        CHECK(&st, kf_llm_submit(c, &k, "You write kernels.", "Make it fast.", (uint64_t)i, err,
                                 sizeof(err)) == 0, "submit %s: %s", MODELS[i], err);
    }
    CHECK(&st, kf_llm_pending(c) == N_SCEN, "all pending");
    kf_llm_reply rep[N_SCEN];
    double done_at[N_SCEN];
    int got = 0;
    memset(rep, 0, sizeof(rep));
    while (got < N_SCEN && kf_util_now_s() - t0 < 30) {
        if (kf_llm_perform(c, 100, err, sizeof(err)) < 0) {
            CHECK(&st, 0, "perform: %s", err);
            break;
        }
        kf_llm_reply r;
        while (kf_llm_next(c, &r)) {
            if (r.tag < N_SCEN) {
                rep[r.tag] = r;
                done_at[r.tag] = kf_util_now_s() - t0;
                got++;
            } else {
                kf_llm_reply_free(&r);
            }
        }
    }
    double total = kf_util_now_s() - t0;
    CHECK(&st, got == N_SCEN, "all finished (%d)", got);
    CHECK(&st, kf_llm_pending(c) == 0, "nothing pending");

    CHECK(&st, rep[GOOD].ok && strstr(rep[GOOD].content, "kf_entry") &&
          rep[GOOD].prompt_tokens == 123 && rep[GOOD].completion_tokens == 456 &&
          rep[GOOD].retries == 0 && !strcmp(rep[GOOD].finish_reason, "stop"),
          "good: ok=%d usage %ld/%ld err=%s", rep[GOOD].ok, rep[GOOD].prompt_tokens,
          rep[GOOD].completion_tokens, rep[GOOD].error);
    CHECK(&st, rep[COMPILE_FAIL].ok && strstr(rep[COMPILE_FAIL].content, "syntax error"),
          "compile-failing kernel delivered as a reply");
    CHECK(&st, rep[WRONG].ok && strstr(rep[WRONG].content, "writes nothing"), "wrong kernel delivered");
    CHECK(&st, rep[NOCODE].ok && !strstr(rep[NOCODE].content, "```"), "no-code reply delivered");
    CHECK(&st, rep[RATE].ok && rep[RATE].retries == 1 && rep[RATE].waited_s >= 1.0 &&
          rep[RATE].elapsed_s >= 1.0, "429: retried once after Retry-After 1 s (ok=%d retries=%d "
          "waited=%.2f elapsed=%.2f err=%s)", rep[RATE].ok, rep[RATE].retries, rep[RATE].waited_s,
          rep[RATE].elapsed_s, rep[RATE].error);
    CHECK(&st, rep[FLAKY].ok && rep[FLAKY].retries == 1 && !strcmp(rep[FLAKY].content, "ok after 500"),
          "500 then success (retries=%d err=%s)", rep[FLAKY].retries, rep[FLAKY].error);
    CHECK(&st, !rep[BROKEN].ok && rep[BROKEN].attempts == 3 && rep[BROKEN].http_status == 500 &&
          strstr(rep[BROKEN].error, "HTTP 500") && strstr(rep[BROKEN].error, "3 attempts"),
          "500 until retries run out (attempts=%d err=%s)", rep[BROKEN].attempts, rep[BROKEN].error);
    CHECK(&st, !rep[SLOW].ok && strstr(rep[SLOW].error, "timed out") && rep[SLOW].attempts == 1 &&
          rep[SLOW].elapsed_s < 2.5, "slow reply: timeout reported (err=%s elapsed=%.2f)",
          rep[SLOW].error, rep[SLOW].elapsed_s);
    CHECK(&st, rep[CUT].ok && !strcmp(rep[CUT].finish_reason, "length") &&
          rep[CUT].completion_tokens == 4096, "cut-off reply: finish_reason length (%s)",
          rep[CUT].finish_reason);
    CHECK(&st, !rep[MISSING].ok && rep[MISSING].attempts == 1 && rep[MISSING].http_status == 404,
          "404 is not retried (attempts=%d status=%ld)", rep[MISSING].attempts,
          rep[MISSING].http_status);
    CHECK(&st, done_at[GOOD] < done_at[SLOW] && done_at[GOOD] < 0.9,
          "a slow request does not hold up others (good at %.2f s)", done_at[GOOD]);
    CHECK(&st, total < 4.0, "requests ran concurrently (%.2f s in all)", total);
    for (int i = 0; i < N_SCEN; i++) {
        CHECK(&st, !rep[i].content || !strstr(rep[i].content, "sk-test-123"), "key not echoed");
        CHECK(&st, !strstr(rep[i].error, "sk-test-123"), "key not in errors");
        kf_llm_reply_free(&rep[i]);
    }

    /* The server saw the key on every request (it answers 401 otherwise). */
    char logf[600];
    snprintf(logf, sizeof(logf), "%s/requests.log", dir);
    char *log = kf_util_read_file(logf, NULL, 1u << 20);
    CHECK(&st, log && !strstr(log, "\"auth_ok\": false") && strstr(log, "\"auth_ok\": true"),
          "Authorization: Bearer sent from the named variable");
    CHECK(&st, log && strstr(log, "\"temperature\": 0.7"), "temperature sent");
    free(log);

    /* Connection refused: retried, then reported. */
    kf_llm_config dead = cfg;
    snprintf(dead.base_url, sizeof(dead.base_url), "http://127.0.0.1:1/v1");
    dead.max_retries = 1;
    kf_llm_submit(c, &dead, NULL, "x", 1, err, sizeof(err));
    kf_llm_reply r;
    memset(&r, 0, sizeof(r));
    double t1 = kf_util_now_s();
    while (!kf_llm_next(c, &r) && kf_util_now_s() - t1 < 10) kf_llm_perform(c, 50, err, sizeof(err));
    CHECK(&st, !r.ok && r.attempts == 2 && r.http_status == 0, "connection refused: %s", r.error);
    kf_llm_reply_free(&r);

    kf_llm_client_free(c);
    kill(srv, SIGTERM);
    waitpid(srv, NULL, 0);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "cleanup failed\n");
    curl_global_cleanup();
    return kf_test_done(&st);
}
