/*
 * pool.c — fork-join thread pool (see pool.h).
 *
 * Protocol.  A job has nth index slots.  The owner publishes (fn, arg), sets
 * the claim word to (generation, next slot 1) — slot 0 is its own — and
 * bumps the generation counter `gen`.  A worker that sees a new generation
 * claims slots with a compare-and-swap on the claim word, which carries the
 * generation in its high half: a worker that wakes up after its job is over
 * finds another generation there and touches nothing.  After slot 0 the owner
 * claims whatever slots are left itself, then waits until `done` reaches nth.
 * So a worker the OS has descheduled (a busy machine, more threads than
 * cores) delays nothing: its slot runs on the owner thread instead of the
 * whole job waiting for a time slice.  fn still runs exactly once per ith,
 * and a slot is exclusive, so per-ith scratch needs no locking.
 *
 * Waiting.  Both waits spin and then sleep on a futex: kernel calls of one
 * forward pass follow each other within microseconds, so spinning keeps the
 * fork latency low (~0.6 us on 2 cores), and the futex keeps an idle pool
 * (the user reading, a server between requests) off the CPU.  The spin
 * budget adapts per waiter (the owner's in the pool, each worker's on its
 * stack): a wait that spun out quarters it (down to POOL_SPIN_MIN_NS), one
 * that ended while spinning doubles it (up to POOL_SPIN_MAX_NS).  On an idle
 * machine every wait ends within microseconds and the budget stays at the
 * maximum.  On an oversubscribed one (more runnable threads than cores) the
 * partner is often descheduled for a whole time slice; spinning for it then
 * only burns this process's share of the CPU, which the partner needs to
 * finish: measured with tools/bench_decode.c -t 2 on the 2-vCPU machine at
 * load average 12-15, a fixed 0.2 ms spin spent ~15 ms of CPU per decode
 * step's matmuls against ~10 ms with a short one (docs/benchmarks.md).  Lost wake-ups are excluded Dekker-style with sequentially consistent
 * atomics: a sleeper announces itself before futex_wait re-checks the word in
 * the kernel; a waker changes the word before reading the announcement.
 */
#include "pool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define POOL_SPIN_MAX_NS 200000L /* at most 0.2 ms of spinning before a futex sleep */
#define POOL_SPIN_MIN_NS 10000L  /* at least 10 us */
#define POOL_ALIGN 64

struct pool {
    int n_threads;
    pthread_t *threads;     /* (n_threads - 1) */
    int n_started;

    void (*fn)(void *arg, int ith, int nth);
    void *arg;

    _Alignas(64) atomic_uint gen;       /* job generation; futex word for workers */
    atomic_int gen_sleepers;
    atomic_int stop;
    _Alignas(64) atomic_uint_least64_t claim; /* gen << 32 | next unclaimed slot */
    _Alignas(64) atomic_uint done;      /* slots finished; futex word for the owner */
    atomic_int done_sleeper;
    long owner_spin_ns;     /* the owner's adaptive spin budget (pool_wait) */

    void **scratch;         /* (n_threads) POOL_ALIGN-aligned */
    size_t scratch_bytes;
};

static long futex(atomic_uint *word, int op, unsigned val) {
    return syscall(SYS_futex, (unsigned *)word, op, val, NULL, NULL, 0);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Spin until *word != old or *budget_ns is spent; true if it changed.  The
 * budget adapts (see "Waiting" above). */
static int spin_while_equal(atomic_uint *word, unsigned old, long *budget_ns) {
    long t0 = 0;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(word, memory_order_acquire) != old) {
            if (t0 && *budget_ns < POOL_SPIN_MAX_NS)
                *budget_ns = *budget_ns * 2 < POOL_SPIN_MAX_NS ? *budget_ns * 2 : POOL_SPIN_MAX_NS;
            return 1;
        }
        cpu_relax();
        if ((i & 255) == 0) {
            long t = now_ns();
            if (!t0) t0 = t;
            else if (t - t0 > *budget_ns) {
                *budget_ns = *budget_ns / 4 > POOL_SPIN_MIN_NS ? *budget_ns / 4 : POOL_SPIN_MIN_NS;
                return 0;
            }
        }
    }
}

/* Claim and run slots of generation g until none is left (or g is over). */
static void run_slots(pool *p, unsigned g) {
    const int nth = p->n_threads;
    uint_least64_t c = atomic_load_explicit(&p->claim, memory_order_acquire);
    for (;;) {
        if ((unsigned)(c >> 32) != g || (int)(c & 0xffffffffu) >= nth) return;
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &c, c + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        p->fn(p->arg, (int)(c & 0xffffffffu), nth);
        if (atomic_fetch_add(&p->done, 1) + 1 == (unsigned)nth && atomic_load(&p->done_sleeper))
            futex(&p->done, FUTEX_WAKE_PRIVATE, 1);
        c = atomic_load_explicit(&p->claim, memory_order_acquire);
    }
}

static void *worker_main(void *v) {
    pool *p = v;
    unsigned seen = 0;
    long spin_ns = POOL_SPIN_MAX_NS;
    for (;;) {
        if (!spin_while_equal(&p->gen, seen, &spin_ns)) {
            atomic_fetch_add(&p->gen_sleepers, 1);
            while (atomic_load(&p->gen) == seen) futex(&p->gen, FUTEX_WAIT_PRIVATE, seen);
            atomic_fetch_sub(&p->gen_sleepers, 1);
        }
        seen = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (atomic_load_explicit(&p->stop, memory_order_relaxed)) break;
        run_slots(p, seen);
    }
    return NULL;
}

/* Publish a new generation (job or stop) and wake sleeping workers. */
static unsigned pool_kick(pool *p) {
    unsigned g = atomic_load_explicit(&p->gen, memory_order_relaxed) + 1;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->claim, (uint_least64_t)g << 32 | 1u, memory_order_relaxed);
    atomic_store(&p->gen, g); /* seq_cst: releases the above, ordered before the load below */
    if (atomic_load(&p->gen_sleepers) > 0) futex(&p->gen, FUTEX_WAKE_PRIVATE, INT_MAX);
    return g;
}

static void pool_wait(pool *p) {
    const unsigned nth = (unsigned)p->n_threads;
    unsigned d;
    while ((d = atomic_load_explicit(&p->done, memory_order_acquire)) != nth) {
        if (spin_while_equal(&p->done, d, &p->owner_spin_ns)) continue;
        atomic_store(&p->done_sleeper, 1);
        while ((d = atomic_load(&p->done)) != nth) futex(&p->done, FUTEX_WAIT_PRIVATE, d);
        atomic_store(&p->done_sleeper, 0);
    }
}

int pool_new(int n_threads, pool **out) {
    *out = NULL;
    if (n_threads <= 0) n_threads = pool_default_threads();
    if (n_threads > 1024) return POOL_EINVAL;
    pool *p = calloc(1, sizeof *p);
    if (!p) return POOL_ENOMEM;
    p->n_threads = n_threads;
    p->owner_spin_ns = POOL_SPIN_MAX_NS;
    p->scratch = calloc((size_t)n_threads, sizeof *p->scratch);
    if (n_threads > 1) p->threads = calloc((size_t)n_threads - 1, sizeof *p->threads);
    if (!p->scratch || (n_threads > 1 && !p->threads)) {
        pool_free(p);
        return POOL_ENOMEM;
    }
    for (int i = 1; i < n_threads; i++) {
        if (pthread_create(&p->threads[i - 1], NULL, worker_main, p) != 0) {
            pool_free(p); /* joins the ones started */
            return POOL_ETHREAD;
        }
        p->n_started++;
    }
    *out = p;
    return POOL_OK;
}

void pool_free(pool *p) {
    if (!p) return;
    if (p->n_started) {
        atomic_store(&p->stop, 1);
        pool_kick(p);
        for (int i = 0; i < p->n_started; i++) pthread_join(p->threads[i], NULL);
    }
    if (p->scratch)
        for (int i = 0; i < p->n_threads; i++) free(p->scratch[i]);
    free(p->scratch);
    free(p->threads);
    free(p);
}

int pool_n_threads(const pool *p) { return p ? p->n_threads : 1; }

void pool_run(pool *p, void (*fn)(void *arg, int ith, int nth), void *arg) {
    if (!p || p->n_threads == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    unsigned g = pool_kick(p);
    fn(arg, 0, p->n_threads);
    atomic_fetch_add(&p->done, 1);
    run_slots(p, g); /* the slots no worker has picked up yet */
    pool_wait(p);
}

int pool_reserve(pool *p, size_t bytes) {
    if (!p) return POOL_EINVAL;
    if (bytes <= p->scratch_bytes) return POOL_OK;
    bytes = (bytes + POOL_ALIGN - 1) / POOL_ALIGN * POOL_ALIGN;
    for (int i = 0; i < p->n_threads; i++) {
        void *b = aligned_alloc(POOL_ALIGN, bytes);
        if (!b) return POOL_ENOMEM; /* threads < i already grew: harmless, size stays old */
        free(p->scratch[i]);
        p->scratch[i] = b;
    }
    p->scratch_bytes = bytes;
    return POOL_OK;
}

void *pool_scratch(pool *p, int ith, size_t *bytes) {
    if (!p || ith < 0 || ith >= p->n_threads || !p->scratch_bytes) {
        if (bytes) *bytes = 0;
        return NULL;
    }
    if (bytes) *bytes = p->scratch_bytes;
    return p->scratch[ith];
}

/* ---- core count --------------------------------------------------------- */

static int read_int_file(const char *path, int *v) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int ok = fscanf(f, "%d", v) == 1;
    fclose(f);
    return ok ? 0 : -1;
}

int pool_default_threads(void) {
    cpu_set_t set;
    int n_aff = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n_aff = CPU_COUNT(&set);
    if (n_aff > 0) {
        /* distinct (package, core) pairs among the CPUs we may run on */
        long seen[CPU_SETSIZE];
        int n_seen = 0, ok = 1;
        for (int c = 0; c < CPU_SETSIZE && ok; c++) {
            if (!CPU_ISSET(c, &set)) continue;
            char path[128];
            int pkg, core;
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", c);
            if (read_int_file(path, &pkg)) { ok = 0; break; }
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", c);
            if (read_int_file(path, &core)) { ok = 0; break; }
            long key = (long)pkg << 32 | (unsigned)core;
            int dup = 0;
            for (int i = 0; i < n_seen && !dup; i++) dup = seen[i] == key;
            if (!dup) seen[n_seen++] = key;
        }
        if (ok && n_seen > 0) return n_seen;
        return n_aff;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
