/* Red-team case (found by trying the judge as a hostile model would, 2026-11-30); see case.json for the expected verdict. */
#include "kf_abi.h"
#error ÿþ bad bytes
int kf_entry(const kf_call *c){return 0;}
