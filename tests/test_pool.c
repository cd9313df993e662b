/* test_pool.c — fork-join pool: every index exactly once per run, sleeps and
 * wakes, scratch, the NULL pool. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "base/pool.h"
#include "test.h"

enum { MAX_T = 8 };

typedef struct {
    atomic_int hits[MAX_T];
    atomic_int bad_nth;
    int expect_nth;
    long payload[MAX_T]; /* plain writes: must be visible after pool_run */
    long run_id;
} count_job;

static void count_fn(void *arg, int ith, int nth) {
    count_job *j = arg;
    if (nth != j->expect_nth || ith < 0 || ith >= nth) {
        atomic_fetch_add(&j->bad_nth, 1);
        return;
    }
    atomic_fetch_add(&j->hits[ith], 1);
    j->payload[ith] = j->run_id * 100 + ith;
}

static void run_many(int n_threads, int n_runs, int sleep_every) {
    pool *p = NULL;
    EXPECT_EQ_I(pool_new(n_threads, &p), 0);
    if (!p) return;
    EXPECT_EQ_I(pool_n_threads(p), n_threads);
    count_job j = {.expect_nth = n_threads};
    for (int r = 0; r < n_runs; r++) {
        j.run_id = r;
        pool_run(p, count_fn, &j);
        for (int i = 0; i < n_threads; i++) {
            if (atomic_load(&j.hits[i]) != r + 1) {
                test_fail(__FILE__, __LINE__, "threads %d run %d: index %d ran %d times in total, expected %d",
                          n_threads, r, i, atomic_load(&j.hits[i]), r + 1);
                goto out;
            }
            if (j.payload[i] != (long)r * 100 + i) {
                test_fail(__FILE__, __LINE__, "threads %d run %d: write of index %d not visible", n_threads, r, i);
                goto out;
            }
        }
        if (sleep_every && r % sleep_every == sleep_every - 1) {
            struct timespec ts = {0, 2 * 1000 * 1000}; /* past the spin budget: workers futex-sleep */
            nanosleep(&ts, NULL);
        }
    }
out:
    EXPECT_EQ_I(atomic_load(&j.bad_nth), 0);
    pool_free(p);
}

TEST(pool, every_index_once_1_2_4) {
    run_many(1, 200, 0);
    run_many(2, 2000, 0);
    run_many(4, 2000, 0);
}

TEST(pool, wakes_after_sleep) {
    run_many(2, 40, 1);
    run_many(4, 40, 3);
}

TEST(pool, null_pool_runs_inline) {
    count_job j = {.expect_nth = 1};
    pool_run(NULL, count_fn, &j);
    EXPECT_EQ_I(atomic_load(&j.hits[0]), 1);
    EXPECT_EQ_I(pool_n_threads(NULL), 1);
    size_t b = 123;
    EXPECT(pool_scratch(NULL, 0, &b) == NULL);
    EXPECT_EQ_I(b, 0);
    pool_free(NULL);
}

TEST(pool, scratch) {
    pool *p;
    EXPECT_EQ_I(pool_new(3, &p), 0);
    size_t b = 1;
    EXPECT(pool_scratch(p, 0, &b) == NULL);
    EXPECT_EQ_I(b, 0);
    EXPECT_EQ_I(pool_reserve(p, 1000), 0);
    void *s[3];
    for (int i = 0; i < 3; i++) {
        s[i] = pool_scratch(p, i, &b);
        EXPECT(s[i] != NULL);
        EXPECT(b >= 1000);
        EXPECT_EQ_I((uintptr_t)s[i] % 64, 0);
        memset(s[i], i, b); /* ASan: the whole size is usable */
    }
    EXPECT(s[0] != s[1] && s[1] != s[2] && s[0] != s[2]);
    EXPECT(pool_scratch(p, 3, NULL) == NULL);
    EXPECT_EQ_I(pool_reserve(p, 10), 0); /* never shrinks */
    pool_scratch(p, 1, &b);
    EXPECT(b >= 1000);
    EXPECT_EQ_I(pool_reserve(p, 5000), 0);
    pool_scratch(p, 2, &b);
    EXPECT(b >= 5000);
    pool_free(p);
}

TEST(pool, default_threads) {
    int n = pool_default_threads();
    EXPECT(n >= 1 && n <= 4096);
    pool *p;
    EXPECT_EQ_I(pool_new(0, &p), 0); /* 0: default */
    EXPECT_EQ_I(pool_n_threads(p), n);
    pool_free(p);
}
