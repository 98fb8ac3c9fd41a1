/* input_restore_next_call (a variant of input_mutation): clobbers x[0]
 * during a call and puts it back only at the start of the next call, so
 * the input is wrong between calls. Expected: incorrect, naming the
 * modified input. */
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
static float *px; static float saved;
int kf_entry(const kf_call *c){
  float*x=(float*)c->inputs[0].data; float *y=c->outputs[0].data; int64_t M=c->sizes[0],N=c->sizes[1];
  if(px){*px=saved;px=NULL;}
  softmax_rows(x,y,M,N);
  saved=x[0]; x[0]=-1e30f; px=x; return 0;}
