/*
 * stream.c — see stream.h.
 */
#include "stream.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
    const char *lo, *hi; /* [lo, hi) of one tensor's data */
    int group;           /* layer, or -1: resident */
} span;

struct eng_stream {
    const gguf_file *g;
    span *spans; /* (n_spans) sorted by lo */
    int n_spans;
    int n_groups;
    span *by_group; /* (n_spans) sorted by group: the helper's view */
    int *group_first; /* (n_groups + 1) index into by_group */
    int ahead;
    int keep;         /* groups < keep are never dropped */
    int cur;          /* compute thread: the layer it is in (-2: none yet) */
    /* shared with the helper, under lock */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int want;         /* the layer the forward pass entered; -2: none */
    int stop;
    pthread_t helper;
    char *resident;   /* (n_groups) mapped in: set by the helper's reads and by the
                       * compute thread entering a layer, cleared by the helper's
                       * drops (atomics: a stale view costs only page faults) */
    char *window;     /* helper only: (n_groups) scratch, the groups to keep */
    stream_stats st;
};

/* "blk.12.attn_q.weight" -> 12; -1 otherwise. */
static int layer_of(const char *name) {
    if (strncmp(name, "blk.", 4)) return -1;
    char *end;
    long l = strtol(name + 4, &end, 10);
    return end != name + 4 && *end == '.' && l >= 0 && l < 1 << 20 ? (int)l : -1;
}

static int by_lo(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}
static int by_group(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->group != y->group ? (x->group < y->group ? -1 : 1) : by_lo(a, b);
}

static void for_group(eng_stream *s, int g, int populate) {
    for (int i = s->group_first[g]; i < s->group_first[g + 1]; i++) {
        uint64_t n = (uint64_t)(s->by_group[i].hi - s->by_group[i].lo);
        if (populate) {
            if (!gguf_populate(s->g, s->by_group[i].lo, n))
                __atomic_fetch_add(&s->st.populated_bytes, n, __ATOMIC_RELAXED);
        } else if (!gguf_release_pages(s->g, s->by_group[i].lo, n))
            __atomic_fetch_add(&s->st.dropped_bytes, n, __ATOMIC_RELAXED);
    }
}

static void *helper_main(void *arg) {
    eng_stream *s = arg;
    pthread_mutex_lock(&s->lock);
    for (int seen = -2;;) {
        while (!s->stop && s->want == seen) pthread_cond_wait(&s->wake, &s->lock);
        if (s->stop) break;
        int cur = seen = s->want;
        pthread_mutex_unlock(&s->lock);
        /* the window: cur and the `ahead` layers after it (wrapping: after
         * the last layer the next token starts at layer 0) */
        char *in = s->window;
        int n = s->n_groups;
        memset(in, 0, (size_t)n);
        for (int k = 0; k <= s->ahead && k < n; k++) in[(cur + k) % n] = 1;
        for (int k = 1; k <= s->ahead && k < n; k++) {
            int g = (cur + k) % n;
            if (!__atomic_exchange_n(&s->resident[g], 1, __ATOMIC_RELAXED)) for_group(s, g, 1);
        }
        /* what it read ahead for a window the forward pass has left already
         * (it ran late); never the layer being computed */
        int now = __atomic_load_n(&s->cur, __ATOMIC_RELAXED);
        for (int g = 0; g < n; g++)
            if (!in[g] && g >= s->keep && g != now && (g - now + n) % n > s->ahead &&
                __atomic_exchange_n(&s->resident[g], 0, __ATOMIC_RELAXED))
                for_group(s, g, 0);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static int build_spans(const gguf_file *g, const cf_model_desc *d, const void *const *W, span **out,
                       int *n_out, int *n_groups) {
    span *sp = calloc((size_t)d->n_weights + 1, sizeof *sp);
    if (!sp) return -1;
    int n = 0, groups = 0;
    for (int i = 0; i < d->n_weights; i++) {
        const gguf_tensor *t = gguf_find_tensor(g, d->weight_names[i]);
        if (!t || (W && W[i] != t->data)) continue; /* converted at bind: not in the mapping */
        int l = layer_of(t->name);
        sp[n++] = (span){(const char *)t->data, (const char *)t->data + t->n_bytes, l};
        if (l + 1 > groups) groups = l + 1;
    }
    *out = sp;
    *n_out = n;
    *n_groups = groups;
    return 0;
}

void stream_layer_bytes(const gguf_file *g, const cf_model_desc *d, uint64_t *layer_max, uint64_t *layer_total,
                        uint64_t *global) {
    *layer_max = *layer_total = *global = 0;
    span *sp;
    int n, groups;
    if (build_spans(g, d, NULL, &sp, &n, &groups)) return;
    uint64_t *per = calloc((size_t)groups + 1, sizeof *per);
    for (int i = 0; per && i < n; i++) {
        uint64_t b = (uint64_t)(sp[i].hi - sp[i].lo);
        if (sp[i].group < 0) *global += b;
        else per[sp[i].group] += b, *layer_total += b;
    }
    for (int l = 0; per && l < groups; l++)
        if (per[l] > *layer_max) *layer_max = per[l];
    free(per);
    free(sp);
}

int stream_new(const gguf_file *g, const cf_model_desc *d, const void *const *W, int ahead, int keep,
               eng_stream **out, char *err, size_t err_len) {
    *out = NULL;
    eng_stream *s = calloc(1, sizeof *s);
    if (!s || build_spans(g, d, W, &s->spans, &s->n_spans, &s->n_groups)) {
        free(s);
        return snprintf(err, err_len, "stream: out of memory"), -1;
    }
    s->g = g;
    s->ahead = ahead < 1 ? 1 : ahead;
    s->keep = keep > 0 ? keep : 0;
    s->cur = s->want = -2;
    s->by_group = malloc(((size_t)s->n_spans + 1) * sizeof *s->by_group);
    s->group_first = calloc((size_t)s->n_groups + 2, sizeof *s->group_first);
    s->resident = calloc((size_t)s->n_groups + 1, 1);
    s->window = calloc((size_t)s->n_groups + 1, 1);
    if (!s->by_group || !s->group_first || !s->resident || !s->window) {
        stream_free(s);
        return snprintf(err, err_len, "stream: out of memory"), -1;
    }
    qsort(s->spans, (size_t)s->n_spans, sizeof *s->spans, by_lo);
    memcpy(s->by_group, s->spans, (size_t)s->n_spans * sizeof *s->spans);
    qsort(s->by_group, (size_t)s->n_spans, sizeof *s->by_group, by_group);
    /* group_first[l]: first span of layer l in by_group (layer spans follow the -1 ones) */
    int i = 0;
    while (i < s->n_spans && s->by_group[i].group < 0) i++;
    for (int l = 0; l <= s->n_groups; l++) {
        while (i < s->n_spans && s->by_group[i].group < l) i++;
        s->group_first[l] = i;
    }
    /* 4 KiB mappings for the layers: a file mapping aligned to 2 MiB may
     * otherwise be mapped in huge folios, whose faults map far more than
     * the bytes read (measured: every layer resident after the first token) */
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (int k = 0; k < s->n_spans; k++)
        if (s->spans[k].group >= 0) {
            uintptr_t lo = (uintptr_t)s->spans[k].lo & ~(page - 1), hi = ((uintptr_t)s->spans[k].hi + page - 1) & ~(page - 1);
            (void)madvise((void *)lo, hi - lo, MADV_NOHUGEPAGE); /* advice: failure costs only memory */
        }
    uint64_t lmax, ltot, glob;
    stream_layer_bytes(g, d, &lmax, &ltot, &glob);
    s->st = (stream_stats){.layer_bytes_max = lmax, .global_bytes = glob, .n_layers = s->n_groups, .ahead = s->ahead,
                         .keep = s->keep < s->n_groups ? s->keep : s->n_groups};
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    if (s->n_groups > 0 && pthread_create(&s->helper, NULL, helper_main, s)) {
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->wake);
        s->n_groups = -1; /* no helper to join */
        stream_free(s);
        return snprintf(err, err_len, "stream: cannot start the read-ahead thread"), -1;
    }
    *out = s;
    return 0;
}

void stream_free(eng_stream *s) {
    if (!s) return;
    if (s->n_groups > 0) {
        pthread_mutex_lock(&s->lock);
        s->stop = 1;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->helper, NULL);
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->wake);
    }
    free(s->spans);
    free(s->by_group);
    free(s->group_first);
    free(s->resident);
    free(s->window);
    free(s);
}

void stream_touch(eng_stream *s, const void *w) {
    const char *p = w;
    int lo = 0, hi = s->n_spans - 1, g = -1;
    while (lo <= hi) { /* the span holding p */
        int mid = (lo + hi) / 2;
        if (p < s->spans[mid].lo) hi = mid - 1;
        else if (p >= s->spans[mid].hi) lo = mid + 1;
        else {
            g = s->spans[mid].group;
            break;
        }
    }
    /* cur is the evaluating thread's; atomic so that sessions taking turns
     * on other threads read a defined value */
    int prev = __atomic_load_n(&s->cur, __ATOMIC_RELAXED);
    if (g < 0 || g == prev) return;
    __atomic_store_n(&s->cur, g, __ATOMIC_RELAXED);
    /* The layer just finished is dropped here, not by the helper: with the
     * pool's workers spinning on every core the helper may run late, and
     * the resident window must not grow while it waits (a zap of one
     * layer's page-table entries: tens of microseconds) */
    if (prev >= s->keep && (prev - g + s->n_groups) % s->n_groups > s->ahead) { /* prev outside [g, g + ahead] */
        /* unconditionally: its pages may have been faulted in again after
         * the helper last dropped it */
        __atomic_store_n(&s->resident[prev], 0, __ATOMIC_RELAXED);
        for_group(s, prev, 0);
    }
    __atomic_store_n(&s->resident[g], 1, __ATOMIC_RELAXED); /* the compute threads map it now */
    pthread_mutex_lock(&s->lock);
    s->want = g;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

void stream_get_stats(eng_stream *s, stream_stats *out) {
    *out = s->st; /* the constant fields; the helper's counters are atomics */
    out->populated_bytes = __atomic_load_n(&s->st.populated_bytes, __ATOMIC_RELAXED);
    out->dropped_bytes = __atomic_load_n(&s->st.dropped_bytes, __ATOMIC_RELAXED);
}
