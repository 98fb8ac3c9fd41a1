/*
 * test_prompt.c -- reading model replies and recognizing duplicate sources.
 *
 * Code extraction: the longest complete C/CUDA fenced block wins (ties: the
 * last), other languages are ignored, a cut-off reply (finish_reason
 * "length") only counts when a complete block is present, a reply without
 * code or without kf_entry is refused with a reason. Normalization: comments
 * and whitespace do not change the hash; code, string literals and
 * preprocessor line structure do. Hardware notes are found by architecture
 * family, and the ABI text is embedded.
 */
#include <stdlib.h>
#include <string.h>

#include "kf_test.h"
#include "prompt.h"
#include "llm.h"

static const char *K1 = "#include \"kf_abi.h\"\nint kf_entry(const kf_call *c) { return 0; }\n";

int main(void)
{
    kf_test_state st = { 0, 0 };
    char reason[256], buf[4096];
    char *code;

    snprintf(buf, sizeof(buf), "Idea.\n\n```c\n%s```\n", K1);
    code = kf_prompt_extract_code(buf, "stop", reason, sizeof(reason));
    CHECK(&st, code && !strcmp(code, K1), "plain block: %s", code ? code : reason);
    free(code);

    snprintf(buf, sizeof(buf), "```bash\nmake\n```\n```cuda\n%s```\nand a short one\n```c\nint kf_entry;\n```\n", K1);
    code = kf_prompt_extract_code(buf, "stop", reason, sizeof(reason));
    CHECK(&st, code && !strcmp(code, K1), "longest C/CUDA block wins: %s", code ? code : reason);
    free(code);

    /* a reasoning model's longer draft inside <think> is never the kernel */
    snprintf(buf, sizeof(buf), "<think>\nA first draft:\n```c\n/* draft draft draft draft draft */\n%s```\n"
             "Hmm, better:\n</think>\nFinal:\n```c\n%s```\n", K1, "int kf_entry(void) { return 0; }\n");
    code = kf_prompt_extract_code(buf, "stop", reason, sizeof(reason));
    CHECK(&st, code && !strcmp(code, "int kf_entry(void) { return 0; }\n"), "think block skipped: %s",
          code ? code : reason);
    free(code);
    snprintf(buf, sizeof(buf), "<THINK>only a draft\n```c\n%s```\n", K1);
    code = kf_prompt_extract_code(buf, "length", reason, sizeof(reason));
    CHECK(&st, !code, "an unclosed think block holds no kernel");
    free(code);
    snprintf(buf, sizeof(buf), "draft ```c\n%s```\n</think>\n```c\nint kf_entry(void);\n```\n", K1);
    code = kf_prompt_extract_code(buf, "stop", reason, sizeof(reason));
    CHECK(&st, code && !strcmp(code, "int kf_entry(void);\n"), "text before a lone </think> is reasoning: %s",
          code ? code : reason);
    free(code);
    CHECK(&st, kf_llm_context_error(400, "This model's maximum context length is 8192 tokens"), "context 400");
    CHECK(&st, !kf_llm_context_error(400, "invalid model"), "other 400");
    CHECK(&st, !kf_llm_key_env_allowed("KFARM_FLEET_KEY") && !kf_llm_key_env_allowed("PGPASSWORD") &&
          kf_llm_key_env_allowed("OPENAI_API_KEY"), "coordinator secrets are not key variables");

    code = kf_prompt_extract_code("Use AVX-512 and unroll by 4.", "stop", reason, sizeof(reason));
    CHECK(&st, !code && !strcmp(reason, "no code block in the reply"), "no code: %s", reason);

    code = kf_prompt_extract_code("```python\nprint(1)\n```\n", "stop", reason, sizeof(reason));
    CHECK(&st, !code && strstr(reason, "no C/CUDA code block"), "python only: %s", reason);

    code = kf_prompt_extract_code("```c\nint kf_entry(const kf_call *c) {\n  for (", "length", reason, sizeof(reason));
    CHECK(&st, !code && !strcmp(reason, "reply cut off (finish_reason=length)"), "cut off: %s", reason);

    snprintf(buf, sizeof(buf), "```c\n%s```\nNow a second version:\n```c\nint kf_entry(", K1);
    code = kf_prompt_extract_code(buf, "length", reason, sizeof(reason));
    CHECK(&st, code && !strcmp(code, K1), "cut off but a complete block exists: %s", code ? code : reason);
    free(code);

    snprintf(buf, sizeof(buf), "```c\n%s", K1);
    code = kf_prompt_extract_code(buf, "stop", reason, sizeof(reason));
    CHECK(&st, code && !strcmp(code, K1), "missing closing fence, not cut off: accepted");
    free(code);

    code = kf_prompt_extract_code("```c\nint main(void) { return 0; }\n```\n", "stop", reason, sizeof(reason));
    CHECK(&st, !code && strstr(reason, "kf_entry"), "no kf_entry: %s", reason);

    char a[65], b[65], c[65], d[65], e[65];
    kf_prompt_norm_sha256("#include \"kf_abi.h\"\n// hello\nint kf_entry(const kf_call *c)\n{\n    return 0; /* ok */\n}\n", a);
    kf_prompt_norm_sha256("#include \"kf_abi.h\"\nint kf_entry(const kf_call*c){return 0;}", b);
    kf_prompt_norm_sha256("#include \"kf_abi.h\"\nint kf_entry(const kf_call*c){return 1;}", c);
    kf_prompt_norm_sha256("#include \"kf_abi.h\"\nint kf_entry(const kf_call*c){puts(\"a  b\");return 0;}", d);
    kf_prompt_norm_sha256("#include \"kf_abi.h\"\nint kf_entry(const kf_call*c){puts(\"a b\");return 0;}", e);
    char f[65], g[65];
    kf_prompt_norm_sha256("int y = -x; int z = a - -b;", f);
    kf_prompt_norm_sha256("int y=-x;\nint z=a- -b;", g);
    CHECK(&st, !strcmp(f, g), "operators: only spaces that separate tokens count");
    CHECK(&st, !strcmp(a, b), "comments and whitespace do not matter");
    CHECK(&st, strcmp(b, c) != 0, "code matters");
    CHECK(&st, strcmp(d, e) != 0, "string literals are kept verbatim");
    char *n = kf_prompt_normalize("#define A 1\nint x = A;\n#define B 2\nint y = - -B;");
    CHECK(&st, n && !strcmp(n, "#define A 1\nint x=A;\n#define B 2\nint y=- -B;"), "normalized: [%s]", n);
    free(n);

    CHECK(&st, kf_prompt_hw_note("sm_90a") && strstr(kf_prompt_hw_note("sm_90a"), "wgmma"), "sm_90a note");
    CHECK(&st, kf_prompt_hw_note("sm_86") && strstr(kf_prompt_hw_note("sm_86"), "cp.async"), "sm_86 note");
    CHECK(&st, kf_prompt_hw_note("sm_100a") && strstr(kf_prompt_hw_note("sm_100a"), "tcgen05"), "sm_100a");
    CHECK(&st, kf_prompt_hw_note("sm_121") && strstr(kf_prompt_hw_note("sm_121"), "sm_120"), "sm_121 family");
    CHECK(&st, kf_prompt_hw_note("sm_75") && strstr(kf_prompt_hw_note("sm_75"), "No bf16"), "sm_75");
    CHECK(&st, kf_prompt_hw_note("cpu") && strstr(kf_prompt_hw_note("cpu"), "OpenMP"), "cpu note");
    CHECK(&st, kf_prompt_hw_note("RTX 3090") == NULL, "model names are resolved by the caller");
    CHECK(&st, strstr(kf_prompt_abi_text(), "kf_entry"), "ABI text embedded");
    return kf_test_done(&st);
}
