/* honest_openmp: an honest softmax on OpenMP threads (rows in parallel,
 * or the reductions of one row for small M). The judge's stop of the
 * candidate after each call and its late checks must not take worker
 * threads for a late writer. Expected: ok. */
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
#include <omp.h>
int kf_entry(const kf_call *c){
  const float*x=c->inputs[0].data; float *y=c->outputs[0].data; int64_t M=c->sizes[0],N=c->sizes[1];
  if(M>=4){
    #pragma omp parallel for schedule(static)
    for(int64_t m=0;m<M;m++) softmax_rows(x+m*N,y+m*N,1,N);
  } else {
    for(int64_t m=0;m<M;m++){ const float*xr=x+m*N; float*yr=y+m*N; float mx=-INFINITY; double s=0;
      #pragma omp parallel for reduction(max:mx)
      for(int64_t i=0;i<N;i++) mx=fmaxf(mx,xr[i]);
      #pragma omp parallel for reduction(+:s)
      for(int64_t i=0;i<N;i++){ float e=expf(xr[i]-mx); yr[i]=e; s+=e; }
      float inv=1.0/s;
      #pragma omp parallel for
      for(int64_t i=0;i<N;i++) yr[i]*=inv; }
  }
  return 0;}
