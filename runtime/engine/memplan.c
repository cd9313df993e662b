/*
 * memplan.c — see memplan.h.  Each part below names the buffer of
 * engine.c (or api.c's session) it stands for.
 */
#include "memplan.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/pool.h"
#include "engine.h"
#include "kernels/kern.h"

int memplan_n_ctx(const cf_model_desc *d, int n_ctx) {
    if (n_ctx <= 0) n_ctx = d->n_ctx_train < 4096 ? d->n_ctx_train : 4096; /* eng_ctx_new */
    return n_ctx < 1 ? 512 : n_ctx;
}

/* statm: size resident shared ... in pages; shared = file-backed + shmem */
static uint64_t statm(int anon) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, resident = 0, shared = 0;
    int ok = f && fscanf(f, "%llu %llu %llu", &size, &resident, &shared) == 3;
    if (f) fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    if (!ok || page <= 0) return 0;
    return (uint64_t)(anon ? (resident > shared ? resident - shared : 0) : resident) * (uint64_t)page;
}

uint64_t memplan_rss_now(void) { return statm(0); }
uint64_t memplan_anon_now(void) { return statm(1); }

/* A mapping's header line in smaps: "lo-hi perms offset dev inode [path]". */
static int smaps_header(const char *line, uintptr_t *lo, uintptr_t *hi, char *perms, char *path, size_t path_cap) {
    unsigned long a, b;
    int used = 0;
    if (sscanf(line, "%lx-%lx %4s %*s %*s %*s %n", &a, &b, perms, &used) < 3 || !used) return 0;
    snprintf(path, path_cap, "%s", line + used);
    path[strcspn(path, "\n")] = 0;
    *lo = a;
    *hi = b;
    return 1;
}

uint64_t memplan_code_unrun(void) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return 0;
    char line[4608], path[4096], perms[8], own[4096] = "";
    uintptr_t lo, hi, self = (uintptr_t)memplan_code_unrun;
    /* the object this function is in: its path */
    while (fgets(line, sizeof line, f))
        if (smaps_header(line, &lo, &hi, perms, path, sizeof path) && self >= lo && self < hi) {
            snprintf(own, sizeof own, "%s", path);
            break;
        }
    rewind(f);
    int counting = 0;
    unsigned long long size_kb = 0, rss_kb = 0, v;
    while (fgets(line, sizeof line, f)) {
        if (smaps_header(line, &lo, &hi, perms, path, sizeof path)) {
            const char *base = strrchr(path, '/');
            base = base ? base + 1 : path;
            counting = perms[2] == 'x' && path[0] == '/' &&
                       ((own[0] && !strcmp(path, own)) || !strncmp(base, "libm.so", 7) ||
                                             !strncmp(base, "libc.so", 7));
        } else if (counting && sscanf(line, "Size: %llu kB", &v) == 1) size_kb += v;
        else if (counting && sscanf(line, "Rss: %llu kB", &v) == 1) rss_kb += v;
    }
    fclose(f);
    return size_kb > rss_kb ? (uint64_t)(size_kb - rss_kb) * 1024 : 0;
}

static void add_kind(memplan_parts *p, int type, int mapped, uint64_t bytes) {
    int k = 0;
    while (k < p->n_kinds && !(p->kinds[k].type == type && p->kinds[k].mapped == mapped)) k++;
    if (k == p->n_kinds) {
        if (k == MEMPLAN_MAX_KINDS) k--; /* more kinds than any model has: fold into the last */
        else {
            /* keep mapped first, then by type id: insertion into the sorted list */
            while (k > 0 && (p->kinds[k - 1].mapped < mapped ||
                             (p->kinds[k - 1].mapped == mapped && p->kinds[k - 1].type > type))) {
                p->kinds[k] = p->kinds[k - 1];
                k--;
            }
            p->kinds[k] = (memplan_kind){.type = type, .mapped = mapped};
            p->n_kinds++;
        }
    }
    p->kinds[k].n_tensors++;
    p->kinds[k].bytes += bytes;
    p->weights_bytes += bytes;
}

int memplan_parts_of(const gguf_file *g, const cf_model_desc *d, int n_ctx, int n_threads,
                     int act_quant, int kv_type_k, int kv_type_v, memplan_parts *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    n_ctx = memplan_n_ctx(d, n_ctx);
    if (n_threads <= 0) n_threads = pool_default_threads();
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    int tied = 1;
    for (int i = 0; i < d->n_weights; i++)
        if (!strcmp(d->weight_names[i], "output.weight")) tied = 0;
    /* eng_model_bind: a weight in its file type stays in the mapping (and is
     * prefaulted, except an untied token_embd, which get_rows reads by row);
     * any other is converted into the anonymous region, 64-byte aligned. */
    uint64_t in_flight[64] = {0}; /* the n_threads largest converted sources, descending */
    int n_flight = n_threads < 64 ? n_threads : 64;
    uint64_t act_row_max = 0; /* bytes of the widest converted activation row */
    for (int i = 0; i < d->n_weights; i++) {
        const gguf_tensor *t = gguf_find_tensor(g, d->weight_names[i]);
        if (!t)
            return snprintf(err, err_len, "tensor '%s': compiled code needs it, the file lacks it",
                            d->weight_names[i]), -1;
        int dst = d->weight_types[i];
        if (dst != CF_F32) { /* f32 weights keep f32 activations: no converted row */
            size_t rb = dst >= GGUF_CINFER_TYPE_FIRST ? (size_t)t->ne[0] / 32 * 34 /* Q8_0 rows */
                                                     : kern_act_row_bytes(dst, (int)t->ne[0]);
            if (rb > act_row_max) act_row_max = rb;
        }
        if ((int)t->type == dst) {
            uint64_t b = t->n_bytes;
            if (!tied && !strcmp(t->name, "token_embd.weight")) {
                uint64_t rows = t->n_elems / (uint64_t)t->ne[0];
                uint64_t row_bytes = t->n_bytes / (rows ? rows : 1);
                uint64_t touched = (uint64_t)n_ctx * ((row_bytes + page - 1) / page * page + page);
                if (touched < b) b = touched;
                out->embd_bytes = b;
            }
            add_kind(out, dst, 1, b);
            continue;
        }
        int n_cols = (int)t->ne[0];
        uint64_t n_rows = t->n_elems / (uint64_t)t->ne[0];
        uint64_t b = dst == CF_F32 ? t->n_elems * sizeof(float)
                                   : kern_repack_bytes(dst, (int)n_rows, n_cols);
        add_kind(out, dst, 0, (b + 63) & ~(uint64_t)63);
        for (int k = 0; k < n_flight; k++)
            if (t->n_bytes > in_flight[k]) {
                memmove(in_flight + k + 1, in_flight + k, (size_t)(n_flight - k - 1) * sizeof *in_flight);
                in_flight[k] = t->n_bytes;
                break;
            }
    }
    for (int k = 0; k < n_flight; k++) out->load_bytes += in_flight[k];
    /* eng_ctx_new: K and V per layer, rows of their cache types (V of
     * kv_dim_v: MLA's latent cache has none) */
    for (int l = 0; l < d->n_layer; l++)
        out->kv_bytes += (uint64_t)n_ctx *
                         ((d->kv_dim[l] > 0 ? kern_kv_row_bytes(kv_type_k, d->kv_dim[l]) : sizeof(float)) +
                          (d->kv_dim_v[l] > 0 ? kern_kv_row_bytes(kv_type_v, d->kv_dim_v[l]) : 0));
    /* the arena holds every value as (n_batch, width) rows; a batch of T
     * tokens writes the first T rows of each, and no batch exceeds n_ctx */
    uint64_t t_max = (uint64_t)(n_ctx < d->n_batch ? n_ctx : d->n_batch);
    out->arena_bytes = (uint64_t)d->arena_floats * sizeof(float) * t_max / (uint64_t)d->n_batch;
    /* pool_reserve gives every thread kern_scratch_bytes_act(...) bytes, but
     * only the part in use is resident: each thread's kernel scratch, and in
     * thread 0's the matmul activations converted to their vec_dot_type,
     * a row per token of the batch (kern_q8_mm.c, kern_r8_mm.c) */
    out->scratch_bytes = (uint64_t)n_threads * ((kern_scratch_bytes(n_ctx) + 63) & ~(size_t)63);
    if (act_quant) out->scratch_bytes += t_max * act_row_max;
    /* eng_ctx logits (one row) and positions; the session's token history
     * and its copy of the logits (api.c cinfer_session_new) */
    out->logits_bytes = 2 * (uint64_t)d->n_vocab * sizeof(float) + (uint64_t)d->n_batch * sizeof(int) +
                        (uint64_t)n_ctx * sizeof(int32_t);
    /* eng_ctx_open: the live recurrent state (calloc'd, every float written
     * each step) and the snapshot slots (malloc'd; a slot's pages are
     * resident once a snapshot is taken in it: chat takes one per turn,
     * so a long session fills them all) */
    if (d->state_floats > 0)
        out->state_bytes = (uint64_t)d->state_floats * sizeof(float) +
                           (uint64_t)ENG_DEFAULT_SNAPSHOTS *
                               ((uint64_t)d->state_floats * sizeof(float) + (uint64_t)d->n_vocab * sizeof(float));
    return 0;
}
