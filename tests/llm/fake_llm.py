#!/usr/bin/env python3
"""fake_llm.py -- a scripted OpenAI-compatible chat-completions server for tests.

Design. Real HTTP over loopback (http.server, threads so a slow reply does not
hold up the others), Python 3 standard library only. POST /v1/chat/completions
(any path ending in /chat/completions) answers from a JSON script:

    {"require_key": "sk-test",            # optional: Bearer token to demand (else 401)
     "scenarios": {                       # keyed by the request's "model"
        "good": [STEP, STEP, ...],        # consumed in order per model; the last repeats
        ...},
     "default": [STEP, ...]}              # models not named above

    STEP = {"status": 200,                # HTTP status (default 200)
            "content": "text",            # assistant message (or:)
            "code_file": "kernel.c",      # wrap this file (relative to the script) in ```c
            "text": "prose before code",  # with code_file: text before the fence
            "finish_reason": "stop",      # default "stop"
            "cut": 40,                    # with code_file: keep only the first N chars of
                                          #   the file and drop the closing fence
            "usage": {"prompt_tokens": 10, "completion_tokens": 20},  # default: counted
            "delay_s": 0,                 # sleep before answering
            "headers": {"Retry-After": "1"},
            "body": "raw body",           # send this body verbatim (error pages)
            "think_file": "draft.c"}      # with code_file: a <think> block holding this
                                          #   file as a fenced draft comes first

Every request is appended to --log as one JSON line: time, model, step index,
status sent, whether an Authorization header came and matched, the messages.
--port 0 picks a free port, written to --port-file once listening.
"""
import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--script", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--log")
    a = ap.parse_args()
    with open(a.script) as f:
        script = json.load(f)
    base = os.path.dirname(os.path.abspath(a.script))
    lock = threading.Lock()
    counters = {}

    def next_step(model):
        scen = script.get("scenarios", {}).get(model)
        key = model if scen is not None else "__default__"
        if scen is None:
            scen = script.get("default", [])
        with lock:
            i = counters.get(key, 0)
            counters[key] = i + 1
        if not scen:
            return i, {"status": 404, "body": json.dumps({"error": {"message": "no script for model %s" % model}})}
        return i, scen[min(i, len(scen) - 1)]

    def log(entry):
        if not a.log:
            return
        with lock:
            with open(a.log, "a") as f:
                f.write(json.dumps(entry) + "\n")

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            pass

        def send(self, status, body, headers=None):
            data = body.encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, str(v))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n)
            if not self.path.endswith("/chat/completions"):
                return self.send(404, json.dumps({"error": {"message": "not found"}}))
            try:
                req = json.loads(raw)
            except ValueError:
                return self.send(400, json.dumps({"error": {"message": "bad json"}}))
            model = req.get("model", "")
            auth = self.headers.get("Authorization")
            want = script.get("require_key")
            auth_ok = (auth == "Bearer " + want) if want else True
            idx, step = next_step(model)
            entry = {"t": time.time(), "model": model, "step": idx, "auth_present": auth is not None,
                     "auth_ok": auth_ok, "messages": req.get("messages"),
                     "temperature": req.get("temperature"), "max_tokens": req.get("max_tokens"),
                     "seed": req.get("seed")}
            if not auth_ok:
                entry["status"] = 401
                log(entry)
                return self.send(401, json.dumps({"error": {"message": "invalid api key"}}))
            time.sleep(float(step.get("delay_s", 0)))
            status = int(step.get("status", 200))
            entry["status"] = status
            log(entry)
            if "body" in step:
                return self.send(status, step["body"], step.get("headers"))
            if status != 200:
                return self.send(status, json.dumps({"error": {"message": "scripted error %d" % status}}),
                                 step.get("headers"))
            if "code_file" in step:
                with open(os.path.join(base, step["code_file"])) as f:
                    code = f.read()
                text = step.get("text", "Here is the new kernel.")
                if "cut" in step:
                    content = "%s\n\n```c\n%s" % (text, code[: int(step["cut"])])
                else:
                    content = "%s\n\n```c\n%s```\n" % (text, code if code.endswith("\n") else code + "\n")
                if "think_file" in step:
                    with open(os.path.join(base, step["think_file"])) as f:
                        draft = f.read()
                    content = "<think>\nLet me draft it first.\n```c\n%s```\nNo, that is wrong.\n</think>\n%s" % (draft, content)
            else:
                content = step.get("content", "")
            prompt_chars = sum(len(m.get("content", "")) for m in req.get("messages", []))
            usage = step.get("usage", {"prompt_tokens": prompt_chars // 4 + 1,
                                       "completion_tokens": len(content) // 4 + 1})
            usage = dict(usage)
            usage.setdefault("total_tokens", usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
            body = {"id": "chatcmpl-fake-%d" % idx, "object": "chat.completion",
                    "created": int(time.time()), "model": model,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                 "finish_reason": step.get("finish_reason", "stop")}],
                    "usage": usage}
            self.send(200, json.dumps(body), step.get("headers"))

    class Server(ThreadingHTTPServer):
        request_queue_size = 128   # many clients connect at once

    srv = Server(("127.0.0.1", a.port), H)
    srv.daemon_threads = True
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(srv.server_address[1]))
        os.rename(tmp, a.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
