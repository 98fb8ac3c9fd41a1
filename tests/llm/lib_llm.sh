# tests/llm/lib_llm.sh -- helpers for the LLM-search tests (source after
# tests/lib.sh): the scripted OpenAI-compatible server and campaign files.
LLM_KEY="sk-kfarm-test-$$-never-stored"
export KF_TEST_LLM_KEY="$LLM_KEY"

start_fake_llm() { # start_fake_llm SCRIPT -- sets LLM_URL and LLM_LOG
  LLM_LOG=$T_DIR/llm-requests.log
  rm -f "$T_DIR/llm.port"
  python3 "$KFARM_SRC/tests/llm/fake_llm.py" --script "$1" --port-file "$T_DIR/llm.port" \
    --log "$LLM_LOG" >>"$T_DIR/fake_llm.log" 2>&1 &
  T_PIDS+=($!)
  local i
  for i in $(seq 100); do [ -s "$T_DIR/llm.port" ] && break; sleep 0.1; done
  [ -s "$T_DIR/llm.port" ] || { log "fake LLM server did not start"; return 1; }
  LLM_URL="http://127.0.0.1:$(cat "$T_DIR/llm.port")/v1"
}

llm_config() { # llm_config FILE STRATEGY MODEL EXTRA-JSON-FIELDS (",..." or "") [SEED-FILE]
  cat >"$1" <<JSON
{"strategy": "$2",
 "task": "$KFARM_SRC/tasks/softmax_f32",
 "seed_file": "${5:-$KFARM_SRC/tests/llm/kernels/softmax_seed.c}",
 "targets": ["cpu"],
 "llm": {"base_url": "$LLM_URL", "model": "$3", "api_key_env": "KF_TEST_LLM_KEY",
         "temperature": 0.4, "max_tokens": 2048, "timeout_s": 10, "connect_timeout_s": 2,
         "max_retries": 2, "backoff_s": 0.1, "backoff_max_s": 0.5}$4}
JSON
}

# llm_requests -- number of requests the fake server has seen
llm_requests() { [ -f "$LLM_LOG" ] && wc -l <"$LLM_LOG" || echo 0; }
