/* slot_reuse_prev_trial (red team of the validation slots, 2026-12-05):
 * trial 1 of a shape copies trial 0's answer, still sitting in trial 0's
 * slot of the arena, instead of computing: the trials' inputs differ, so
 * the copy is wrong wherever the answer depends on them. Expected:
 * incorrect at trial 1. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <stdio.h>
#include "kf_abi.h"
static void softmax_rows(const float *x, float *y, int64_t M, int64_t N){
  for(int64_t m=0;m<M;m++){const float*xr=x+m*N;float*yr=y+m*N;float mx=-INFINITY;
    for(int64_t i=0;i<N;i++)mx=fmaxf(mx,xr[i]);double s=0;
    for(int64_t i=0;i<N;i++){float e=expf(xr[i]-mx);yr[i]=e;s+=e;}
    float inv=1.0/s;for(int64_t i=0;i<N;i++)yr[i]*=inv;}}
/* trial 1 of a shape: copy trial 0's answer (still in slot 0) instead of computing */
static float *prev_y; static int64_t prev_n;
int kf_entry(const kf_call *c){
  float *y=c->outputs[0].data; int64_t M=c->sizes[0],N=c->sizes[1];
  if(prev_y && prev_y!=y && prev_n==M*N){ memcpy(y,prev_y,M*N*4); prev_y=NULL; return 0; }
  softmax_rows(c->inputs[0].data,y,M,N); prev_y=y; prev_n=M*N; return 0;}
