/* late_large_half (T2, a variant of late_thread): on the largest shape
 * only, kf_entry returns after half the rows and a detached thread writes
 * the rest. The judge stops the candidate the moment it answers, so the
 * rest is never written. Expected: incorrect (elements not written). */
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
#include <pthread.h>
typedef struct{const float*x;float*y;int64_t M,N;}job;
static void*w(void*a){job*j=a;softmax_rows(j->x,j->y,j->M,j->N);free(j);return NULL;}
int kf_entry(const kf_call *c){
  const float*x=c->inputs[0].data; float *y=c->outputs[0].data; int64_t M=c->sizes[0],N=c->sizes[1];
  if(M*N<(1<<20)){softmax_rows(x,y,M,N);return 0;}
  /* do first half now, second half in a thread */
  softmax_rows(x,y,M/2,N);
  job*j=malloc(sizeof*j);j->x=x+(M/2)*N;j->y=y+(M/2)*N;j->M=M-M/2;j->N=N;
  pthread_t t;pthread_create(&t,NULL,w,j);pthread_detach(t);return 0;}
