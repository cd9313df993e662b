/*
 * bench_util.h — the timing and random-input helpers the kernel benchmark
 * tools (bench_matmul, bench_decode, bench_att, bench_ssm) share.  Header
 * only, static: each tool is one translation unit.  Not part of the library.
 */
#ifndef CINFER_TOOLS_BENCH_UTIL_H
#define CINFER_TOOLS_BENCH_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kernels/kern_r8.h"

/* 1: now() reads the calling thread's CPU time (steadier on a shared machine,
 * meaningful with one thread); 0: wall time. */
static int g_cpu_clock;

/* Seconds, on the clock g_cpu_clock picks. */
static inline double now(void) {
    struct timespec ts;
    clock_gettime(g_cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* qsort comparator of doubles, ascending (medians). */
static inline int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Uniform in [-1, 1) from a fixed-seed xorshift64 (same inputs every run). */
static uint64_t g_rng = 88172645463325252ULL;
static inline float rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

/* -i NAME: pin the R8/RK impl named NAME (kern_r8_impl_name: scalar, avx2,
 * vnni, neon, dotprod).  0, or -1 after a message on stderr when NAME is
 * unknown or this CPU lacks it. */
static inline int pin_impl(const char *tool, const char *name) {
    for (int impl = 0; impl < KERN_R8_IMPL_COUNT; impl++)
        if (!strcmp(name, kern_r8_impl_name(impl))) {
            if (!kern_r8_force_impl(impl)) return 0;
            break;
        }
    fprintf(stderr, "%s: impl %s unknown or not available here\n", tool, name);
    return -1;
}

#endif
