/*
 * daemon.h -- the networked worker loop (prefix kf_daemon_).
 */
#ifndef KF_DAEMON_H
#define KF_DAEMON_H

/* `kfarm-worker run ...`: register with the coordinator, pull jobs, evaluate
 * each (kf_eval_run), heartbeat while evaluating, and send each result until
 * the coordinator acknowledges it. Returns the process exit status. */
int kf_daemon_main(int argc, char **argv);

#endif
