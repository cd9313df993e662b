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
    int n_expert;        /* an expert tensor: its experts, each a slice of eb bytes; 0: dense */
    uint64_t eb;
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
    /* the expert LRU: compute thread only (stream_touch's thread rule) */
    int n_expert;     /* experts per layer, the most of any layer (0: no expert tensors) */
    int moe_cache;    /* experts per layer kept mapped; 0: not known yet (n_expert_used) */
    int *exp_first;   /* (n_groups + 1) index into exp_spans */
    int *exp_spans;   /* the expert tensors' span indices (into spans), by layer */
    char *eres;       /* (n_groups * n_expert) expert mapped */
    uint64_t *estamp; /* (n_groups * n_expert) the visit it was last routed in */
    int *n_eres;      /* (n_groups) experts mapped */
    uint64_t visit;   /* layer entries so far */
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

/* Start reading [p, p + n) of the mapping into the page cache, exactly
 * those pages (MADV_WILLNEED: asynchronous, the file's own range, no
 * read-around); gguf_populate then waits for them and maps them. */
static void read_start(const void *p, uint64_t n) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)p & ~(page - 1), hi = ((uintptr_t)p + n + page - 1) & ~(page - 1);
    (void)madvise((void *)lo, hi - lo, MADV_WILLNEED); /* advice: without it the faults read */
}

/* The layer window: the dense tensors of layer g (expert tensors are the LRU's). */
static void for_group(eng_stream *s, int g, int populate) {
    for (int i = s->group_first[g]; i < s->group_first[g + 1]; i++) {
        if (s->by_group[i].n_expert) continue;
        uint64_t n = (uint64_t)(s->by_group[i].hi - s->by_group[i].lo);
        if (populate) {
            read_start(s->by_group[i].lo, n);
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

/* "blk.N.ffn_gate_exps.weight" [n_in, n_out, n_expert] (also up, down, gate_up): one matrix per expert. */
static int expert_count(const gguf_tensor *t) {
    size_t n = strlen(t->name);
    return n > 12 && !strcmp(t->name + n - 12, "_exps.weight") && t->n_dims == 3 && t->ne[2] > 1 &&
                   t->n_bytes % (uint64_t)t->ne[2] == 0 ? (int)t->ne[2] : 0;
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
        int ne = l >= 0 ? expert_count(t) : 0;
        sp[n++] = (span){(const char *)t->data, (const char *)t->data + t->n_bytes, l, ne,
                         ne ? t->n_bytes / (uint64_t)ne : 0};
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
        if (sp[i].n_expert) continue;
        if (sp[i].group < 0) *global += b;
        else per[sp[i].group] += b, *layer_total += b;
    }
    for (int l = 0; per && l < groups; l++)
        if (per[l] > *layer_max) *layer_max = per[l];
    free(per);
    free(sp);
}

void stream_expert_bytes(const gguf_file *g, const cf_model_desc *d, uint64_t *per_expert, int *n_expert,
                         int *n_moe_layers, uint64_t *total) {
    *per_expert = *total = 0;
    *n_expert = *n_moe_layers = 0;
    span *sp;
    int n, groups;
    if (build_spans(g, d, NULL, &sp, &n, &groups)) return;
    uint64_t *per = calloc((size_t)groups + 1, sizeof *per);
    for (int i = 0; per && i < n; i++) {
        if (!sp[i].n_expert) continue;
        per[sp[i].group] += sp[i].eb;
        *total += (uint64_t)(sp[i].hi - sp[i].lo);
        if (sp[i].n_expert > *n_expert) *n_expert = sp[i].n_expert;
    }
    for (int l = 0; per && l < groups; l++) {
        if (per[l]) ++*n_moe_layers;
        if (per[l] > *per_expert) *per_expert = per[l];
    }
    free(per);
    free(sp);
}

int stream_new(const gguf_file *g, const cf_model_desc *d, const void *const *W, int ahead, int keep,
               int moe_cache, eng_stream **out, char *err, size_t err_len) {
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
        s->n_groups = -1; /* no helper to join */
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
    int moe = 0;
    for (int k = 0; k < s->n_spans; k++) moe |= s->spans[k].n_expert > 0;
    for (int k = 0; k < s->n_spans; k++)
        if (s->spans[k].group >= 0) {
            uintptr_t lo = (uintptr_t)s->spans[k].lo & ~(page - 1), hi = ((uintptr_t)s->spans[k].hi + page - 1) & ~(page - 1);
            (void)madvise((void *)lo, hi - lo, MADV_NOHUGEPAGE); /* advice: failure costs only memory */
            /* a MoE model's layers: no read-around on a fault.  With a large
             * read_ahead_kb (8 MiB here) a fault reads megabytes around it —
             * experts never routed — into the page cache, which a memory
             * limit then charges and reclaims (measured: 20x the bytes
             * needed read per token; 40 % more with read-around left on the
             * dense tensors next to the experts); the reads are asked for
             * exactly (read_start).  A dense model keeps it: its layers are
             * read whole anyway, and under a limit that reclaims a populated
             * page before its use the read-around refills it in large reads
             * (measured without it: 3-4x slower, page-sized faults) */
            if (moe) (void)madvise((void *)lo, hi - lo, MADV_RANDOM);
        }
    /* the expert tensors by layer, for the LRU */
    int n_exp = 0;
    for (int k = 0; k < s->n_spans; k++)
        if (s->by_group[k].n_expert) {
            n_exp++;
            if (s->by_group[k].n_expert > s->n_expert) s->n_expert = s->by_group[k].n_expert;
        }
    if (s->n_expert) {
        size_t cells = (size_t)s->n_groups * (size_t)s->n_expert;
        s->exp_first = calloc((size_t)s->n_groups + 1, sizeof *s->exp_first);
        s->exp_spans = malloc(((size_t)n_exp + 1) * sizeof *s->exp_spans);
        s->eres = calloc(cells, 1);
        s->estamp = calloc(cells, sizeof *s->estamp);
        s->n_eres = calloc((size_t)s->n_groups, sizeof *s->n_eres);
        if (!s->exp_first || !s->exp_spans || !s->eres || !s->estamp || !s->n_eres) {
            s->n_groups = -1; /* no helper to join */
            stream_free(s);
            return snprintf(err, err_len, "stream: out of memory"), -1;
        }
        int e = 0;
        for (int l = 0; l < s->n_groups; l++) {
            s->exp_first[l] = e;
            for (int k = 0; k < s->n_spans; k++) /* spans is sorted by address: find by_group's in it */
                if (s->spans[k].group == l && s->spans[k].n_expert) s->exp_spans[e++] = k;
        }
        s->exp_first[s->n_groups] = e;
        s->moe_cache = moe_cache > 0 ? (moe_cache < s->n_expert ? moe_cache : s->n_expert) : 0;
    }
    uint64_t lmax, ltot, glob, per_expert, etot;
    int n_expert, n_moe;
    stream_layer_bytes(g, d, &lmax, &ltot, &glob);
    stream_expert_bytes(g, d, &per_expert, &n_expert, &n_moe, &etot);
    s->st = (stream_stats){.layer_bytes_max = lmax, .global_bytes = glob, .n_layers = s->n_groups, .ahead = s->ahead,
                         .keep = s->keep < s->n_groups ? s->keep : s->n_groups, .n_expert = s->n_expert,
                         .moe_cache = s->moe_cache, .expert_bytes = per_expert};
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
    free(s->exp_first);
    free(s->exp_spans);
    free(s->eres);
    free(s->estamp);
    free(s->n_eres);
    free(s);
}

/* ---- the expert LRU ------------------------------------------------------------------ */

/* Expert e's slice of every expert tensor of layer l: start its reads
 * (populate 0), or map it in, waiting for them (1). */
static void expert_read(eng_stream *s, int l, int e, int populate) {
    for (int k = s->exp_first[l]; k < s->exp_first[l + 1]; k++) {
        const span *t = &s->spans[s->exp_spans[k]];
        if (e >= t->n_expert) continue;
        if (!populate) read_start(t->lo + (uint64_t)e * t->eb, t->eb);
        else if (!gguf_populate(s->g, t->lo + (uint64_t)e * t->eb, t->eb))
            __atomic_fetch_add(&s->st.populated_bytes, t->eb, __ATOMIC_RELAXED);
    }
}

/* Drop, in every expert tensor of layer l, each run of experts the LRU does
 * not hold: the pages wholly inside the run (gguf_release_pages rounds
 * inward), so a page an expert shares with a held neighbour stays, and one
 * shared with another tensor too.  Runs rather than just the evicted
 * experts: a fault maps the pages around it as well (fault-around, 64 KiB
 * by default), neighbours the LRU never read would otherwise stay mapped. */
static void experts_sweep(eng_stream *s, int l) {
    const char *res = s->eres + (size_t)l * (size_t)s->n_expert;
    for (int k = s->exp_first[l]; k < s->exp_first[l + 1]; k++) {
        const span *t = &s->spans[s->exp_spans[k]];
        for (int e = 0; e < t->n_expert;) {
            if (res[e]) {
                e++;
                continue;
            }
            int e1 = e;
            while (e1 < t->n_expert && !res[e1]) e1++;
            (void)gguf_release_pages(s->g, t->lo + (uint64_t)e * t->eb, (uint64_t)(e1 - e) * t->eb);
            e = e1;
        }
    }
}

/* Leaving layer l: drop its least recently routed experts beyond the cache
 * (a prompt batch may route more than it holds: stream_experts makes room
 * before reading, sparing the visit's own), then what was mapped
 * around them: by this visit's reads, or by the helper's read of the
 * layer's dense tensors (fault-around past a tensor's end).  Every time: a
 * drop of unmapped pages only walks their page table (microseconds). */
/* Forget layer l's least recently routed expert, except those routed in
 * visit `spare` (0: none spared); its pages go at the next sweep.  0 when
 * there is none to forget. */
static int expert_evict(eng_stream *s, int l, uint64_t spare) {
    char *res = s->eres + (size_t)l * (size_t)s->n_expert;
    const uint64_t *stamp = s->estamp + (size_t)l * (size_t)s->n_expert;
    int victim = -1;
    for (int e = 0; e < s->n_expert; e++)
        if (res[e] && (!spare || stamp[e] != spare) && (victim < 0 || stamp[e] < stamp[victim])) victim = e;
    if (victim < 0) return 0;
    res[victim] = 0;
    s->n_eres[l]--;
    s->st.expert_evictions++;
    __atomic_fetch_add(&s->st.dropped_bytes, s->st.expert_bytes, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&s->st.expert_resident_bytes, s->st.expert_bytes, __ATOMIC_RELAXED);
    return 1;
}

static void experts_trim(eng_stream *s, int l) {
    if (!s->n_expert || l < 0 || s->exp_first[l] == s->exp_first[l + 1]) return;
    const int cap = s->moe_cache > 0 ? s->moe_cache : s->n_expert;
    while (s->n_eres[l] > cap && expert_evict(s, l, 0)) {
    }
    experts_sweep(s, l);
}

void stream_experts(eng_stream *s, const void *w, const int *experts, int n, int n_expert_used) {
    const char *p = w;
    int lo = 0, hi = s->n_spans - 1, i = -1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (p < s->spans[mid].lo) hi = mid - 1;
        else if (p >= s->spans[mid].hi) lo = mid + 1;
        else {
            i = mid;
            break;
        }
    }
    stream_touch(s, w);
    if (i < 0 || !s->spans[i].n_expert) return;
    if (!s->moe_cache) { /* the default: the experts of one step */
        s->moe_cache = n_expert_used > 0 ? (n_expert_used < s->n_expert ? n_expert_used : s->n_expert) : 1;
        s->st.moe_cache = s->moe_cache;
    }
    const int l = s->spans[i].group;
    char *res = s->eres + (size_t)l * (size_t)s->n_expert;
    uint64_t *stamp = s->estamp + (size_t)l * (size_t)s->n_expert;
    /* the routed ones are this visit's (spared below); make room for the
     * missing ones first, so that at most max(cache, routed) are mapped */
    int missing = 0;
    for (int j = 0; j < n; j++)
        if (experts[j] >= 0 && experts[j] < s->n_expert) {
            missing += !res[experts[j]];
            if (res[experts[j]] && stamp[experts[j]] != s->visit) s->st.expert_hits++;
            stamp[experts[j]] = s->visit;
        }
    int evicted = 0;
    while (missing && s->n_eres[l] + missing > s->moe_cache && expert_evict(s, l, s->visit)) evicted = 1;
    if (evicted) experts_sweep(s, l);
    for (int j = 0; j < n; j++) /* every missing expert's reads in flight at once */
        if (experts[j] >= 0 && experts[j] < s->n_expert && !res[experts[j]]) expert_read(s, l, experts[j], 0);
    for (int j = 0; j < n; j++) {
        const int e = experts[j];
        if (e < 0 || e >= s->n_expert) continue;
        if (!res[e]) {
            res[e] = 1;
            s->n_eres[l]++;
            expert_read(s, l, e, 1);
            s->st.expert_misses++;
            __atomic_fetch_add(&s->st.expert_resident_bytes, s->st.expert_bytes, __ATOMIC_RELAXED);
        }
    }
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
    s->visit++;
    if (prev >= 0) experts_trim(s, prev);
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
    out->expert_resident_bytes = __atomic_load_n(&s->st.expert_resident_bytes, __ATOMIC_RELAXED);
}
