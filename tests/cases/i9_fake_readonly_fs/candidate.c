/* i9_fake_readonly_fs (field case I9), task axpy_f32. Same trick, phrased
 * as the compiler failing to write its output: "cc1: error: /tmp/ccX.s:
 * Read-only file system" as the file name of a #line, then #error.
 * Before the judge/runner split: infra_error. Expected: compile_error. */
#line 1 "cc1: error: /tmp/ccXXXXXX.s: Read-only file system"
#error no
