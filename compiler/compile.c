/*
 * compile.c — drives archspec → IR → C, then compiles the C:
 *   JIT  libtcc in memory (milliseconds; the default for run/chat/serve),
 *   AOT  the system C compiler at -O3 -march=native into a shared object that
 *        is cached and dlopen'ed, or into a standalone executable.
 * Generated code only orchestrates runtime kernels, so JIT and AOT compute
 * bit-identical results; AOT saves the (small) call overhead and start-up.
 *
 * Cache: $XDG_CACHE_HOME/cinfer/<fingerprint>-<key>.so where key hashes the
 * generated source, CINFER_VERSION and the CPU model/ISA (the object is built
 * with -march=native).  Writes go to a temporary name and are renamed into
 * place, so a crash never leaves a truncated object under the final name.
 */
#include "compile.h"

#include <dlfcn.h>
#include <pthread.h>
#include <errno.h>
#include <libtcc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "archspec.h"
#include "cinfer.h"
#include "base/readall.h"
#include "base/specfile.h"
#include "emit.h"
#include "kernels/cuda/cfk_geom.h"
#include "kernels/cuda/cfk_quant.cuh"
#include "kernels/kern.h"
#include "kernels/precision.h"

#ifndef CINFER_LINK_LIBS /* set by the Makefile to its LIBS */
#define CINFER_LINK_LIBS "-llua5.4 -ltcc -lcjson -lxxhash -ldl -lpthread -lm"
#endif

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* ---- project files ---------------------------------------------------------- */

int cc_spec_file(const char *name, char **data, size_t *len, char *err, size_t err_len) {
    return spec_file_read(name, data, len, err, err_len);
}

void cc_supported_archs(char *buf, size_t cap) {
    if (!cap) return;
    buf[0] = 0;
    char **names = NULL, err[256];
    size_t n = 0;
    if (spec_file_list("archspecs", ".lua", &names, &n, err, sizeof err)) return;
    for (size_t i = 0; i < n; i++) {
        /* "archspecs/qwen2.lua"; not common.lua, nor a Hugging Face mapping
         * table ("llama.hf.lua": architecture names have no dot) */
        const char *f = names[i] + strlen("archspecs/");
        size_t len = strlen(f) - 4, l = strlen(buf);
        if (!strcmp(f, "common.lua") || memchr(f, '.', len)) continue;
        snprintf(buf + l, cap - l, "%s%.*s", l ? ", " : "", (int)len, f);
    }
    spec_file_names_free(names, n);
}

/* ---- compute precisions ------------------------------------------------------ */

/* Choose the compiled type of every weight that only matmuls read
 * (IR_MATMUL, IR_LOGITS, the experts of IR_MOE_MATMUL), or, under auto,
 * matmuls and get_rows (IR_EMBED / IR_POS_EMBED: tied embeddings, whose
 * output projection is the largest matmul of a small model; get_rows
 * dequantizes a row of the interleaved types to the native type's values,
 * so the embeddings do not change); a weight also read by a norm, a bias,
 * a per-head matmul or any other op keeps its file type, and so does a
 * router (a matmul whose output feeds moe_route, through a bias): routing
 * decisions are discrete, so a rounded router can pick other experts —
 * llama-quantize never quantizes ffn_gate_inp either.  A tensor already in a repacked type (a .giw) must
 * keep it: it cannot be converted again. */
static int apply_precision(ir_program *p, int precision, char *err, size_t err_len) {
    if (precision == CINFER_PRECISION_NATIVE) return 0;
    if (precision < 0 || precision >= CINFER_PRECISION_COUNT)
        return snprintf(err, err_len, "compute precision %d: expected 0..%d", precision,
                        CINFER_PRECISION_COUNT - 1), -1;
    char *mm = calloc((size_t)p->n_weights + 1, 1); /* bits: 1 matmul, 4 get_rows, 2 other use */
    if (!mm) return snprintf(err, err_len, "out of memory"), -1;
    for (int o = 0; o < p->n_ops; o++) {
        const ir_op *op = &p->ops[o];
        int is_mm = op->code == IR_MATMUL || op->code == IR_LOGITS || op->code == IR_MOE_MATMUL;
        const int is_rows = op->code == IR_EMBED || op->code == IR_POS_EMBED;
        if (op->w >= 0) mm[op->w] |= is_mm ? 1 : is_rows ? 4 : 2;
        for (int k = 0; k < IR_MAX_I; k++)
            if ((ir_info(op->code)->wi >> k & 1) && op->i[k] >= 0) mm[op->i[k]] |= 2;
        if (op->code == IR_MOE_ROUTE) {
            const ir_op *d = &p->ops[p->values[op->in[0]].def];
            while (d->code == IR_ADD_ROW) d = &p->ops[p->values[d->in[0]].def];
            if (d->code == IR_MATMUL) mm[d->w] |= 2;
        }
    }
    int rc = 0;
    for (int w = 0; w < p->n_weights && !rc; w++) {
        const gguf_tensor *t = p->weights[w].t;
        const int mm_only = mm[w] == 1, tied = mm[w] == 5; /* tied: matmul + get_rows */
        int dst = mm_only || tied ? prec_weight_type(precision, t->name, (int)t->type, (long)t->ne[1], (long)t->ne[0])
                                  : (int)t->type;
        /* a tied embedding only under auto, whose interleave is lossless (the
         * lossy precisions would round the embeddings too; int4mix keeps an
         * untied output.weight in 8 bits for the logits' sake already), and
         * only into Q4_0_R8 / Q8_0_R8: measured on a Llama-3.2-1B-shape file
         * (128256 x 2048 tied, quiet, tg128), Q4_0 -> Q4_0_R8 decodes 1.1x at
         * 2 threads, but Q6_K -> Q6_K_R8 (Q4_K_M's tied table) 0.85x at both
         * thread counts: the Q6_K_R8 one-token leaf from DRAM is slower than
         * the native one, so a Q6_K table stays native */
        if (tied && (precision != CINFER_PRECISION_AUTO || !kern_type_is_r8(dst))) dst = (int)t->type;
        if ((int)t->type >= GGUF_CINFER_TYPE_FIRST && dst != (int)t->type) {
            snprintf(err, err_len, "tensor '%s' is already repacked as %s: compile %s from the "
                     "source GGUF, not from a .giw", t->name, ggml_type_name(t->type),
                     prec_name(precision));
            rc = -1;
        }
        p->weights[w].type = dst;
    }
    free(mm);
    return rc;
}

/* ---- what the CUDA kernels cover ------------------------------------------------ */

/* Refuse, before emitting, what the CUDA path cannot run: an op without a
 * kernel line in templates/ops.cu.in (MoE, SSM, ... until they get one), a
 * weight type the kernels do not decode, shapes past the kernels' limits
 * (runtime/kernels/cuda/cfk_geom.h).  One line, naming the op or tensor and
 * the archspec line. */
static int cuda_supported(const ir_program *p, const char *ops_cu, char *err, size_t err_len) {
    for (int o = 0; o < p->n_ops; o++) {
        const ir_op *op = &p->ops[o];
        const char *name = ir_info(op->code)->name;
        char marker[96];
        snprintf(marker, sizeof marker, "/*@kernel %s*/", name);
        if (!strstr(ops_cu, marker))
            return snprintf(err, err_len, "not supported on --device cuda: op '%s' (%s:%d; no CUDA kernel yet, "
                            "run it on the CPU)", name, p->files[op->file], op->line), -1;
        /* forms of attention its CUDA kernels do not compute (the CPU kernels do) */
        const char *form = NULL;
        if (op->code == IR_ATTENTION && op->i[6] >= 0) form = "with attention sinks";
        else if (op->code == IR_ATTENTION && op->i[5] != op->i[3]) form = "with a value head size other than the key's";
        else if (op->code == IR_ATTENTION && op->in[1] >= 0 && op->in[2] < 0) form = "with values read from the keys";
        else if (op->code == IR_ATTENTION && op->i[4] < 0) form = "without a causal mask (an encoder's)";
        if (form)
            return snprintf(err, err_len, "not supported on --device cuda: op '%s' %s (%s:%d; no CUDA kernel for "
                            "that form yet, run it on the CPU)", name, form, p->files[op->file], op->line), -1;
        int reads_rows = op->code == IR_MATMUL || op->code == IR_LOGITS || op->code == IR_EMBED ||
                         op->code == IR_POS_EMBED;
        int ws[2] = {op->w, op->code == IR_LAYER_NORM ? (int)op->i[0] : op->code == IR_LOGITS ? (int)op->i[2] : -1};
        for (int k = 0; k < 2; k++) {
            if (ws[k] < 0) continue;
            const ir_weight *w = &p->weights[ws[k]];
            if (reads_rows && k == 0 ? !CFK_TYPE_SUPPORTED(w->type) : w->type != CFK_T_F32)
                return snprintf(err, err_len, "not supported on --device cuda: tensor '%s' is %s for %s (%s:%d); "
                                "the CUDA kernels read %s", w->name, ggml_type_name((uint32_t)w->type), name,
                                p->files[op->file], op->line,
                                reads_rows && k == 0 ? "F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K weights"
                                                     : "F32 norm weights and biases"), -1;
        }
        if (op->code == IR_ATTENTION && (op->i[3] > CFK_ATT_MAX_HD || op->i[3] < 1))
            return snprintf(err, err_len, "not supported on --device cuda: attention head_dim %lld (%s:%d; the "
                            "CUDA kernels take 1..%d)", (long long)op->i[3], p->files[op->file], op->line,
                            CFK_ATT_MAX_HD), -1;
        if (op->code == IR_ROPE && (op->i[2] / 2 > CFK_ROPE_MAX_PAIRS || op->i[2] < 2))
            return snprintf(err, err_len, "not supported on --device cuda: rope n_rot %lld (%s:%d; the CUDA kernel "
                            "takes 2..%d)", (long long)op->i[2], p->files[op->file], op->line,
                            2 * CFK_ROPE_MAX_PAIRS), -1;
    }
    return 0;
}

/* ---- generation ------------------------------------------------------------- */

/* Tokens per forward call when the caller does not choose: 512; an encoder
 * (bidirectional attention) sees its whole input in one call, so its batch
 * is the default context, min(n_ctx_train, 4096) (eng_ctx_new). */
static int default_n_batch(const ir_program *p) {
    if (!p->encoder) return 512;
    return p->n_ctx_train > 0 && p->n_ctx_train < 4096 ? p->n_ctx_train : 4096;
}

int cc_generate(const gguf_file *g, const cc_options *o, char **src, size_t *src_len, char *err,
                size_t err_len) {
    *src = NULL;
    char *spec = NULL, *common = NULL, *prelude = NULL, *fwd = NULL, *ops = NULL, *prelude_cuda = NULL;
    const int cuda = o->device == CC_DEVICE_CUDA;
    size_t spec_len = 0, common_len = 0, n;
    char spec_name[512];
    ir_program *p = NULL;
    int rc = -1;

    if (o->archspec_path) {
        snprintf(spec_name, sizeof spec_name, "%s", o->archspec_path);
        FILE *f = fopen(o->archspec_path, "rb");
        if (!f) {
            snprintf(err, err_len, "archspec %s: %s", o->archspec_path, strerror(errno));
            goto done;
        }
        fseek(f, 0, SEEK_END);
        long sz = ftell(f);
        rewind(f);
        spec = sz >= 0 ? malloc((size_t)sz + 1) : NULL;
        if (!spec || fread(spec, 1, (size_t)sz, f) != (size_t)sz) {
            fclose(f);
            snprintf(err, err_len, "archspec %s: read error", o->archspec_path);
            goto done;
        }
        fclose(f);
        spec[sz] = 0;
        spec_len = (size_t)sz;
    } else {
        gguf_str arch;
        if (gguf_get_str(g, "general.architecture", &arch, err, err_len)) goto done;
        if (arch.len == 0 || arch.len > 64 || memchr(arch.ptr, '/', arch.len) ||
            memchr(arch.ptr, '.', arch.len) || gguf_str_eq(arch, "common")) {
            snprintf(err, err_len, "general.architecture '%.*s' is not a valid architecture name",
                     (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
            goto done;
        }
        snprintf(spec_name, sizeof spec_name, "archspecs/%.*s.lua", (int)arch.len, arch.ptr);
        char e2[256], list[1024];
        if (cc_spec_file(spec_name, &spec, &spec_len, e2, sizeof e2)) {
            cc_supported_archs(list, sizeof list);
            snprintf(err, err_len, "architecture '%.*s' is not supported; supported: %s",
                     (int)arch.len, arch.ptr, list);
            goto done;
        }
    }
    if (cuda && o->precision != CINFER_PRECISION_AUTO && o->precision != CINFER_PRECISION_NATIVE) {
        snprintf(err, err_len, "--quant %s is not supported on --device cuda (the CUDA kernels compute on the "
                 "GGUF weight types: auto or native)", prec_name(o->precision) ? prec_name(o->precision) : "?");
        goto done;
    }
    const char *fwd_name = cuda ? "templates/forward.cu.in" : "templates/forward.c.in";
    const char *ops_name = cuda ? "templates/ops.cu.in" : "templates/ops.c.in";
    if (cc_spec_file("archspecs/common.lua", &common, &common_len, err, err_len) ||
        cc_spec_file("templates/prelude.h", &prelude, &n, err, err_len) ||
        cc_spec_file(fwd_name, &fwd, &n, err, err_len) || cc_spec_file(ops_name, &ops, &n, err, err_len) ||
        (cuda && cc_spec_file("templates/prelude_cuda.h", &prelude_cuda, &n, err, err_len)))
        goto done;
    if (archspec_build(g, common, common_len, spec, spec_len, spec_name, &p, err, err_len) ||
        (!cuda && apply_precision(p, o->precision, err, err_len)) ||
        (cuda && cuda_supported(p, ops, err, err_len)))
        goto done;
    emit_options eo = {
        .generator_version = CINFER_VERSION,
        .prelude = prelude,
        .prelude_cuda = prelude_cuda,
        .forward_template = fwd,
        .forward_template_name = fwd_name,
        .ops_template = ops,
        .ops_template_name = ops_name,
        .n_batch = o->n_batch > 0 ? o->n_batch : default_n_batch(p),
        .precision = cuda ? "native" : prec_name(o->precision),
    };
    rc = emit_c(p, &eo, src, src_len, err, err_len);
done:
    ir_free(p);
    free(spec);
    free(common);
    free(prelude);
    free(fwd);
    free(ops);
    free(prelude_cuda);
    return rc;
}

/* ---- JIT (libtcc) ----------------------------------------------------------- */

typedef struct {
    char *err;
    size_t err_len;
} tcc_err;

static void on_tcc_error(void *opaque, const char *msg) {
    tcc_err *e = opaque;
    if (!e->err[0]) snprintf(e->err, e->err_len, "tcc: %s", msg);
}

/* libtcc 0.9.27 keeps compiler state in globals: one compile at a time per
 * process.  This is the only lock in cinfer; it is held for milliseconds. */
static pthread_mutex_t tcc_lock = PTHREAD_MUTEX_INITIALIZER;

static int jit_locked(cc_module *m, const char *src, int cuda, char *err, size_t err_len);

/* cuda: src is a .cu file; only its host half (#if !__CUDACC_RTC__, without
 * __CUDACC__) is C, and it defines cf_cuda_forward instead of cf_forward. */
static int jit(cc_module *m, const char *src, int cuda, char *err, size_t err_len) {
    pthread_mutex_lock(&tcc_lock);
    int rc = jit_locked(m, src, cuda, err, err_len);
    pthread_mutex_unlock(&tcc_lock);
    return rc;
}

static int jit_locked(cc_module *m, const char *src, int cuda, char *err, size_t err_len) {
    TCCState *s = tcc_new();
    if (!s) return snprintf(err, err_len, "tcc: cannot create state"), -1;
    err[0] = 0;
    tcc_err te = {err, err_len};
    tcc_set_error_func(s, &te, on_tcc_error);
    /* The generated unit includes no headers and needs no libc or libtcc1. */
    tcc_set_options(s, "-nostdlib -nostdinc");
    if (tcc_set_output_type(s, TCC_OUTPUT_MEMORY) < 0 || tcc_compile_string(s, src) < 0 ||
        tcc_relocate(s, TCC_RELOCATE_AUTO) < 0) {
        if (!err[0]) snprintf(err, err_len, "tcc: compilation failed");
        tcc_delete(s);
        return -1;
    }
    const cf_model_desc *(*describe)(void) = (const cf_model_desc *(*)(void))tcc_get_symbol(s, "cf_describe");
    if (cuda) {
        int (*abi)(void) = (int (*)(void))tcc_get_symbol(s, "cf_cuda_abi");
        m->cuda_forward = (void (*)(cf_cuda_host *))tcc_get_symbol(s, "cf_cuda_forward");
        if (!describe || !abi || !m->cuda_forward) {
            tcc_delete(s);
            return snprintf(err, err_len, "tcc: generated CUDA code lacks cf_describe/cf_cuda_abi/cf_cuda_forward"), -1;
        }
        if (abi() != CF_CUDA_ABI_VERSION) {
            tcc_delete(s);
            return snprintf(err, err_len, "generated CUDA code has CUDA ABI %d, runtime expects %d", abi(),
                            CF_CUDA_ABI_VERSION), -1;
        }
    } else {
        m->forward = (void (*)(cf_env *))tcc_get_symbol(s, "cf_forward");
        if (!describe || !m->forward) {
            tcc_delete(s);
            return snprintf(err, err_len, "tcc: generated code lacks cf_describe/cf_forward"), -1;
        }
    }
    m->desc = describe();
    m->handle = s;
    return 0;
}

/* ---- AOT (system C compiler) ------------------------------------------------ */

int cc_cache_dir(char *buf, size_t cap, char *err, size_t err_len) {
    const char *x = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (x && *x) snprintf(buf, cap, "%s/cinfer", x);
    else if (home && *home) snprintf(buf, cap, "%s/.cache/cinfer", home);
    else return snprintf(err, err_len, "no cache directory: set XDG_CACHE_HOME or HOME"), -1;
    /* mkdir -p */
    for (char *q = buf + 1; *q; q++)
        if (*q == '/') {
            *q = 0;
            mkdir(buf, 0755);
            *q = '/';
        }
    if (mkdir(buf, 0755) && errno != EEXIST)
        return snprintf(err, err_len, "cannot create cache dir %s: %s", buf, strerror(errno)), -1;
    return 0;
}

/* CPU identity for the cache key: objects are built with -march=native. */
static void cpu_id(char *buf, size_t cap) {
    snprintf(buf, cap, "%s", kern_isa_name(kern_best_isa()));
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            size_t l = strlen(buf);
            snprintf(buf + l, cap - l, "|%s", line);
            break;
        }
    fclose(f);
}

static const char *c_compiler(void) {
    const char *cc = getenv("CC");
    return cc && *cc ? cc : "cc";
}

int cc_compiler_missing(char *name, size_t cap) {
    const char *cc = c_compiler();
    snprintf(name, cap, "%s", cc);
    /* CC may carry flags ("gcc -m64"): the program is its first word */
    char prog[512];
    snprintf(prog, sizeof prog, "%.*s", (int)strcspn(cc, " \t"), cc);
    if (strchr(prog, '/')) return access(prog, X_OK) != 0;
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        char full[1024];
        snprintf(full, sizeof full, "%.*s/%s", (int)(n ? n : 1), n ? p : ".", prog);
        if (access(full, X_OK) == 0) return 0;
        p += n + (p[n] == ':');
    }
    return 1;
}

/* The "no C compiler" error of an AOT build, or 0 when there is one. */
static int need_compiler(const char *what, char *err, size_t err_len) {
    char name[256];
    if (!cc_compiler_missing(name, sizeof name)) return 0;
    return snprintf(err, err_len, "no C compiler: %s needs '%s', which is not installed or not in PATH "
                    "(apt-get install gcc, or set CC)", what, name), -1;
}

/* Run argv; capture stderr into err on failure. */
static int run_compiler(char *const argv[], const char *log_path, char *err, size_t err_len) {
    pid_t pid = fork();
    if (pid < 0) return snprintf(err, err_len, "fork: %s", strerror(errno)), -1;
    if (pid == 0) {
        FILE *lf = freopen(log_path, "w", stderr);
        (void)lf;
        execvp(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return snprintf(err, err_len, "waitpid: %s", strerror(errno)), -1;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        unlink(log_path);
        return 0;
    }
    char first[400] = "";
    FILE *lf = fopen(log_path, "r");
    if (lf) {
        char line[400];
        while (fgets(line, sizeof line, lf))
            if (strstr(line, "error") || !first[0]) {
                snprintf(first, sizeof first, "%s", line);
                if (strstr(line, "error")) break;
            }
        fclose(lf);
    }
    first[strcspn(first, "\n")] = 0;
    snprintf(err, err_len, "%s failed (log: %s): %s", argv[0], log_path, first);
    return -1;
}

static int write_file_atomic(const char *path, const char *data, size_t len, char *err,
                             size_t err_len) {
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return snprintf(err, err_len, "%s: %s", tmp, strerror(errno)), -1;
    int bad = fwrite(data, 1, len, f) != len;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path)) {
        unlink(tmp);
        return snprintf(err, err_len, "cannot write %s", path), -1;
    }
    return 0;
}

static int aot(cc_module *m, const gguf_file *g, const char *src, size_t src_len,
               const cc_options *o, char *err, size_t err_len) {
    char dir[900], cpu[600], base[1000], c_path[1100], tmp_so[1100], log_path[1100];
    if (cc_cache_dir(dir, sizeof dir, err, err_len)) return -1;
    cpu_id(cpu, sizeof cpu);
    XXH3_state_t *h = XXH3_createState();
    if (!h) return snprintf(err, err_len, "out of memory"), -1;
    XXH3_64bits_reset(h);
    XXH3_64bits_update(h, src, src_len);
    XXH3_64bits_update(h, CINFER_VERSION, strlen(CINFER_VERSION));
    XXH3_64bits_update(h, cpu, strlen(cpu));
    XXH3_64bits_update(h, c_compiler(), strlen(c_compiler()));
    /* the source names the weight types already; the precision keeps keys
     * apart even if two precisions ever generate the same text */
    const char *prec = prec_name(o->precision);
    XXH3_64bits_update(h, prec ? prec : "?", prec ? strlen(prec) : 1);
    uint64_t key = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    snprintf(base, sizeof base, "%s/%016llx-%016llx", dir, (unsigned long long)gguf_fingerprint(g),
             (unsigned long long)key);
    snprintf(m->so_path, sizeof m->so_path, "%s.so", base);

    if (access(m->so_path, R_OK) == 0) {
        m->cache_hit = 1;
        if (o->verbose) fprintf(stderr, "cinfer: AOT cache hit: %s\n", m->so_path);
    } else {
        if (o->verbose) fprintf(stderr, "cinfer: AOT cache miss: compiling %s\n", m->so_path);
        snprintf(c_path, sizeof c_path, "%s.c", base);
        snprintf(tmp_so, sizeof tmp_so, "%s.so.tmp.%d", base, (int)getpid());
        snprintf(log_path, sizeof log_path, "%s.log", base);
        if (need_compiler("an --aot build", err, err_len)) return -1;
        if (write_file_atomic(c_path, src, src_len, err, err_len)) return -1;
        double t0 = now_ms();
        char *argv[] = {(char *)c_compiler(), "-O3", "-march=native", "-fPIC", "-shared",
                        "-o", tmp_so, c_path, NULL};
        if (run_compiler(argv, log_path, err, err_len)) {
            unlink(tmp_so);
            return -1;
        }
        if (rename(tmp_so, m->so_path)) {
            unlink(tmp_so);
            return snprintf(err, err_len, "rename %s: %s", m->so_path, strerror(errno)), -1;
        }
        m->compile_ms = now_ms() - t0;
    }
    void *dl = dlopen(m->so_path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) return snprintf(err, err_len, "dlopen %s: %s", m->so_path, dlerror()), -1;
    const cf_model_desc *(*describe)(void) = (const cf_model_desc *(*)(void))dlsym(dl, "cf_describe");
    m->forward = (void (*)(cf_env *))dlsym(dl, "cf_forward");
    if (!describe || !m->forward) {
        dlclose(dl);
        return snprintf(err, err_len, "%s lacks cf_describe/cf_forward", m->so_path), -1;
    }
    m->desc = describe();
    m->handle = dl;
    return 0;
}

/* ---- CUDA (NVRTC) --------------------------------------------------------- */

const char *const cc_cuda_header_names[CC_CUDA_N_HEADERS] = {"cf_cuda.cuh", "cfk_quant.cuh", "cfk_geom.h"};
const char *const cc_cuda_header_files[CC_CUDA_N_HEADERS] = {
    "runtime/kernels/cuda/cf_cuda.cuh", "runtime/kernels/cuda/cfk_quant.cuh", "runtime/kernels/cuda/cfk_geom.h"};

typedef struct {
    char *text[CC_CUDA_N_HEADERS];
    size_t len[CC_CUDA_N_HEADERS];
} cuda_headers;

static void cuda_headers_free(cuda_headers *h) {
    for (int i = 0; i < CC_CUDA_N_HEADERS; i++) free(h->text[i]);
}

static int cuda_headers_load(cuda_headers *h, char *err, size_t err_len) {
    memset(h, 0, sizeof *h);
    for (int i = 0; i < CC_CUDA_N_HEADERS; i++)
        if (cc_spec_file(cc_cuda_header_files[i], &h->text[i], &h->len[i], err, err_len)) {
            cuda_headers_free(h);
            return -1;
        }
    return 0;
}

int cc_cuda_cache_path(const gguf_file *g, const char *src, size_t src_len, const cc_cuda_target *t, char *path,
                       size_t cap, char *err, size_t err_len) {
    char dir[900], fields[512];
    cuda_headers hd;
    if (cc_cache_dir(dir, sizeof dir, err, err_len) || cuda_headers_load(&hd, err, err_len)) return -1;
    XXH3_state_t *h = XXH3_createState();
    if (!h) {
        cuda_headers_free(&hd);
        return snprintf(err, err_len, "out of memory"), -1;
    }
    XXH3_64bits_reset(h);
    XXH3_64bits_update(h, src, src_len);
    for (int i = 0; i < CC_CUDA_N_HEADERS; i++) {
        XXH3_64bits_update(h, cc_cuda_header_names[i], strlen(cc_cuda_header_names[i]) + 1);
        XXH3_64bits_update(h, hd.text[i], hd.len[i]);
    }
    int n = snprintf(fields, sizeof fields, "%s|%s|cc %d.%d|driver %d|nvrtc %d.%d|%s", CINFER_VERSION,
                     t->name ? t->name : "", t->cc_major, t->cc_minor, t->driver_version, t->nvrtc_major,
                     t->nvrtc_minor, t->arch ? t->arch : "");
    XXH3_64bits_update(h, fields, (size_t)n < sizeof fields ? (size_t)n : sizeof fields - 1);
    uint64_t key = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    cuda_headers_free(&hd);
    int w = snprintf(path, cap, "%s/%016llx-%016llx.%s", dir, (unsigned long long)gguf_fingerprint(g),
                     (unsigned long long)key, t->arch && !strncmp(t->arch, "compute_", 8) ? "ptx" : "cubin");
    if (w < 0 || (size_t)w >= cap) return snprintf(err, err_len, "cache path too long under %s", dir), -1;
    return 0;
}

/* A whole nonempty file in a malloc'd buffer (one NUL past the end). */
static int slurp(const char *path, unsigned char **data, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char *buf = read_all(f, (size_t)1 << 30, len); /* a CUDA image: MiB */
    fclose(f);
    if (buf && !*len) free(buf), buf = NULL;
    *data = (unsigned char *)buf;
    return buf ? 0 : -1;
}

/* The device half: the cached image for (source, GPU, driver, NVRTC), or
 * NVRTC now and the image cached (written under a temporary name, renamed). */
static int cuda_device_half(cc_module *m, const gguf_file *g, const char *src, size_t src_len,
                            const cc_options *o, char *err, size_t err_len) {
    const cuda_dev *d = o->cuda;
    char arch[24];
    if (cuda_target_arch(d, arch, sizeof arch, err, err_len)) return -1;
    cc_cuda_target t = {d->name, d->cc_major, d->cc_minor, d->driver_version, d->nvrtc_major, d->nvrtc_minor, arch};
    if (cc_cuda_cache_path(g, src, src_len, &t, m->cuda_path, sizeof m->cuda_path, err, err_len)) return -1;
    if (!slurp(m->cuda_path, &m->cuda_image.data, &m->cuda_image.len)) {
        m->cuda_image.is_cubin = !strncmp(arch, "sm_", 3);
        snprintf(m->cuda_image.arch, sizeof m->cuda_image.arch, "%s", arch);
        m->cache_hit = 1;
        if (o->verbose) fprintf(stderr, "cinfer: CUDA cache hit: %s\n", m->cuda_path);
        return 0;
    }
    if (o->verbose) fprintf(stderr, "cinfer: CUDA cache miss: NVRTC for %s (%s) -> %s\n", arch, d->name, m->cuda_path);
    cuda_headers hd;
    if (cuda_headers_load(&hd, err, err_len)) return -1;
    double t0 = now_ms();
    char *log = NULL;
    int rc = cuda_compile(d, src, "cinfer_forward.cu", CC_CUDA_N_HEADERS, (const char *const *)hd.text,
                          cc_cuda_header_names, &m->cuda_image, &log, err, err_len);
    cuda_headers_free(&hd);
    if (rc) {
        /* the whole log beside the cache entry, for the person reading the error */
        char log_path[1100], e2[64];
        snprintf(log_path, sizeof log_path, "%s.log", m->cuda_path);
        if (log && !write_file_atomic(log_path, log, strlen(log), e2, sizeof e2)) {
            size_t l = strlen(err);
            snprintf(err + l, err_len > l ? err_len - l : 0, " (log: %s)", log_path);
        }
        free(log);
        return -1;
    }
    free(log);
    m->compile_ms = now_ms() - t0;
    return write_file_atomic(m->cuda_path, (const char *)m->cuda_image.data, m->cuda_image.len, err, err_len);
}

int cc_build(const gguf_file *g, const cc_options *o, cc_module **out, char *err, size_t err_len) {
    *out = NULL;
    cc_module *m = calloc(1, sizeof *m);
    if (!m) return snprintf(err, err_len, "out of memory"), -1;
    m->mode = o->mode;
    char *src = NULL;
    size_t src_len = 0;
    double t0 = now_ms();
    if (cc_generate(g, o, &src, &src_len, err, err_len)) {
        free(m);
        return -1;
    }
    m->emit_ms = now_ms() - t0;
    t0 = now_ms();
    const int cuda = o->device == CC_DEVICE_CUDA;
    if (cuda) m->mode = CC_JIT; /* the host half is small: libtcc */
    int rc = !cuda && o->mode == CC_AOT ? aot(m, g, src, src_len, o, err, err_len)
                                        : jit(m, src, cuda, err, err_len);
    if (m->mode == CC_JIT) m->compile_ms = now_ms() - t0;
    if (!rc && cuda && o->cuda) rc = cuda_device_half(m, g, src, src_len, o, err, err_len);
    free(src);
    if (!rc && m->desc->abi_version != CF_ABI_VERSION) {
        snprintf(err, err_len, "generated code has ABI %d, runtime expects %d",
                 m->desc->abi_version, CF_ABI_VERSION);
        rc = -1;
    }
    if (rc) {
        cc_module_free(m);
        return -1;
    }
    if (o->verbose)
        fprintf(stderr, "cinfer: %s: emit %.2f ms, compile %.2f ms%s\n",
                cuda ? "CUDA" : o->mode == CC_AOT ? "AOT" : "JIT", m->emit_ms, m->compile_ms,
                m->cache_hit ? " (cached)" : "");
    *out = m;
    return 0;
}

void cc_module_free(cc_module *m) {
    if (!m) return;
    cuda_image_free(&m->cuda_image);
    if (m->handle) {
        if (m->mode == CC_JIT) {
            pthread_mutex_lock(&tcc_lock);
            tcc_delete((TCCState *)m->handle);
            pthread_mutex_unlock(&tcc_lock);
        }
        else dlclose(m->handle);
    }
    free(m);
}

/* ---- standalone executable ------------------------------------------------- */

/* Directory of the running cinfer binary (for libcinfer.a). */
static int self_dir(char *buf, size_t cap) {
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n <= 0) return -1;
    buf[n] = 0;
    char *s = strrchr(buf, '/');
    if (!s) return -1;
    *s = 0;
    return 0;
}

int cc_build_executable(const gguf_file *g, const cc_options *o, const char *out_path, char *err,
                        size_t err_len) {
    char libdir[1024], lib[1100], lib2[1100], c_path[1200], main_path[1200], log_path[1200],
        tmp_out[1200];
    const char *env = getenv("CINFER_LIBDIR");
    if (env && *env) snprintf(libdir, sizeof libdir, "%s", env);
    else if (self_dir(libdir, sizeof libdir)) return snprintf(err, err_len, "cannot find libcinfer.a"), -1;
    snprintf(lib, sizeof lib, "%s/libcinfer.a", libdir);
    snprintf(lib2, sizeof lib2, "%s/../lib/libcinfer.a", libdir);
    const char *libpath = access(lib, R_OK) == 0 ? lib : access(lib2, R_OK) == 0 ? lib2 : NULL;
    if (!libpath)
        return snprintf(err, err_len, "cannot find libcinfer.a in %s or %s/../lib (set CINFER_LIBDIR)",
                        libdir, libdir), -1;

    char *src = NULL, *main_src = NULL;
    size_t src_len, main_len;
    if (need_compiler("a standalone executable", err, err_len)) return -1;
    if (cc_generate(g, o, &src, &src_len, err, err_len)) return -1;
    if (cc_spec_file("templates/main.c.in", &main_src, &main_len, err, err_len)) {
        free(src);
        return -1;
    }
    snprintf(c_path, sizeof c_path, "%s.model.c", out_path);
    snprintf(main_path, sizeof main_path, "%s.main.c", out_path);
    snprintf(log_path, sizeof log_path, "%s.log", out_path);
    snprintf(tmp_out, sizeof tmp_out, "%s.tmp.%d", out_path, (int)getpid());
    int rc = write_file_atomic(c_path, src, src_len, err, err_len);
    if (!rc) rc = write_file_atomic(main_path, main_src, main_len, err, err_len);
    free(src);
    free(main_src);
    if (!rc) {
        /* cc -O3 -march=native -o OUT main.c model.c libcinfer.a CINFER_LINK_LIBS */
        char libs[] = CINFER_LINK_LIBS;
        char *argv[64] = {(char *)c_compiler(), "-O3", "-march=native", "-o", tmp_out, main_path,
                          c_path, (char *)libpath};
        int argc = 8;
        for (char *tok = strtok(libs, " "); tok && argc < 63; tok = strtok(NULL, " "))
            argv[argc++] = tok;
        argv[argc] = NULL;
        rc = run_compiler(argv, log_path, err, err_len);
        if (!rc && rename(tmp_out, out_path)) {
            snprintf(err, err_len, "rename %s: %s", out_path, strerror(errno));
            rc = -1;
        }
        unlink(tmp_out);
    }
    unlink(c_path);
    unlink(main_path);
    return rc;
}

/* ---- bundle program -------------------------------------------------------- */

/* A static archive the bundle links: path into buf, or -1 with a message. */
static int find_archive(const char *dir, const char *name, const char *target, char *buf, size_t cap,
                        char *err, size_t err_len) {
    snprintf(buf, cap, "%s/%s", dir, name);
    if (access(buf, R_OK) == 0) return 0;
    return snprintf(err, err_len, "no %s for %s in %s: in cinfer's source tree run make bundle-deps%s "
                    "(then make install again for an installed cinfer)", name, target, dir,
                    !strcmp(target, "aarch64") ? " and make aarch64" : ""), -1;
}

/* The folder holding the bundle's archives: $CINFER_LIBDIR, else the cinfer
 * binary's folder (a build tree: build/libcinfer.a, build/deps/...), else
 * ../lib/cinfer next to it (make install's layout), whichever has the
 * target's libcinfer.a; the first candidate when none has it. */
static int bundle_libdir(const char *lib_name, char *libdir, size_t cap) {
    const char *env = getenv("CINFER_LIBDIR");
    if (env && *env) return snprintf(libdir, cap, "%s", env), 0;
    char self[1024], probe[1200];
    if (self_dir(self, sizeof self)) return -1;
    snprintf(probe, sizeof probe, "%s/../lib/cinfer/%s", self, lib_name);
    if (access(probe, R_OK) == 0) snprintf(libdir, cap, "%s/../lib/cinfer", self);
    else snprintf(libdir, cap, "%s", self);
    return 0;
}

int cc_build_bundle_program(const gguf_file *g, const cc_options *o, const char *target, int server,
                            const char *out_path, char *build, size_t cap, char *err, size_t err_len) {
    const int arm = !strcmp(target, "aarch64");
    if (!arm && strcmp(target, "x86_64"))
        return snprintf(err, err_len, "--target %s: expected x86_64 or aarch64", target), -1;
    char libdir[1100], lib[1200], cjson[1200], mhd[1200], depdir[1200];
    const char *lib_name = arm ? "aarch64/libcinfer.a" : "libcinfer.a";
    if (bundle_libdir(lib_name, libdir, sizeof libdir)) return snprintf(err, err_len, "cannot find libcinfer.a"), -1;
    snprintf(depdir, sizeof depdir, "%s/deps/%s", libdir, target);
    if (find_archive(libdir, lib_name, target, lib, sizeof lib, err, err_len) ||
        find_archive(depdir, "libcjson.a", target, cjson, sizeof cjson, err, err_len) ||
        (server && find_archive(depdir, "libmicrohttpd.a", target, mhd, sizeof mhd, err, err_len)))
        return -1;
    const char *cc = arm ? getenv("CINFER_CC_AARCH64") : getenv("CC");
    if (!cc || !*cc) cc = arm ? "aarch64-linux-gnu-gcc" : "cc";

    char *src = NULL, *main_src = NULL;
    size_t src_len, main_len;
    if (cc_generate(g, o, &src, &src_len, err, err_len)) return -1;
    if (cc_spec_file("templates/bundle_main.c.in", &main_src, &main_len, err, err_len)) {
        free(src);
        return -1;
    }
    char c_path[1200], main_path[1200], log_path[1200], tmp_out[1200];
    snprintf(c_path, sizeof c_path, "%s.model.c", out_path);
    snprintf(main_path, sizeof main_path, "%s.main.c", out_path);
    snprintf(log_path, sizeof log_path, "%s.log", out_path);
    snprintf(tmp_out, sizeof tmp_out, "%s.tmp.%d", out_path, (int)getpid());
    int rc = write_file_atomic(c_path, src, src_len, err, err_len);
    if (!rc) rc = write_file_atomic(main_path, main_src, main_len, err, err_len);
    free(src);
    free(main_src);
    if (!rc) {
        /* only the C library family stays dynamic: -Bstatic for the rest */
        char *argv[] = {(char *)cc, "-O2", "-s", "-ffunction-sections", "-fdata-sections",
                        server ? "-DCF_BUNDLE_SERVER=1" : "-DCF_BUNDLE_SERVER=0", "-o", tmp_out,
                        main_path, c_path, "-Wl,--gc-sections", lib, cjson,
                        server ? mhd : "-Wl,--as-needed", "-Wl,-Bstatic", "-lsodium", "-lxxhash",
                        "-ledit", "-ltinfo", "-lbsd", "-lmd", "-Wl,-Bdynamic", "-lm", "-lpthread", NULL};
        snprintf(build, cap, "%s -O2 -s, --gc-sections, static libsodium xxhash cJSON libedit%s", cc,
                 server ? " libmicrohttpd" : "");
        rc = run_compiler(argv, log_path, err, err_len);
        if (!rc && rename(tmp_out, out_path)) {
            snprintf(err, err_len, "rename %s: %s", out_path, strerror(errno));
            rc = -1;
        }
        unlink(tmp_out);
    }
    unlink(c_path);
    unlink(main_path);
    return rc;
}
