/* i9_fake_gomp_missing (field case I9), task axpy_f32. Same trick with
 * another worker-side phrase: #line makes the diagnostic read
 * "/usr/bin/ld: cannot find -lgomp: ...:1:2: error: #error no", which looks
 * like a broken OpenMP install on the worker.
 * Before the judge/runner split: infra_error. Expected: compile_error. */
#line 1 "/usr/bin/ld: cannot find -lgomp: No such file or directory"
#error no
