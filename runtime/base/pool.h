/*
 * pool.h — fork-join thread pool for the compute kernels.
 *
 * pool_run(p, fn, arg) calls fn(arg, ith, nth) once for every ith in
 * 0..nth-1 (nth = pool_n_threads) and returns when all calls have returned.
 * The calling thread runs ith = 0 itself, then any index no worker has
 * claimed yet, so a worker the OS has descheduled does not stall the job
 * (which thread runs an ith is therefore not fixed; per-ith state such as
 * pool_scratch(p, ith) is still exclusive to that call).  Workers spin
 * briefly after each job (the next kernel call usually follows within
 * microseconds) and then sleep on a futex, so an idle pool costs no CPU.
 *
 * A NULL pool is valid everywhere: pool_run(NULL, ...) calls fn(arg, 0, 1)
 * inline, pool_n_threads(NULL) is 1.  A pool of 1 thread starts no threads.
 *
 * Per-thread scratch.  Kernels never allocate; what they need per thread
 * (a dequantized weight tile, attention scores) lives in buffers the pool
 * owns.  The owner sizes them once, outside the token loop, with
 * pool_reserve(p, kern_scratch_bytes(n_ctx)) (kern.h); pool_scratch() inside
 * a job only returns the pointer.
 *
 * Threading rules: one pool_run at a time per pool, from one thread (the
 * owner); fn must not call pool_run on the same pool.  pool_reserve and
 * pool_free must not overlap a pool_run.
 */
#ifndef CINFER_POOL_H
#define CINFER_POOL_H

#include <stddef.h>

typedef struct pool pool;

enum { POOL_OK = 0, POOL_EINVAL = -1, POOL_ENOMEM = -2, POOL_ETHREAD = -3 };

/* n_threads >= 1 (0 or less: pool_default_threads()).  Returns 0 and *out, or
 * a negative POOL_E* code with *out = NULL.  Free with pool_free. */
int pool_new(int n_threads, pool **out);
/* Stops and joins the workers, frees the scratch.  pool_free(NULL) is a no-op. */
void pool_free(pool *p);
int pool_n_threads(const pool *p);

/* Fork-join: fn(arg, ith, nth) for ith in 0..nth-1; the caller is ith 0.
 * Memory written by any fn call is visible to the caller after return. */
void pool_run(pool *p, void (*fn)(void *arg, int ith, int nth), void *arg);

/* Grow every thread's scratch to at least bytes (64-byte aligned, contents
 * unspecified).  Never shrinks.  Call outside pool_run.  0 or POOL_ENOMEM
 * (the old buffers stay valid on failure). */
int pool_reserve(pool *p, size_t bytes);
/* Scratch of thread ith (0..nth-1) and its size in *bytes (may be NULL);
 * NULL with *bytes = 0 for a NULL pool or before any pool_reserve.  Valid
 * until the next pool_reserve or pool_free. */
void *pool_scratch(pool *p, int ith, size_t *bytes);

/* Physical cores available to this process: distinct (package, core) pairs
 * of the CPUs in the affinity mask from /sys/devices/system/cpu; falls back
 * to the affinity CPU count, then sysconf(_SC_NPROCESSORS_ONLN).  >= 1. */
int pool_default_threads(void);

#endif
