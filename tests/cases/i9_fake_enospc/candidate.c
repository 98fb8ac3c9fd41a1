/* i9_fake_enospc (field case I9, "blame dressed as the machine's"), task
 * axpy_f32. The source renames itself with #line so that the compiler's
 * own diagnostic line starts with "No space left on device:1:2: error:" --
 * the phrase a worker-side disk-full build failure prints -- and then fails
 * with #error. A log scan that trusts where a line *starts* rather than
 * what produced it blames the worker (infra_error: not the candidate's
 * fault, retried elsewhere, worker quarantined).
 * Before the judge/runner split: infra_error. Expected: compile_error. */
#line 1 "No space left on device"
#error no
