/*
 * emit.c — IR → one C translation unit, by filling templates.
 *
 * templates/forward.c.in is a compilable C file whose "begin NAME ... end"
 * regions are replaced here; templates/ops.c.in holds one kernel-call line per
 * op with $placeholders.  This file never spells C syntax of its own beyond
 * list punctuation: what a forward pass looks like lives in the templates.
 *
 * Activation buffers: each IR value needs CF_N_BATCH rows of its width.  A
 * linear scan over the ops assigns arena offsets, reusing the buffers of dead
 * values (first fit) and letting in-place ops (rope, add) take over their
 * first input's buffer when that input dies there.  An op may ask for scratch
 * (the expert matmul's gathered rows): a block owned only while the op runs.
 * The result is deterministic: the same IR always gives the same text.
 */
#include "emit.h"

#include "prelude.h" /* CF_MATMUL_N_MAX */

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a growable string ---------------------------------------------------- */

typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_putn(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 4096;
        while (nc < b->len + n + 1) nc *= 2;
        char *ns = realloc(b->s, nc);
        if (!ns) {
            b->oom = 1;
            return;
        }
        b->s = ns;
        b->cap = nc;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

static void sb_puts(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        sb_putn(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb_putn(b, big, (size_t)n);
    free(big);
}

/* A float literal that round-trips exactly (9 significant digits). */
static void sb_float(sbuf *b, float f) {
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.9g", (double)f);
    sb_puts(b, tmp);
    if (!strpbrk(tmp, ".eEn")) sb_puts(b, ".0");
    sb_puts(b, "f");
}

/* ---- buffer allocation ---------------------------------------------------- */

typedef struct {
    long off, size; /* floats */
    int owner;      /* value id using it, -1 when free */
} block;

/* A free block of at least need floats (first fit), or a new one at the top. */
static int take_block(block *blk, int *n, long *top, long need, int owner) {
    for (int k = 0; k < *n; k++)
        if (blk[k].owner == -1 && blk[k].size >= need) {
            blk[k].owner = owner;
            return k;
        }
    blk[*n] = (block){*top, need, owner};
    *top += need;
    return (*n)++;
}

/* val_off[v]: arena offset of value v; scratch_off[o]: of op o's scratch. */
static int assign_buffers(const ir_program *p, int n_batch, long *val_off, long *scratch_off,
                          long *arena_floats, char *err, size_t err_len) {
    int cap = p->n_values + p->n_ops + 1, n = 0;
    block *blk = calloc((size_t)cap, sizeof *blk);
    if (!blk) return snprintf(err, err_len, "emit: out of memory"), -1;
    long top = 0;
    const int SCRATCH = -2; /* owner of the current op's scratch */
    for (int o = 0; o < p->n_ops; o++) {
        const ir_op *op = &p->ops[o];
        int v = op->out;
        if (op->scratch_per_tok > 0 || op->scratch_min > 0) {
            long need = (long)op->scratch_per_tok * n_batch;
            if (need < op->scratch_min) need = op->scratch_min;
            scratch_off[o] = blk[take_block(blk, &n, &top, need, SCRATCH)].off;
        }
        if (v >= 0) {
            long need = (long)p->values[v].n * n_batch;
            int got = -1;
            if (ir_info(op->code)->inplace == 2 && p->values[op->in[0]].last_use != o) {
                free(blk);
                return snprintf(err, err_len,
                                "%s:%d: %s works in place, but its input is used again later "
                                "(line %d); use the result instead",
                                p->files[op->file], op->line, ir_info(op->code)->name,
                                p->ops[p->values[op->in[0]].last_use].line), -1;
            }
            if (ir_info(op->code)->inplace && op->in[0] >= 0 &&
                p->values[op->in[0]].last_use == o) {
                for (int k = 0; k < n; k++)
                    if (blk[k].owner == op->in[0]) got = k;
            }
            if (got < 0) got = take_block(blk, &n, &top, need, v);
            blk[got].owner = v;
            val_off[v] = blk[got].off;
        }
        /* Free what dies here (after the output is placed: no kernel sees its
         * output overlap an input unless the op is in place), and the scratch. */
        for (int k = 0; k < n; k++) {
            int w = blk[k].owner;
            if (w == SCRATCH || (w >= 0 && w != v && p->values[w].last_use <= o)) blk[k].owner = -1;
        }
        if (v >= 0 && p->values[v].last_use <= o) /* never read: free now */
            for (int k = 0; k < n; k++)
                if (blk[k].owner == v) blk[k].owner = -1;
    }
    free(blk);
    *arena_floats = top > 0 ? top : 1;
    return 0;
}

/* ---- templates ------------------------------------------------------------ */

/* The text an op template file gives op `name` under marker kind `kind`
 * ("op" in ops.c.in; "kernel" and "launch" in ops.cu.in): what follows
 * "/\*@kind name*\/" to the end of its line, joined with a space to the
 * indented lines right after it (continuations, leading blanks dropped), so
 * that the op stays on one output line under its #line.  Appends to *t;
 * returns -1 when there is no such marker. */
static int op_template(const char *ops, const char *kind, const char *name, sbuf *t) {
    char marker[96];
    snprintf(marker, sizeof marker, "/*@%s %s*/", kind, name);
    const char *m = strstr(ops, marker);
    if (!m) return -1;
    m += strlen(marker);
    for (int first = 1;; first = 0) {
        while (*m == ' ') m++;
        const char *e = strchr(m, '\n');
        if (!first) sb_puts(t, " ");
        sb_putn(t, m, e ? (size_t)(e - m) : strlen(m));
        if (!e || (e[1] != ' ' && e[1] != '\t')) break;
        m = e + 1;
        const char *q = m;
        while (*q == ' ' || *q == '\t') q++;
        if (*q == '\n' || !*q) break; /* a blank line ends the op */
    }
    return 0;
}

static void put_buf(sbuf *b, const long *val_off, int v) {
    sb_printf(b, "A + %ld", val_off[v]);
}

/* Append the text for placeholder k (kl chars) of op (index op_index); -1
 * when it is unknown or names something the op does not have.  "opt_" + a
 * placeholder: a null pointer when that input or weight is absent.  sig:
 * what $sig expands to (NULL: $sig is not available here).  A group line
 * (matmul_n: the n_group ops group[], the first is op) also has $n_group
 * and "each_" + a placeholder: that placeholder of every op of the group,
 * separated by ", ". */
static int put_placeholder(sbuf *b, const ir_program *p, const ir_op *op, int op_index, const long *val_off,
                           long scratch_off, const char *sig, const int *group, int n_group, const char *k,
                           size_t kl) {
#define IS(lit) (kl == sizeof(lit) - 1 && memcmp(k, lit, kl) == 0)
    if (n_group > 0 && kl > 5 && !memcmp(k, "each_", 5)) {
        for (int g = 0; g < n_group; g++) {
            if (g) sb_puts(b, ", ");
            if (put_placeholder(b, p, &p->ops[group[g]], group[g], val_off, scratch_off, sig, NULL, 0, k + 5, kl - 5))
                return -1;
        }
        return 0;
    }
    if (n_group > 0 && IS("n_group")) return sb_printf(b, "%d", n_group), 0;
    if (kl > 4 && !memcmp(k, "opt_", 4)) {
        const char *r = k + 4;
        size_t rl = kl - 4;
        int absent = (rl == 3 && !memcmp(r, "in", 2) && r[2] >= '0' && r[2] < '0' + IR_MAX_IN &&
                      op->in[r[2] - '0'] < 0) ||
                     (rl == 1 && r[0] == 'w' && op->w < 0);
        if (absent) return sb_puts(b, "(float *)0"), 0;
        return put_placeholder(b, p, op, op_index, val_off, scratch_off, sig, group, n_group, r, rl);
    }
    if (IS("out") && op->out >= 0) put_buf(b, val_off, op->out);
    else if (kl == 3 && !memcmp(k, "in", 2) && k[2] >= '0' && k[2] < '0' + IR_MAX_IN && op->in[k[2] - '0'] >= 0)
        put_buf(b, val_off, op->in[k[2] - '0']);
    else if (IS("w") && op->w >= 0) sb_printf(b, "W[%d]", op->w);
    else if (kl == 3 && !memcmp(k, "wi", 2) && k[2] >= '0' && k[2] < '0' + IR_MAX_I &&
             (ir_info(op->code)->wi >> (k[2] - '0') & 1)) {
        if (op->i[k[2] - '0'] >= 0) sb_printf(b, "W[%lld]", (long long)op->i[k[2] - '0']);
        else sb_puts(b, "(const void *)0");
    }
    else if (IS("scratch") && (op->scratch_per_tok > 0 || op->scratch_min > 0))
        sb_printf(b, "A + %ld", scratch_off);
    else if (IS("state") && op->state_floats > 0)
        sb_printf(b, "E->state + %ld", op->state_off);
    else if (IS("wname") && op->w >= 0) sb_puts(b, p->weights[op->w].name);
    else if (IS("k")) sb_printf(b, "%d", op_index);
    else if (IS("sig") && sig) sb_puts(b, sig);
    else if (IS("o_out")) sb_printf(b, "%ld", op->out >= 0 ? val_off[op->out] : -1L);
    else if (kl == 5 && !memcmp(k, "o_in", 4) && k[4] >= '0' && k[4] < '0' + IR_MAX_IN)
        sb_printf(b, "%ld", op->in[k[4] - '0'] >= 0 ? val_off[op->in[k[4] - '0']] : -1L);
    else if (IS("wslot")) sb_printf(b, "%d", op->w);
    else if (kl == 8 && !memcmp(k, "wslot_i", 7) && k[7] >= '0' && k[7] < '0' + IR_MAX_I &&
             (ir_info(op->code)->wi >> (k[7] - '0') & 1))
        sb_printf(b, "%lld", op->i[k[7] - '0'] >= 0 ? (long long)op->i[k[7] - '0'] : -1LL);
    else if (IS("wtype") && op->w >= 0) sb_printf(b, "%d", p->weights[op->w].type);
    else if (IS("n") && op->out >= 0) sb_printf(b, "%d", p->values[op->out].n);
    else if (kl == 2 && k[0] == 'i' && k[1] >= '0' && k[1] < '0' + IR_MAX_I)
        sb_printf(b, "%lld", (long long)op->i[k[1] - '0']);
    else if (kl == 2 && k[0] == 'f' && k[1] >= '0' && k[1] < '0' + IR_MAX_F)
        sb_float(b, op->f[k[1] - '0']);
    else return -1;
#undef IS
    return 0;
}

static int expand_op(sbuf *b, const ir_program *p, const ir_op *op, int op_index, const long *val_off,
                     long scratch_off, const char *tpl, size_t tpl_len, const char *tpl_name, const char *sig,
                     const int *group, int n_group, char *err, size_t err_len) {
    const char *s = tpl, *end = tpl + tpl_len;
    while (s < end) {
        const char *d = memchr(s, '$', (size_t)(end - s));
        if (!d) {
            sb_putn(b, s, (size_t)(end - s));
            break;
        }
        sb_putn(b, s, (size_t)(d - s));
        const char *q = d + 1;
        while (q < end && ((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') || *q == '_')) q++;
        size_t kl = (size_t)(q - d - 1);
        const char *k = d + 1;
        if (put_placeholder(b, p, op, op_index, val_off, scratch_off, sig, group, n_group, k, kl)) {
            snprintf(err, err_len, "emit: %s: op '%s' uses unknown or unbound $%.*s", tpl_name,
                     ir_info(op->code)->name, (int)kl, k);
            return -1;
        }
        s = q;
    }
    return 0;
}

/* $sig of an op: FNV-1a (64 bits, hex) of its "kernel" line expanded with
 * $sig empty.  Two ops get the same signature exactly when their kernels
 * are the same text, so they can share them (kernels are named by it). */
static int op_sig(const ir_program *p, const ir_op *op, int op_index, const long *val_off, long scratch_off,
                  const char *ops, const char *tpl_name, char sig[17], char *err, size_t err_len) {
    sbuf t = {0}, x = {0};
    int rc = -1;
    if (op_template(ops, "kernel", ir_info(op->code)->name, &t) || t.oom)
        snprintf(err, err_len, t.oom ? "emit: out of memory" : "emit: %s has no 'kernel' line for op '%s'", tpl_name,
                 ir_info(op->code)->name);
    else if (!expand_op(&x, p, op, op_index, val_off, scratch_off, t.s, t.len, tpl_name, "", NULL, 0, err, err_len)) {
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t i = 0; i < x.len; i++) h = (h ^ (unsigned char)x.s[i]) * 0x100000001b3ull;
        snprintf(sig, 17, "%016llx", (unsigned long long)h);
        rc = x.oom ? -1 : 0;
        if (x.oom) snprintf(err, err_len, "emit: out of memory");
    }
    free(t.s);
    free(x.s);
    return rc;
}

/* The ops from op i on that run as one matmul_n line: consecutive matmuls
 * of the same input value and width (q, k and v; gate and up), at most
 * CF_MATMUL_N_MAX, each optionally followed by the in-place add_row of its
 * bias (emitted after the matmul_n line: it touches only its own matmul's
 * output).  The outputs' buffers must overlap neither the input's nor each
 * other's.  Fills mm[] with the matmuls' op indices and returns how many
 * ops the run spans; *n_mm < 2: op i goes alone. */
static int matmul_group(const ir_program *p, int i, const long *val_off, long n_batch, int *mm, int *n_mm) {
    const ir_op *a = &p->ops[i];
    int j = i;
    *n_mm = 0;
    if (a->code != IR_MATMUL) return 1;
    while (*n_mm < CF_MATMUL_N_MAX && j < p->n_ops && p->ops[j].code == IR_MATMUL && p->ops[j].in[0] == a->in[0] &&
           p->ops[j].i[1] == a->i[1] && p->ops[j].out >= 0) {
        mm[(*n_mm)++] = j++;
        const ir_op *b = &p->ops[j - 1];
        if (j < p->n_ops && p->ops[j].code == IR_ADD_ROW && p->ops[j].in[0] == b->out && p->ops[j].out >= 0 &&
            val_off[p->ops[j].out] == val_off[b->out])
            j++;
    }
    /* buffers: [off, off + n * n_batch) floats */
    for (int g = 0; g < *n_mm; g++) {
        const int v = p->ops[mm[g]].out;
        const long lo = val_off[v], hi = lo + (long)p->values[v].n * n_batch;
        for (int h = -1; h < g; h++) {
            const int u = h < 0 ? a->in[0] : p->ops[mm[h]].out;
            const long ulo = val_off[u], uhi = ulo + (long)p->values[u].n * n_batch;
            if (lo < uhi && ulo < hi) *n_mm = 0;
        }
    }
    if (*n_mm < 2) {
        *n_mm = 0;
        return 1;
    }
    return j - i;
}

/* One line of the body: op i's template line (or, with n_group, the
 * matmul_n line of the ops group[]) under op i's #line, the weights named
 * in a comment.  t: a buffer for the template text.  0 or -1 (err). */
static int emit_line(sbuf *b, sbuf *t, const ir_program *p, int i, const char *kind, const int *group, int n_group,
                     const char *ops, const char *tpl_name, const long *val_off, long scratch_off, const char *sig,
                     char *err, size_t err_len) {
    const ir_op *op = &p->ops[i];
    const char *tname = n_group ? "matmul_n" : ir_info(op->code)->name;
    t->len = 0;
    if (op_template(ops, kind, tname, t) || t->oom)
        return snprintf(err, err_len, t->oom ? "emit: out of memory" : "emit: %s has no '%s' line for op '%s'",
                        tpl_name, kind, tname), -1;
    sb_printf(b, "#line %d \"%s\"\n%s", op->line, p->files[op->file], *kind == 'k' ? "" : "    ");
    if (expand_op(b, p, op, i, val_off, scratch_off, t->s, t->len, tpl_name, sig, group, n_group, err, err_len))
        return -1;
    if (op->w >= 0 && *kind != 'k') {
        for (int g = 0; g < (n_group ? n_group : 1); g++)
            sb_printf(b, g ? ", %s" : " /* %s", p->weights[n_group ? p->ops[group[g]].w : op->w].name);
        sb_puts(b, " */");
    }
    sb_puts(b, "\n");
    return 0;
}

static void emit_region(sbuf *b, const char *name, const ir_program *p, const emit_options *o,
                        const long *val_off, const long *scratch_off, long arena_floats,
                        const char *ops, int *rc, char *err, size_t err_len) {
    if (!strcmp(name, "banner")) {
        sb_printf(b,
                  "/* Generated by cinfer %s from %s for model fingerprint %016llx (%s).\n"
                  " * Do not edit: regenerate with `cinfer compile MODEL --emit-c FILE`. */\n",
                  o->generator_version, p->archspec_path, (unsigned long long)p->fingerprint,
                  p->arch);
        if (o->precision && strcmp(o->precision, "native"))
            sb_printf(b, "/* Compute precision: %s (matmul weights repacked at load, see "
                         "docs/precisions.md). */\n", o->precision);
    } else if (!strcmp(name, "prelude")) {
        sb_puts(b, o->prelude);
        if (b->len && b->s[b->len - 1] != '\n') sb_puts(b, "\n");
    } else if (!strcmp(name, "constants")) {
        sb_printf(b, "#define CF_ARCH \"%s\"\n", p->arch);
        sb_printf(b, "#define CF_FINGERPRINT \"%016llx\"\n", (unsigned long long)p->fingerprint);
        sb_printf(b, "#define CF_N_VOCAB %d\n#define CF_N_EMBD %d\n#define CF_N_LAYER %d\n",
                  p->n_vocab, p->n_embd, p->n_layer);
        sb_printf(b, "#define CF_N_CTX_TRAIN %d\n#define CF_N_BATCH %d\n", p->n_ctx_train,
                  o->n_batch);
        sb_printf(b, "#define CF_ARENA_FLOATS %ldL\n#define CF_N_WEIGHTS %d\n", arena_floats,
                  p->n_weights);
        sb_printf(b, "#define CF_ENCODER %d\n", p->encoder);
        sb_printf(b, "#define CF_STATE_FLOATS %ldL\n", p->state_floats);
    } else if (!strcmp(name, "kv_dim")) {
        for (int l = 0; l < p->n_layer; l++) sb_printf(b, "    %d,\n", p->kv_dim[l]);
    } else if (!strcmp(name, "kv_dim_v")) {
        for (int l = 0; l < p->n_layer; l++) sb_printf(b, "    %d,\n", p->kv_dim_v[l]);
    } else if (!strcmp(name, "state_dim")) {
        for (int l = 0; l < p->n_layer; l++) sb_printf(b, "    %ld,\n", p->state_dim[l]);
    } else if (!strcmp(name, "weight_names")) {
        for (int w = 0; w < p->n_weights; w++) sb_printf(b, "    \"%s\",\n", p->weights[w].name);
    } else if (!strcmp(name, "weight_types")) {
        for (int w = 0; w < p->n_weights; w++)
            sb_printf(b, "    %d, /* %s */\n", p->weights[w].type,
                      ggml_type_name((uint32_t)p->weights[w].type));
    } else if (!strcmp(name, "weight_shapes")) {
        for (int w = 0; w < p->n_weights; w++) {
            const int64_t *ne = p->weights[w].t->ne;
            sb_printf(b, "    %lld, %lld, %lld, %lld,\n", (long long)ne[0], (long long)ne[1],
                      (long long)ne[2], (long long)ne[3]);
        }
    } else if (!strcmp(name, "prelude_cuda") && o->prelude_cuda) {
        sb_puts(b, o->prelude_cuda);
        if (b->len && b->s[b->len - 1] != '\n') sb_puts(b, "\n");
    } else if (!strcmp(name, "body") || !strcmp(name, "kernels") || !strcmp(name, "launches")) {
        /* one line per op: its call (C), its kernels or its launch request (CUDA) */
        const char *kind = !strcmp(name, "body") ? "op" : !strcmp(name, "kernels") ? "kernel" : "launch";
        const char *tpl_name = o->ops_template_name ? o->ops_template_name : "templates/ops.c.in";
        sbuf t = {0};
        uint64_t *seen = NULL; /* kernels: the signatures already emitted */
        int n_seen = 0;
        if (*kind == 'k' && !(seen = malloc(((size_t)p->n_ops + 1) * sizeof *seen))) b->oom = 1;
        /* runs of matmuls of one input become one matmul_n line where the template has one */
        const int group_mm = *kind == 'o' && !op_template(ops, kind, "matmul_n", &t);
        for (int i = 0; i < p->n_ops && !*rc && !b->oom; i++) {
            const ir_op *op = &p->ops[i];
            char sig[17];
            int have_sig = *kind != 'o' && !op_sig(p, op, i, val_off, scratch_off[i], ops, tpl_name, sig, err, err_len);
            if (*kind != 'o' && !have_sig) {
                *rc = -1;
                break;
            }
            if (seen) { /* an op whose kernels another op already defined emits none */
                uint64_t h = strtoull(sig, NULL, 16);
                int dup = 0;
                for (int j = 0; j < n_seen && !dup; j++) dup = seen[j] == h;
                if (dup) continue;
                seen[n_seen++] = h;
            }
            /* a run of matmuls of one input: the matmul_n line, then the run's bias adds */
            int group[CF_MATMUL_N_MAX], n_group = 0;
            const int span = group_mm ? matmul_group(p, i, val_off, o->n_batch, group, &n_group) : 1;
            if (!n_group) {
                *rc = emit_line(b, &t, p, i, kind, NULL, 0, ops, tpl_name, val_off, scratch_off[i],
                                have_sig ? sig : NULL, err, err_len);
                continue;
            }
            *rc = emit_line(b, &t, p, i, kind, group, n_group, ops, tpl_name, val_off, scratch_off[i], NULL, err,
                            err_len);
            for (int k = i + 1; k < i + span && !*rc; k++)
                if (p->ops[k].code != IR_MATMUL)
                    *rc = emit_line(b, &t, p, k, kind, NULL, 0, ops, tpl_name, val_off, scratch_off[k], NULL, err,
                                    err_len);
            i += span - 1;
        }
        free(t.s);
        free(seen);
    } else {
        snprintf(err, err_len, "emit: %s: unknown region '%s'", o->forward_template_name, name);
        *rc = -1;
    }
}

int emit_c(const ir_program *p, const emit_options *o, char **out, size_t *out_len, char *err,
           size_t err_len) {
    *out = NULL;
    long *val_off = calloc((size_t)p->n_values + 1, sizeof *val_off);
    long *scratch_off = calloc((size_t)p->n_ops + 1, sizeof *scratch_off);
    long arena_floats = 0;
    if (!val_off || !scratch_off) {
        free(val_off);
        free(scratch_off);
        return snprintf(err, err_len, "emit: out of memory"), -1;
    }
    if (assign_buffers(p, o->n_batch, val_off, scratch_off, &arena_floats, err, err_len)) {
        free(val_off);
        free(scratch_off);
        return -1;
    }
    sbuf b = {0};
    int rc = 0, line = 1;
    const char *s = o->forward_template;
    static const char begin_mark[] = "/*@begin ", end_mark[] = "/*@end*/";
    while (*s && !rc) {
        const char *nl = strchr(s, '\n');
        size_t ll = nl ? (size_t)(nl - s + 1) : strlen(s);
        if (!strncmp(s, begin_mark, sizeof begin_mark - 1)) {
            char name[64];
            const char *ns = s + sizeof begin_mark - 1, *ne = strstr(ns, "*/");
            if (!ne || ne - ns >= (long)sizeof name || ne > s + ll) {
                snprintf(err, err_len, "emit: %s:%d: malformed region marker",
                         o->forward_template_name, line);
                rc = -1;
                break;
            }
            memcpy(name, ns, (size_t)(ne - ns));
            name[ne - ns] = 0;
            /* skip to the end marker */
            const char *e = s + ll;
            int l2 = line + 1;
            while (*e && strncmp(e, end_mark, sizeof end_mark - 1)) {
                const char *n2 = strchr(e, '\n');
                e = n2 ? n2 + 1 : e + strlen(e);
                l2++;
            }
            if (!*e) {
                snprintf(err, err_len, "emit: %s:%d: region '%s' has no end marker",
                         o->forward_template_name, line, name);
                rc = -1;
                break;
            }
            emit_region(&b, name, p, o, val_off, scratch_off, arena_floats, o->ops_template, &rc,
                        err, err_len);
            const char *n2 = strchr(e, '\n');
            s = n2 ? n2 + 1 : e + strlen(e);
            line = l2 + 1;
            sb_printf(&b, "#line %d \"%s\"\n", line, o->forward_template_name);
            continue;
        }
        sb_putn(&b, s, ll);
        s += ll;
        line++;
    }
    free(val_off);
    free(scratch_off);
    if (!rc && b.oom) {
        snprintf(err, err_len, "emit: out of memory");
        rc = -1;
    }
    if (rc) {
        free(b.s);
        return -1;
    }
    *out = b.s;
    *out_len = b.len;
    return 0;
}
