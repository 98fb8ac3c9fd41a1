/*
 * campaign_llm.c -- the LLM side of `kfarm campaign`: campaign files
 * (--config, docs/campaign-config.md). The search progress that
 * `kfarm campaign status` shows is written by coordinator/status.c.
 *
 * A campaign file is one JSON object. Campaign-level fields (strategy,
 * task, targets, max_candidates, max_attempts, seed_file) fill whatever the
 * command line left unset; the whole object is stored as the campaign's
 * config, where the strategy reads the llm object, budgets and review flag.
 * The API key never appears in it: only the name of the variable.
 */
#include <stdlib.h>
#include <string.h>

#include "kf_util.h"
#include "kfarm_cli.h"

/* path relative to the directory of `base` unless absolute; the result is
 * kept in holder (a JSON object) so it lives as long as the config. */
static const char *relpath(json_t *holder, const char *key, const char *base, const char *path)
{
    if (path[0] == '/') return path;
    const char *slash = strrchr(base, '/');
    size_t dl = slash ? (size_t)(slash - base) + 1 : 0;
    char *full = malloc(dl + strlen(path) + 1);
    if (!full) return path;
    memcpy(full, base, dl);
    strcpy(full + dl, path);
    json_object_set_new(holder, key, json_string(full));
    free(full);
    return json_string_value(json_object_get(holder, key));
}

int kf_cli_campaign_config(const char *path, kf_campaign_spec *spec, char **text, json_t **json)
{
    *text = kf_util_read_file(path, NULL, 1u << 20);
    if (!*text) return kf_cli_fail("--config %s: cannot read it", path);
    json_error_t je;
    json_t *root = json_loads(*text, 0, &je);
    if (!json_is_object(root)) {
        json_decref(root);
        return kf_cli_fail("--config %s: line %d: %s", path, je.line,
                           root ? "expected a JSON object" : je.text);
    }
    *json = root;
    json_t *holder = json_object();
    json_object_set_new(root, "\x01paths", holder); /* removed before storing */
    json_t *v;
    if (!spec->strategy && (v = json_object_get(root, "strategy"))) {
        if (!json_is_string(v)) return kf_cli_fail("--config %s: strategy: expected a string", path);
        spec->strategy = json_string_value(v);
    }
    if (!spec->task_dir && (v = json_object_get(root, "task"))) {
        if (!json_is_string(v)) return kf_cli_fail("--config %s: task: expected a directory", path);
        spec->task_dir = relpath(holder, "task", path, json_string_value(v));
    }
    if (!spec->seed_path && (v = json_object_get(root, "seed_file"))) {
        if (!json_is_string(v)) return kf_cli_fail("--config %s: seed_file: expected a file", path);
        spec->seed_path = relpath(holder, "seed_file", path, json_string_value(v));
    }
    if (spec->n_targets == 0 && (v = json_object_get(root, "targets"))) {
        size_t i;
        json_t *t;
        if (!json_is_array(v) || json_array_size(v) > KF_CAMPAIGN_MAX_TARGETS)
            return kf_cli_fail("--config %s: targets: expected an array of classes", path);
        json_array_foreach(v, i, t) {
            if (!json_is_string(t)) return kf_cli_fail("--config %s: targets[%zu]: expected a string", path, i);
            spec->targets[spec->n_targets++] = json_string_value(t);
        }
    }
    if (spec->max_candidates <= 0 && (v = json_object_get(root, "max_candidates"))) {
        if (!json_is_integer(v) || json_integer_value(v) < 1)
            return kf_cli_fail("--config %s: max_candidates: expected a positive integer", path);
        spec->max_candidates = (long)json_integer_value(v);
    }
    if (spec->max_attempts <= 0 && (v = json_object_get(root, "max_attempts"))) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 100)
            return kf_cli_fail("--config %s: max_attempts: expected 1..100", path);
        spec->max_attempts = (int)json_integer_value(v);
    }
    /* Store the file's object without our path holder. */
    json_t *copy = json_deep_copy(root);
    json_object_del(copy, "\x01paths");
    free(*text);
    *text = json_dumps(copy, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(copy);
    if (!*text) return kf_cli_fail("out of memory");
    spec->config_json = *text;
    return 0;
}
