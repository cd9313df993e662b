/*
 * cinfer.h — public API of the cinfer library.
 *
 * cinfer compiles a GGUF model into a forward pass specialised to that model
 * (docs/architecture.md) and runs it.  Two handles:
 *
 *   cinfer_model    a mapped GGUF file, its tokenizer and its compiled
 *                   forward pass.  Read-only after open: any number of
 *                   sessions on any threads may share it.
 *   cinfer_session  one conversation: KV cache, token history, sampler
 *                   state, thread pool.  Use a session from one thread at a
 *                   time; different sessions may run concurrently.
 *
 * Conventions (as in SQLite and Lua's C API):
 *   - Functions return 0 (CINFER_OK) or a negative CINFER_E* code, and write
 *     a one-line message into the caller's err buffer (err may be NULL).
 *   - The library never exits, never prints, and keeps no global state.
 *   - open/close and new/free pairs; close(NULL)/free(NULL) are no-ops.
 *   - Options come in structs; a NULL options pointer means the defaults,
 *     and a zeroed struct means "default" for each field.
 *
 * Minimal use (examples/embed/main.c):
 *
 *   cinfer_model *m;  cinfer_session *s;
 *   cinfer_model_open("model.gguf", NULL, &m, err, sizeof err);
 *   cinfer_session_new(m, NULL, &s, err, sizeof err);
 *   cinfer_generate(s, "Once upon a time", &(cinfer_gen_options){.max_tokens = 64},
 *                   print_piece, NULL, NULL, err, sizeof err);
 *   cinfer_session_free(s);  cinfer_model_close(m);
 */
#ifndef CINFER_H
#define CINFER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CINFER_VERSION "0.1.0"

/* Error codes: functions return 0 on success or one of these (negative). */
enum {
    CINFER_OK = 0,
    CINFER_EIO = -1,      /* file could not be read/mapped/written */
    CINFER_EFORMAT = -2,  /* malformed input file */
    CINFER_ENOTFOUND = -3,
    CINFER_ETYPE = -4,
    CINFER_ENOMEM = -5,
    CINFER_EUNSUPPORTED = -6, /* architecture, tensor type or feature not supported */
    CINFER_ECOMPILE = -7, /* code generation or C compilation failed */
    CINFER_EARG = -8,     /* invalid argument */
    CINFER_ECTX = -9,     /* context full: the tokens do not fit n_ctx */
    CINFER_ECANCEL = -10, /* a progress callback asked to stop */
};

/* Progress of long work: repacking weights at open (stage "repack", done and
 * total in bytes; cinfer_model_options.progress) and evaluating a prompt
 * (stage "prompt", in tokens, after each batch; cinfer_session_options.progress).
 * Called on the thread doing the work.  Return nonzero to cancel a prompt
 * evaluation (it stops after the current batch with CINFER_ECANCEL, the
 * evaluated part kept in the cache); repacking ignores the return value. */
typedef int (*cinfer_progress_fn)(void *user, const char *stage, double done, double total);

typedef struct cinfer_model cinfer_model;
typedef struct cinfer_session cinfer_session;

/* ---- models ----------------------------------------------------------------- */

typedef enum { CINFER_JIT = 0, CINFER_AOT = 1 } cinfer_compile_mode;

/* Compute precision (`--quant`): what the matmul weights are computed in.
 * Only weights used by matmuls change; embeddings, norms, biases, weights
 * also read by an embedding lookup (tied output), and matrices whose row
 * count is not a multiple of 8 keep their GGUF type.  Non-native precisions
 * repack at load (threads over tensors) into cinfer's own row-interleaved
 * layouts (runtime/kernels/kern.h), held in memory next to the mapping; save the
 * result with cinfer_model_save_giw and it maps zero-copy next time.
 * Accuracy, bytes and load times per precision: docs/precisions.md. */
typedef enum {
    CINFER_PRECISION_AUTO = 0,     /* default: per tensor, the lossless repack where one
                                    * exists (Q4_0 -> Q4_0_R8, Q8_0 -> Q8_0_R8, Q4_K/Q5_K/Q6_K/
                                    * IQ4_XS -> Q4_K_R8/Q5_K_R8/Q6_K_R8/IQ4_XS_R8: same numbers,
                                    * 1.5-3x faster prompts and up to 2x faster decoding,
                                    * measured in docs/benchmarks.md), every other type
                                    * native; a .giw runs as saved */
    CINFER_PRECISION_NATIVE = 1,   /* compute on the GGUF blocks straight from the mmap:
                                    * no copy, no load work */
    CINFER_PRECISION_F32 = 2,      /* weights dequantized to f32, f32 activations: exact
                                    * (llama.cpp on the F32 dequantization), 4 bytes/weight */
    CINFER_PRECISION_INT8 = 3,     /* Q8_0 weights, 8 rows interleaved (Q8_0_R8), f32 activations */
    CINFER_PRECISION_INT8INT8 = 4, /* Q8_0_R8 weights, activations quantized to Q8_0 (W8A8) */
    CINFER_PRECISION_INT4 = 5,     /* Q4_0_R8 weights, Q8_0 activations (W4A8) */
    CINFER_PRECISION_INT4MIX = 6,  /* as INT4, but attn_v.weight, ffn_down.weight and an
                                    * untied output.weight in Q8_0_R8: 3-18x less logit error
                                    * than INT4 on the trained test models (measured) */
    CINFER_PRECISION_COUNT = 7,
} cinfer_precision;

/* "auto", "native", "f32", "int8", "int8int8", "int4", "int4mix"; NULL when out of range. */
const char *cinfer_precision_name(int precision);
/* The CINFER_PRECISION_* for a name above, or -1. */
int cinfer_precision_from_name(const char *name);

/* Where the forward pass runs (`--device`).  CUDA (docs/cuda.md) loads the
 * NVIDIA driver (libcuda.so.1) and NVRTC at run time, compiles the model's
 * kernels for the GPU (cached beside the AOT objects) and keeps weights, KV
 * cache and activations in device memory; it computes on the GGUF weight
 * types (precision auto or native) and refuses, at open, a model with an op
 * or tensor type it has no kernel for.  Without a driver or NVRTC,
 * cinfer_model_open fails with CINFER_EUNSUPPORTED and a message naming the
 * missing library and where it was looked for. */
typedef enum { CINFER_DEVICE_CPU = 0, CINFER_DEVICE_CUDA = 1 } cinfer_device;

/* KV cache types (`--cache-type-k T`, `--cache-type-v T`; llama.cpp's names;
 * docs/memory.md), K and V chosen separately.  Rows are ggml's: F16 values,
 * or Q8_0 / Q4_0 blocks of 32 (34 / 18 bytes), quantized as a token is
 * stored and dequantized as attention reads it.  The quantized types need
 * every attention layer's row (n_head_kv x head_dim values) to be a multiple
 * of 32: otherwise the open fails with CINFER_EARG naming the layer and the
 * row.  Latent-attention layers (deepseek2: values are the keys' first
 * head_dim_v values) keep one cache, in the K type.  CUDA keeps an F32 cache
 * (the default there; anything else is CINFER_EARG).  Measured error against
 * llama.cpp's F32-cache references: docs/memory.md. */
typedef enum {
    CINFER_KV_DEFAULT = 0, /* F16 on the CPU (cosine >= 0.9999 on every reference), F32 on CUDA */
    CINFER_KV_F32 = 1,     /* 4 bytes per value: exact */
    CINFER_KV_F16 = 2,     /* 2 bytes per value */
    CINFER_KV_Q8_0 = 3,    /* 8.5 bits per value */
    CINFER_KV_Q4_0 = 4,    /* 4.5 bits per value */
    CINFER_KV_COUNT = 5,
} cinfer_kv_type;

/* "default", "f32", "f16", "q8_0", "q4_0"; NULL when out of range. */
const char *cinfer_kv_type_name(int kv_type);
/* The CINFER_KV_* of a name above (case-insensitive), or -1. */
int cinfer_kv_type_from_name(const char *name);

typedef struct {
    cinfer_compile_mode compile; /* JIT (libtcc, default) or AOT (cc -O3, cached) */
    const char *archspec_path;   /* NULL: the built-in archspecs/<arch>.lua */
    int verbose;                 /* 1: compile/cache messages on stderr */
    int precision;               /* CINFER_PRECISION_*; 0 = auto.  A .giw file opens in
                                  * the precision it was saved in (cinfer.precision); asking
                                  * it for another one is CINFER_EARG */
    cinfer_progress_fn progress; /* optional: repacking progress */
    void *progress_user;
    /* Memory budget (`--mem`, docs/memory.md).  0: none, today's behaviour.
     * Otherwise the open walks the ladder of cinfer_plan_model (precision,
     * then context) to the most precise plan whose peak fits mem_bytes, with
     * sessions of n_ctx positions on n_threads threads (0: the defaults of
     * cinfer_session_options); cinfer_model_budget says what it chose and why.
     * Nothing fits: CINFER_ENOMEM, the message holds the smallest plan. */
    uint64_t mem_bytes;
    int n_ctx;
    int n_threads;
    /* Streaming weights (`--stream-weights`, docs/memory.md): compute from
     * the file mapping (precision auto means native here; other precisions
     * are CINFER_EARG, except a .giw's own), nothing prefaulted, a helper
     * thread mapping stream_ahead layers (0: 1) ahead of the forward pass and
     * dropping the layers behind it from the process, so a model larger
     * than memory runs at the speed its storage reads.  Only the layer
     * window, the weights outside layers (embeddings, output) and the
     * context stay resident.  One session at a time should evaluate. */
    int stream_weights;
    int stream_ahead;
    /* Streaming a mixture-of-experts model: experts of each layer kept
     * mapped by an LRU of the most recently routed (`--moe-cache-experts`,
     * per layer; docs/memory.md); the others are read when routed.
     * 0: with mem_bytes, as many as the budget has room for; without, the
     * experts one step routes (n_expert_used).  Ignored without experts. */
    int moe_cache_experts;
    /* The device (docs/cuda.md).  CINFER_DEVICE_CUDA plans and streams
     * nothing: mem_bytes or stream_weights with it are CINFER_EARG. */
    int device;                  /* CINFER_DEVICE_*; 0 = CPU */
    int device_index;            /* CUDA: which GPU (0 = the first) */
    /* KV cache types of the model's sessions (CINFER_KV_*; 0 = default F16),
     * the first rung of the budget ladder's KV step */
    int cache_type_k;
    int cache_type_v;
} cinfer_model_options;

/* Map the GGUF file at path, load its tokenizer and compile its forward pass.
 * Errors: CINFER_EIO (cannot open), CINFER_EFORMAT (malformed file),
 * CINFER_EUNSUPPORTED (architecture or tensor type), CINFER_ECOMPILE.
 * *out stays valid until cinfer_model_close, which must come after every
 * session of the model is freed. */
int cinfer_model_open(const char *path, const cinfer_model_options *opts, cinfer_model **out,
                      char *err, size_t err_len);
void cinfer_model_close(cinfer_model *m);

/* For standalone executables (`cinfer compile MODEL --aot -o PROG`): open
 * path with the forward pass linked into the program (the generated
 * cf_describe/cf_forward) instead of compiling one.  CINFER_EFORMAT when the
 * file's fingerprint differs from the one the code was generated for. */
struct cf_model_desc;
struct cf_env;
int cinfer_model_open_linked(const char *path, const struct cf_model_desc *(*describe)(void),
                             void (*forward)(struct cf_env *), cinfer_model **out, char *err,
                             size_t err_len);
/* The same for a GGUF image stored inside a larger file, bytes [offset,
 * offset + n_bytes) of path (a bundle executable maps its own weights:
 * `cinfer bundle`, docs/bundle.md); offset must be page-aligned.  A range
 * past the end of the file is CINFER_EFORMAT ("... truncated?"). */
int cinfer_model_open_linked_at(const char *path, uint64_t offset, uint64_t n_bytes,
                                const struct cf_model_desc *(*describe)(void),
                                void (*forward)(struct cf_env *), cinfer_model **out, char *err,
                                size_t err_len);

int cinfer_model_n_vocab(const cinfer_model *m);
/* Where the model runs: "cpu", or "cuda:0 NVIDIA H200 (sm_90, 139.8 GiB, driver 12.4, NVRTC 12.4)".
 * Valid until cinfer_model_close. */
const char *cinfer_model_device(const cinfer_model *m);
int cinfer_model_n_ctx_train(const cinfer_model *m);
/* What the loader noticed that changes results without stopping the load,
 * one line each ('\n'-separated, no trailing newline; "" when none), e.g. a
 * BPE vocabulary without tokenizer.ggml.pre (the pre-tokenizer is then a
 * guess, as in llama.cpp, and token ids may differ from the model's
 * training).  Valid until cinfer_model_close. */
const char *cinfer_model_notes(const cinfer_model *m);

/* Facts about the opened file (what model lists such as Ollama's show).
 * Strings are valid until cinfer_model_close. */
typedef struct {
    const char *path;          /* as given to cinfer_model_open */
    uint64_t file_bytes;
    uint64_t n_params;         /* elements of every tensor in the file */
    const char *file_type;     /* llama.cpp's name of general.file_type ("Q8_0", "Q4_K_M",
                                * "F16"), or for a file without it the type most weight
                                * bytes have ("Q8_0"); a .giw: its precision ("int4") */
    uint64_t fingerprint;      /* hash of the header, metadata and tensor table */
    int n_layer, n_embd, n_ctx_train, n_vocab;
    const char *chat_template; /* tokenizer.chat_template source, or NULL */
    const char *name;          /* general.name, or NULL */
} cinfer_model_info;
void cinfer_model_get_info(const cinfer_model *m, cinfer_model_info *out);
/* The file's metadata as one JSON object, key -> value (strings, numbers,
 * booleans; arrays of at most 64 scalars as arrays, longer ones as null —
 * the tokenizer's tables), malloc'd (free()); NULL when out of memory. */
char *cinfer_model_metadata_json(const cinfer_model *m);
/* general.architecture, e.g. "llama".  Valid until cinfer_model_close. */
const char *cinfer_model_arch(const cinfer_model *m);
/* Milliseconds spent compiling at open (0 for an AOT cache hit). */
double cinfer_model_compile_ms(const cinfer_model *m);
/* The compute precision the model runs in (CINFER_PRECISION_*). */
int cinfer_model_precision(const cinfer_model *m);
/* Weights repacked at open: *n_tensors tensors, *n_bytes bytes held in memory
 * (0 and 0 in native precision and for a .giw of the same precision, whose
 * weights are bound straight from the mapping), *ms milliseconds spent.  Any
 * pointer may be NULL. */
void cinfer_model_repack_stats(const cinfer_model *m, int *n_tensors, size_t *n_bytes, double *ms);
/* What a precision resolved to: the types the matmul weights compute in
 * (after --quant and repacking), as "TYPE xN" items joined by ", ", most
 * bytes first, e.g. "Q4_K_R8 x145, Q6_K_R8 x25" for a Q4_K_M file under
 * auto (an untied token_embd, only read by row lookup, is not counted; a
 * tied one, also the output projection, is).  Writes at most
 * buf_len bytes including the NUL; returns the length the whole string
 * needs (snprintf's convention), 0 for a model without 2-D weights. */
size_t cinfer_model_weight_types(const cinfer_model *m, char *buf, size_t buf_len);

/* Save the model's weights in the types it computes with as a .giw file: a
 * GGUF v3 container with every metadata key of the source plus
 * cinfer.precision (string), cinfer.source_fingerprint (16 hex chars) and
 * cinfer.version, and every tensor in its compiled type (repacked matmul
 * weights use cinfer type ids >= 100, runtime/formats/gguf.h), data aligned to 64
 * bytes.  cinfer_model_open maps it zero-copy, no repacking.  llama.cpp
 * refuses such files (unknown tensor types).  Written to path.tmp.PID,
 * fsync'ed and renamed: path is never a half-written file.  CINFER_EIO. */
int cinfer_model_save_giw(const cinfer_model *m, const char *path, char *err, size_t err_len);

/* ---- memory plans (docs/memory.md) -------------------------------------------
 * What a run will hold resident, by part, before anything heavy is loaded:
 * the file is mapped and its metadata read, the tokenizer loaded and the
 * forward pass compiled (JIT, milliseconds; these three are measured as the
 * growth of this process's RSS), and the rest — weights, KV cache, arena,
 * scratch — computed from the compiled module's description and the tensor
 * table.  Bytes everywhere; "resident" means pages a run at a full context
 * touches.  Checked against the peak RSS (getrusage ru_maxrss) of `cinfer
 * run` in tests/test_memplan.c: within 10 %, erring high. */

#define CINFER_PLAN_MAX_KINDS 12

/* Weights of one compiled type, bound one way. */
typedef struct {
    int type;              /* ggml type id, or cinfer's 100 (Q4_0_R8) / 101 (Q8_0_R8) */
    const char *type_name; /* "Q4_0_R8"; static */
    int mapped;            /* 1: computed from the file mapping (page cache backed, shared,
                            * dropped under memory pressure and read back); 0: converted
                            * at open into anonymous memory */
    int n_tensors;
    uint64_t bytes;
} cinfer_plan_weights;

typedef struct {
    int precision;      /* CINFER_PRECISION_* planned (never AUTO's 0 after a .giw: its own) */
    int n_ctx;          /* KV cache positions planned */
    int n_threads;      /* threads planned (each has kernel scratch) */
    int n_weight_kinds;
    cinfer_plan_weights weights[CINFER_PLAN_MAX_KINDS]; /* (n_weight_kinds), mapped first */
    uint64_t weights_bytes;   /* sum of weights[].bytes */
    uint64_t embd_bytes;      /* of weights_bytes: an untied token embedding left in the
                               * mapping, as the rows n_ctx tokens read (>= 1 page each) */
    uint64_t load_bytes;      /* transient at open: converted tensors' sources in flight,
                               * the largest one per thread */
    uint64_t kv_cache_bytes;  /* K and V, every layer, n_ctx positions, in cache_type_k/_v */
    uint64_t arena_bytes;     /* activations of the largest batch, min(n_batch, n_ctx) tokens */
    uint64_t scratch_bytes;   /* per-thread kernel scratch, all threads */
    uint64_t logits_bytes;    /* logits, batch positions, the session's token history */
    uint64_t state_bytes;     /* recurrent state (SSM / DeltaNet / RWKV / conv layers): the live
                               * state and the snapshots a session keeps for prefix reuse */
    uint64_t tokenizer_bytes; /* measured: vocabulary tables and the metadata pages read */
    uint64_t compiler_bytes;  /* measured: compiling the forward pass (Lua, libtcc, the code) */
    uint64_t runtime_bytes;   /* measured: this process before the model (code, libraries) */
    uint64_t code_bytes;      /* measured: machine code of cinfer's runtime and libm mapped
                               * but not run yet (the kernels a run executes are in it;
                               * counting all of it makes the plan err high) */
    uint64_t peak_bytes;      /* runtime + code + tokenizer + compiler + weights
                               * + max(load, kv_cache + state + arena + scratch + logits) */
    uint64_t mem_bytes;       /* the budget planned against; 0: none */
    uint64_t streamed_bytes;  /* streamed: the mapped weights the window stands for (weights
                               * then counts only the window); 0: not streamed */
    int stream_keep;          /* streamed with a budget: the first layers kept resident
                               * because the budget has room for them (counted in weights) */
    int moe_cache_experts;    /* streamed MoE: experts per layer the LRU keeps mapped (0: none) */
    uint64_t moe_cache_bytes; /* streamed MoE: of weights, those experts in every MoE layer */
    int cache_type_k;         /* CINFER_KV_* of kv_cache_bytes' K rows (never DEFAULT) */
    int cache_type_v;         /* and of its V rows */
} cinfer_plan;

typedef struct {
    int precision;   /* CINFER_PRECISION_*; 0 = auto */
    int n_ctx;       /* 0: min(n_ctx_train, 4096), as cinfer_session_options */
    int n_threads;   /* 0: physical cores */
    uint64_t mem_bytes; /* 0: plan the options as given.  Else walk the ladder: precision
                         * (the asked one, then int8, int4mix, int4, each only when its
                         * weights are smaller than the last), then the KV cache types
                         * (F16, Q8_0, Q4_0), then halve the context (down to 128
                         * positions), until the peak fits */
    const char *archspec_path; /* NULL: the built-in archspecs */
    int stream_weights;        /* plan a streamed run (cinfer_model_options.stream_weights):
                                * weights resident = outside layers + (stream_ahead + 1)
                                * layers; the ladder then only shortens the context */
    int stream_ahead;
    int moe_cache_experts;     /* as cinfer_model_options.moe_cache_experts */
    int cache_type_k;          /* CINFER_KV_*; 0: default (F16).  The ladder's KV step,
                                * after the precision rungs and before the context,
                                * walks both to F16, Q8_0, Q4_0 (each rung only where
                                * it is smaller and the model's rows allow it) */
    int cache_type_v;
} cinfer_plan_options;

/* Plan a run of the model at path (anything cinfer_model_open reads).
 * steps (steps_cap bytes, may be NULL) receives one line per ladder step
 * taken, "precision auto -> int8: peak 812.0 MiB > budget 512.0 MiB"
 * ('\n'-separated; "" when the first plan fits or there is no budget).
 * Errors: those of cinfer_model_open; CINFER_ENOMEM when mem_bytes is set
 * and no step fits (*out then holds the smallest plan tried). */
int cinfer_plan_model(const char *path, const cinfer_plan_options *opts, cinfer_plan *out,
                      char *steps, size_t steps_cap, char *err, size_t err_len);

/* The plan as text, one part per line ("weights  Q4_0_R8  converted  24  180.3 MiB"),
 * into buf (cap bytes, NUL-terminated, truncated to fit). */
void cinfer_plan_format(const cinfer_plan *p, char *buf, size_t cap);

/* The budget a model was opened with (cinfer_model_options.mem_bytes): the
 * plan chosen (*plan, may be NULL) and the ladder steps taken, '\n'-separated
 * ("" when none were needed).  Returns 0, or CINFER_EARG when the model was
 * opened without a budget.  The string is valid until cinfer_model_close. */
int cinfer_model_budget(const cinfer_model *m, cinfer_plan *plan, const char **steps);

/* Streamed weights (cinfer_model_options.stream_weights): bytes the read-ahead
 * thread mapped in and dropped so far.  CINFER_EARG when not streaming. */
int cinfer_model_stream_stats(const cinfer_model *m, uint64_t *read_ahead_bytes, uint64_t *dropped_bytes);
/* Streamed mixture-of-experts model: the LRU's size (experts per layer) and
 * counts so far: routed experts found mapped (once per layer visit), read in,
 * dropped.  CINFER_EARG when not streaming or the model has no experts. */
int cinfer_model_moe_stats(const cinfer_model *m, int *cache_experts, uint64_t *hits, uint64_t *misses,
                           uint64_t *evictions);

/* ---- tokens ----------------------------------------------------------------- */

/* Tokenize text[0..len).  add_special: add BOS/EOS as the model's GGUF asks;
 * parse_special: turn control-token text ("<|im_start|>") into its id.
 * Writes up to n_max ids; *n_ids = the count needed.  CINFER_EARG when the
 * ids do not fit (call again with *n_ids). */
int cinfer_tokenize(const cinfer_model *m, const char *text, size_t len, int add_special,
                    int parse_special, int32_t *ids, size_t n_max, size_t *n_ids);
/* The bytes of token id with special tokens as their text ("<tool_call>",
 * "[ARGS]"; llama_token_to_piece with special = true): returns their count
 * n and copies them (NUL added when n < cap) when n <= cap; CINFER_EARG for
 * an id out of range.  May be an incomplete UTF-8 sequence. */
int cinfer_token_text(const cinfer_model *m, int32_t id, char *buf, size_t cap);
/* Bytes of ids (control tokens omitted).  Writes up to cap bytes plus a NUL
 * when it fits; *n_out = bytes needed.  CINFER_EARG when it does not fit or
 * an id is out of range. */
int cinfer_detokenize(const cinfer_model *m, const int32_t *ids, size_t n_ids, char *buf,
                      size_t cap, size_t *n_out);
int32_t cinfer_token_bos(const cinfer_model *m); /* -1 when none */
int32_t cinfer_token_eos(const cinfer_model *m); /* -1 when none */

/* ---- sessions ---------------------------------------------------------------- */

/* How matmuls treat activations (cinfer_session_options.activations). */
enum {
    CINFER_ACT_DEFAULT = 0, /* CINFER_ACT_Q8: 1.25-1.9x faster decode, llama.cpp numerics */
    CINFER_ACT_F32 = 1,     /* f32 activations on exactly dequantized weights: matches
                             * llama.cpp run on the F32 dequantization to float rounding */
    CINFER_ACT_Q8 = 2,      /* each activation row converted to the weight type's
                             * llama.cpp vec_dot_type (Q8_0, Q8_1, Q8_K; F16, BF16) and
                             * integer dot products: llama.cpp's own CPU numerics, faster */
};

typedef struct {
    int n_ctx;       /* KV cache positions; 0: min(n_ctx_train, 4096), or for a model
                      * opened with a budget (mem_bytes) the context it chose, which
                      * is also the most a session of it may ask for (CINFER_EARG) */
    int n_threads;   /* 0: physical cores */
    int activations; /* CINFER_ACT_*; 0: CINFER_ACT_DEFAULT */
    cinfer_progress_fn progress; /* optional: prompt evaluation progress, and cancel */
    void *progress_user;
    int n_state_snapshots; /* models with recurrent layers: saved states kept for prefix
                            * reuse (each the size of the model's state); 0: 4, at most 64 */
    int cache_type_k;      /* CINFER_KV_*; 0: the model's (cinfer_model_options, or what its
                            * budget chose; a budgeted model refuses larger types) */
    int cache_type_v;
} cinfer_session_options;

/* A new session with an empty history.  Allocates the KV cache
 * (n_layer × n_ctx × kv_dim × 2 values in the cache types), the recurrent state of models that
 * have one (state-space and linear-attention layers: a fixed size whatever
 * n_ctx, plus n_state_snapshots copies), activation arena and thread pool up
 * front; generation allocates nothing per token. */
int cinfer_session_new(cinfer_model *m, const cinfer_session_options *opts,
                       cinfer_session **out, char *err, size_t err_len);
void cinfer_session_free(cinfer_session *s);
/* Forget the history (the next generate evaluates its prompt from scratch). */
void cinfer_session_reset(cinfer_session *s);
int cinfer_session_n_ctx(const cinfer_session *s);
/* The session's KV cache types (CINFER_KV_*, never DEFAULT); either pointer may be NULL. */
void cinfer_session_cache_types(const cinfer_session *s, int *cache_type_k, int *cache_type_v);
/* Tokens in the history (prompt + generated) and the ids; valid until the
 * next call that changes the session. */
int cinfer_session_n_past(const cinfer_session *s);
const int32_t *cinfer_session_tokens(const cinfer_session *s);

/* Save the history, KV cache, recurrent state and last logits to path
 * (written to path.tmp, then renamed) and restore it into a session of the
 * same model (checked by fingerprint; the session's n_ctx must hold the saved
 * tokens); the restored session continues bit for bit as the saved one would
 * have.  The file records the KV cache types; loading it into a session of
 * other types is CINFER_EARG, naming both (files from before cache types
 * hold F32 rows).  CINFER_EIO, CINFER_EFORMAT. */
int cinfer_session_save(const cinfer_session *s, const char *path, char *err, size_t err_len);
int cinfer_session_load(cinfer_session *s, const char *path, char *err, size_t err_len);

/* Evaluate ids as the full history: the longest common prefix with the current
 * history is kept (its KV cache reused; for recurrent models the prefix up to
 * the last saved state within it, see cinfer_gen_options.keep_state_at), the
 * rest evaluated in batches.
 * Afterwards cinfer_logits() holds the last token's logits.  CINFER_ECTX when
 * n_ids > n_ctx; CINFER_EARG for an id out of range. */
int cinfer_eval(cinfer_session *s, const int32_t *ids, size_t n_ids, char *err, size_t err_len);
/* Logits of the last evaluated token: (n_vocab) floats, valid until the next
 * call that evaluates.  NULL before any evaluation. */
const float *cinfer_logits(const cinfer_session *s);

/* ---- structured output: JSON Schema grammars ------------------------------------ */

/* A JSON Schema compiled into a grammar over the bytes of JSON text.  With
 * cinfer_gen_options.grammar set, every token that would leave the grammar
 * gets -inf before sampling, so the output always satisfies the schema (no
 * retries), and generation stops as soon as the value is complete.
 *
 * What the grammar accepts is canonical JSON: no whitespace (unless
 * CINFER_WS_FLEXIBLE), strings in one spelling (raw UTF-8; only ", \ and
 * control characters escaped, \u00XX in lower case), numbers in plain
 * decimal (no exponent, no trailing fraction zeros, no -0).  Each object key
 * at most once; which keys and in what order depends on options.objects:
 *
 *   validation semantics (CINFER_OBJECTS_VALIDATION; the default without a
 *   model, so cinfer_grammar_check and `cinfer schema-check` answer "does the
 *   value satisfy the schema"): keys in any order, and a schema that leaves
 *   additionalProperties out allows any other key, as JSON Schema says;
 *
 *   generation semantics (CINFER_OBJECTS_GENERATION; the default when the
 *   grammar is compiled for a model, so run, chat, the server and library
 *   generation get it): what llama.cpp's json_schema_to_grammar (and so
 *   Ollama) and OpenAI's structured outputs generate.  A schema with
 *   properties (or patternProperties) and no additionalProperties (nor
 *   unevaluatedProperties) allows only the keys it names (or matches); the
 *   declared keys come in the schema's order (properties, then required
 *   names it does not list, then dependentRequired names; allOf members in
 *   document order), each optional one may be skipped, every required one is
 *   present; undeclared keys, where additionalProperties (true or a schema),
 *   patternProperties or an object schema without properties allow them,
 *   come after the declared ones, in any order.  llama.cpp puts the required
 *   properties before the optional ones; cinfer keeps the schema's order.
 *   A value generated so is always valid under the schema (validation
 *   semantics accept it); the reverse does not hold.  Where closing an
 *   object would leave fewer keys than its minProperties, it stays open.
 * cinfer_grammar_check canonicalises its input first, so it answers "does
 * the value satisfy the schema"; cinfer_grammar_check_bytes takes the bytes
 * as they are ("could generation emit them").
 *
 * Supported keywords (drafts 4, 6, 7, 2019-09, 2020-12; without $schema,
 * 2020-12): type (incl. lists), enum, const, properties, required,
 * additionalProperties, patternProperties (up to 500), propertyNames (type,
 * pattern, format, lengths up to 256, enum, const), minProperties,
 * maxProperties, dependentRequired, dependentSchemas and dependencies (both
 * forms, in every draft: validators apply it when present; up to 6 schema
 * dependencies an object), items, prefixItems, additionalItems, minItems,
 * maxItems (up to 4096), minLength, maxLength (up to 67108863), pattern
 * (ECMA-262 subset: no lookaround, backreferences or \b; at most 200,000
 * automaton states once counted repetitions are expanded), format (asserted:
 * date, time, date-time, duration, uuid, email, idn-email, hostname, ipv4,
 * ipv6, uri, uri-reference, iri, iri-reference, uri-template, json-pointer,
 * relative-json-pointer, regex; idn-hostname is refused; other names are
 * annotations), minimum, maximum, exclusiveMinimum/Maximum (number and
 * draft-4 boolean forms), multipleOf, anyOf, oneOf (when its branches are
 * provably disjoint), allOf, not (of a boolean schema, type, const, enum,
 * pattern, multipleOf or a single required key), uniqueItems (with maxItems
 * 1 or less), unevaluatedProperties/Items (when true), $ref, $defs,
 * definitions, $id (and draft 4's id), $anchor, $dynamicAnchor (as an
 * anchor), boolean schemas.  Annotations (title, description, default,
 * examples, $comment, deprecated, readOnly, writeOnly, content*, and any
 * unknown keyword) are ignored.  Anything else (contains, if/then/else,
 * $dynamicRef, $recursiveRef, remote $refs, ...) is a CINFER_EUNSUPPORTED
 * error listing each keyword and its location, never a silently looser
 * grammar — unless options.permissive asks for exactly that.
 *
 * Refused whatever the options: schema text that is not exactly one JSON
 * value (trailing bytes), repeats a key in an object, or nests deeper than
 * 512 (CINFER_EFORMAT "schema: ..."); a cycle of $ref/allOf/anyOf/oneOf/not
 * that consumes no input ({"$ref":"#"}: validators never finish it;
 * CINFER_EFORMAT, with the cycle); a schema past the compiler's limits
 * (20,000 rules, a bounded amount of automaton work, a $ref chain of 500;
 * CINFER_EUNSUPPORTED "schema too large: ...").  Values nested deeper than
 * the matcher's 2048-frame stack are not accepted.
 *
 * A grammar compiled for a model (generation) also keeps sampled numbers
 * finite: at most max(18, what the schema's bounds need) integer digits and
 * 15 fraction digits, and multiples of a decimal multipleOf (0.01) as
 * integers when the range has any, because validators divide in floating
 * point.  Strings without maxLength and objects open to any key are as long
 * as the model makes them: bound them in the schema when sampling freely. */
typedef struct cinfer_grammar cinfer_grammar;

typedef enum {
    CINFER_WS_COMPACT = 0,  /* {"a":1,"b":[2,3]} */
    CINFER_WS_FLEXIBLE = 1, /* JSON whitespace allowed between tokens (at most 16 bytes in a row) */
} cinfer_ws_policy;

typedef enum {
    CINFER_OBJECTS_AUTO = 0,       /* generation semantics with a model, validation semantics without */
    CINFER_OBJECTS_GENERATION = 1, /* declared keys only (unless the schema allows others), in schema order */
    CINFER_OBJECTS_VALIDATION = 2, /* any key order; a missing additionalProperties allows any other key */
} cinfer_object_policy;

typedef struct {
    cinfer_ws_policy whitespace;
    int permissive; /* 1: ignore unsupported keywords; the grammar accepts a superset of the schema */
    int format_annotation; /* 1: "format" is an annotation (the 2020-12 default for validators)
                            * instead of checked; 0 (default) checks the formats listed above */
    cinfer_object_policy objects; /* which keys an object may have, in what order (see above) */
} cinfer_grammar_options;

/* Compile schema[0..len) (JSON text).  m: the model whose vocabulary the
 * grammar will constrain, or NULL to compile for cinfer_grammar_check only.
 * The model's token trie is built on first use and kept with the model.
 * Errors: CINFER_EFORMAT (schema is not JSON), CINFER_EUNSUPPORTED (message:
 * "unsupported: uniqueItems at #/properties/tags; ..."), CINFER_ENOMEM.
 * *out is freed with cinfer_grammar_free, before cinfer_model_close(m).  One
 * grammar may serve several sessions at once (its caches take a lock). */
int cinfer_grammar_from_schema(const cinfer_model *m, const char *schema, size_t len,
                               const cinfer_grammar_options *opts, cinfer_grammar **out,
                               char *err, size_t err_len);
void cinfer_grammar_free(cinfer_grammar *g);
/* 1 when the grammar accepts the JSON value json[0..len), 0 when it does not
 * (err: the byte offset in the canonical text and what was expected),
 * CINFER_EFORMAT when json is not valid JSON (err says where). */
int cinfer_grammar_check(const cinfer_grammar *g, const char *json, size_t len, char *err,
                         size_t err_len);
/* 1 when the grammar accepts exactly the bytes text[0..len) — no
 * canonicalising: this is what generation can emit (under
 * CINFER_WS_COMPACT the canonical spelling only; under CINFER_WS_FLEXIBLE
 * also JSON whitespace, at most 16 bytes in a row, between tokens but not
 * before or after the value); 0 when it does not (err: the byte offset and
 * what was expected, or that the bytes stop inside the value). */
int cinfer_grammar_check_bytes(const cinfer_grammar *g, const char *text, size_t len, char *err,
                               size_t err_len);
/* 1 when no value satisfies the schema ("not": {}, or bounds or types that
 * exclude everything), 0 when some does, CINFER_ENOMEM. */
int cinfer_grammar_accepts_nothing(const cinfer_grammar *g);

/* Confidence capture: at each enum, boolean and integer value the grammar
 * constrains, the model's distribution over the allowed values, renormalised
 * over that set.  Where one token does not settle the value (multi-token
 * enum members), the mass of each first token is followed along the sampled
 * path and split evenly among the values an unsampled token still allows.
 * Integers with more than 64 allowed values report their first tokens
 * instead (partial = 1: each choice is a prefix of the value). */
typedef struct cinfer_confidence cinfer_confidence;

typedef enum {
    CINFER_DECISION_ENUM = 1,
    CINFER_DECISION_BOOL = 2,
    CINFER_DECISION_INT = 3,
} cinfer_decision_kind;

typedef struct {
    const char *value; /* canonical JSON text of the value ("\"red\"", "true", "3") */
    double p;
} cinfer_choice;

typedef struct {
    const char *path;              /* JSON Pointer of the value: "" (root), "/items/0/color" */
    cinfer_decision_kind kind;
    int partial;                   /* choices are value prefixes (first tokens) */
    int n_choices;
    const cinfer_choice *choices;  /* by descending p; they sum to 1 */
    int chosen;                    /* index of the generated value, -1 when not listed */
} cinfer_decision;

int cinfer_confidence_new(cinfer_confidence **out);
void cinfer_confidence_free(cinfer_confidence *c);
int cinfer_confidence_count(const cinfer_confidence *c);
/* Valid until the next generation that fills c, or cinfer_confidence_free. */
const cinfer_decision *cinfer_confidence_get(const cinfer_confidence *c, int i);
/* All decisions as a JSON array, malloc'd (free()); NULL when out of memory:
 * [{"path":"/color","kind":"enum","chosen":"\"red\"","choices":[{"value":"\"red\"","p":0.91},...]}] */
char *cinfer_confidence_json(const cinfer_confidence *c);

/* Typed output: describe a C struct with a field table; cinfer derives its
 * JSON Schema, and parses generated JSON back into the struct.
 *
 *   typedef struct { char name[32]; int age; int color; } pet;
 *   static const char *const colors[] = {"red", "green"};
 *   static const cinfer_field pet_fields[] = {
 *       {CINFER_FIELD(pet, name, CINFER_FIELD_STRING)},
 *       {CINFER_FIELD(pet, age, CINFER_FIELD_INT), .has_min = 1, .min = 0, .has_max = 1, .max = 40},
 *       {CINFER_FIELD(pet, color, CINFER_FIELD_ENUM), .enum_values = colors, .n_enum_values = 2},
 *   };
 *   static const cinfer_struct_desc pet_desc = {"pet", sizeof(pet), pet_fields, 3};
 *   cinfer_struct_schema(&pet_desc, &schema, err, sizeof err);   → grammar → generate →
 *   cinfer_struct_parse(&pet_desc, text, len, &my_pet, err, sizeof err);
 */
typedef enum {
    CINFER_FIELD_BOOL = 1, /* bool */
    CINFER_FIELD_INT,      /* int */
    CINFER_FIELD_INT64,    /* int64_t */
    CINFER_FIELD_DOUBLE,   /* double */
    CINFER_FIELD_STRING,   /* char[size]: at most size - 1 bytes, NUL-terminated (maxLength size - 1;
                            * non-ASCII text longer than size - 1 bytes is a parse error) */
    CINFER_FIELD_ENUM,     /* int: index into enum_values */
    CINFER_FIELD_STRUCT,   /* a nested struct described by nested */
    CINFER_FIELD_ARRAY,    /* elements of elem_type, elem_size bytes each, max_count of them,
                            * with an int count at count_offset */
} cinfer_field_type;

typedef struct cinfer_struct_desc cinfer_struct_desc;

typedef struct {
    const char *name;                 /* JSON property name */
    cinfer_field_type type;
    size_t offset;                    /* offsetof(struct, member) */
    size_t size;                      /* sizeof(member) (STRING: the char array's capacity) */
    const cinfer_struct_desc *nested; /* STRUCT, or ARRAY of STRUCT */
    cinfer_field_type elem_type;      /* ARRAY */
    size_t elem_size;                 /* ARRAY: bytes per element (STRING elements: capacity) */
    int min_count, max_count;         /* ARRAY: minItems, capacity (maxItems) */
    size_t count_offset;              /* ARRAY: offsetof the int that receives the count */
    const char *const *enum_values;   /* ENUM (or ARRAY of ENUM) */
    int n_enum_values;
    int has_min, has_max;             /* INT, INT64, DOUBLE: inclusive bounds */
    double min, max;
    const char *pattern;              /* STRING: ECMA-262 regex the value must match */
    const char *description;          /* copied into the schema (the model sees it only if you prompt it) */
    int optional;                     /* not required; absent leaves the member zeroed */
} cinfer_field;

struct cinfer_struct_desc {
    const char *name;
    size_t size;                      /* sizeof(struct) */
    const cinfer_field *fields;
    int n_fields;
};

#define CINFER_FIELD(T, member, ftype) \
    .name = #member, .type = (ftype), .offset = offsetof(T, member), .size = sizeof(((T *)0)->member)

/* The struct's JSON Schema (draft 2020-12), malloc'd into *schema (free()).
 * CINFER_EARG names the field of an inconsistent descriptor. */
int cinfer_struct_schema(const cinfer_struct_desc *d, char **schema, char *err, size_t err_len);
/* Parse JSON text into out (d->size bytes, zeroed first).  CINFER_EFORMAT
 * with the field's path when the text does not fit the description
 * ("pet.tags[2]: string of 40 bytes does not fit char[32]"). */
int cinfer_struct_parse(const cinfer_struct_desc *d, const char *json, size_t len, void *out,
                        char *err, size_t err_len);

/* ---- generation --------------------------------------------------------------- */

/* Called with each piece of generated text: valid UTF-8, never a partial
 * character, possibly empty.  Return nonzero to stop generation. */
typedef int (*cinfer_token_cb)(const char *piece, size_t len, int32_t token, void *user);

/* Called before sampling each token with the logits (n_vocab floats) it may
 * modify in place (e.g. set disallowed tokens to -INFINITY) and the history. */
typedef void (*cinfer_logit_fn)(float *logits, int n_vocab, const int32_t *history,
                                int n_history, void *user);

typedef struct {
    /* A zeroed struct is exact greedy decoding until EOS or a full context.
     * llama.cpp's usual sampling: temperature 0.8, top_k 40, top_p 0.95,
     * min_p 0.05 (cinfer run's defaults). */
    int max_tokens;        /* 0: until EOS or context full */
    float temperature;     /* 0 (or less): greedy argmax, deterministic; any finite value
                            * (large: near-uniform over the tokens top_k/top_p/min_p keep) */
    int top_k;             /* <= 0: off */
    float top_p;           /* nucleus: keep the most likely tokens until their probability
                            * reaches top_p (at least one); 0: only the most likely one,
                            * greedy (as OpenAI and llama.cpp read 0); >= 1: off.  Set it
                            * (1, or e.g. 0.95) when sampling: a zeroed top_p is greedy */
    float min_p;           /* 0: off */
    float repeat_penalty;  /* 0 or 1: off.  Never applied to end-of-generation and control
                            * tokens (<|im_end|> is in every earlier chat turn; penalized,
                            * replies run on) unless repeat_penalty_all */
    int repeat_last_n;     /* penalty window; 0: 64, -1: the whole history */
    int repeat_penalty_all; /* 1: penalize end-of-generation and control tokens too (llama.cpp) */
    uint64_t seed;         /* sampling seed: same seed, same inputs → same text */
    const char *const *stop; /* n_stop strings that end generation (not emitted) */
    int n_stop;
    int no_special;        /* 1: do not add BOS to the prompt */
    int parse_special;     /* 1: control-token text in the prompt becomes ids */
    cinfer_logit_fn logit_fn; /* optional logit processor */
    void *logit_user;
    /* Structured output: only text the grammar accepts is generated, tokens it
     * forces are appended without sampling (evaluated in one batch), and
     * generation stops when the value is complete (CINFER_STOP_GRAMMAR).  The
     * grammar must come from this session's model. */
    const cinfer_grammar *grammar;
    cinfer_confidence *confidence; /* with grammar: cleared, then filled with the decisions */
    /* Models with recurrent layers (Mamba, DeltaNet, hybrids) cannot drop the
     * tail of their state, so prefix reuse restarts from a saved state: one is
     * kept at the end of every prompt and of every generation, and also after
     * the first keep_state_at[i] prompt tokens (e.g. where each chat message
     * ends: cinfer_chat passes those itself).  Ignored by other models. */
    const size_t *keep_state_at;
    size_t n_keep_state_at;
} cinfer_gen_options;

typedef enum {
    CINFER_STOP_EOS = 0,    /* end-of-generation token */
    CINFER_STOP_MAX_TOKENS, /* max_tokens reached (with a grammar: the value is incomplete, or complete
                             * but could still go on, like the integer 12 of an unbounded integer;
                             * llama.cpp also says "length" there) */
    CINFER_STOP_STRING,     /* a stop string was produced */
    CINFER_STOP_CALLBACK,   /* the callback returned nonzero */
    CINFER_STOP_CTX_FULL,   /* n_ctx reached */
    CINFER_STOP_GRAMMAR,    /* the grammar's value is complete and nothing may follow it (also when
                             * the token that completed it was the last max_tokens or n_ctx allows) */
} cinfer_stop_reason;

typedef struct {
    int n_prompt;          /* prompt tokens */
    int n_reused;          /* of them, taken from the KV cache or a saved recurrent state (prefix reuse) */
    int n_generated;
    cinfer_stop_reason stop;
    double prompt_ms, gen_ms;
} cinfer_gen_result;

/* Tokenize prompt as the session's full history (BOS added unless
 * no_special), reuse the cached prefix, evaluate the rest, then sample up to
 * max_tokens tokens, streaming text through cb (may be NULL).  Generated
 * tokens join the history.  res (may be NULL) receives counts and timings.
 * Errors: CINFER_ECTX when the prompt does not fit n_ctx; CINFER_EARG. */
int cinfer_generate(cinfer_session *s, const char *prompt, const cinfer_gen_options *opts,
                    cinfer_token_cb cb, void *user, cinfer_gen_result *res, char *err,
                    size_t err_len);

/* ---- chat -------------------------------------------------------------------------- */

/* One message of a conversation.  role: "system", "user", "assistant" or
 * "tool"; content: UTF-8 text. */
typedef struct {
    const char *role;
    const char *content;
} cinfer_message;

/* Render a conversation with the model's own chat template
 * (tokenizer.chat_template, a Jinja template run as transformers'
 * apply_chat_template runs it).  add_generation_prompt: end with the opening
 * of the assistant's turn.  *prompt is malloc'd: free with cinfer_free.
 * Errors: CINFER_EUNSUPPORTED when the model has no usable template,
 * CINFER_EARG when the template rejects the conversation (its message). */
int cinfer_chat_prompt(const cinfer_model *m, const cinfer_message *msgs, size_t n,
                       int add_generation_prompt, char **prompt, char *err, size_t err_len);
/* The same with messages (and optionally tools, or NULL) as JSON arrays in
 * the OpenAI shape: messages may carry tool_calls / tool_call_id, tools are
 * {"type":"function","function":{name, description, parameters}}. */
int cinfer_chat_prompt_json(const cinfer_model *m, const char *messages_json,
                            const char *tools_json, int add_generation_prompt, char **prompt,
                            char *err, size_t err_len);
/* The same with more template variables: vars_json is a JSON object (or
 * NULL) whose members are set in the template context after the standard
 * ones, as transformers' apply_chat_template(**kwargs) / the OpenAI-style
 * "chat_template_kwargs" do — e.g. {"enable_thinking": false} for Qwen3.
 * CINFER_EARG when vars_json is not an object. */
int cinfer_chat_prompt_vars(const cinfer_model *m, const char *messages_json,
                            const char *tools_json, const char *vars_json,
                            int add_generation_prompt, char **prompt, char *err, size_t err_len);
/* Render msgs with add_generation_prompt and generate the assistant's reply
 * (control tokens in the rendered text are parsed; BOS appears once).  The
 * session's cached prefix (earlier turns) is reused.  Errors as
 * cinfer_chat_prompt and cinfer_generate. */
int cinfer_chat(cinfer_session *s, const cinfer_message *msgs, size_t n,
                const cinfer_gen_options *opts, cinfer_token_cb cb, void *user,
                cinfer_gen_result *res, char *err, size_t err_len);
/* Free memory the library returned (prompts). */
void cinfer_free(void *p);

/* The same starting from token ids (no tokenization, nothing added). */
int cinfer_generate_tokens(cinfer_session *s, const int32_t *ids, size_t n_ids,
                           const cinfer_gen_options *opts, cinfer_token_cb cb, void *user,
                           cinfer_gen_result *res, char *err, size_t err_len);

/* ---- embeddings ---------------------------------------------------------------- */

/* Pooling of per-token hidden states into one vector (cinfer_embed), as
 * llama.cpp's --pooling.  OR in CINFER_EMBED_RAW to skip the L2
 * normalisation (llama.cpp's --embd-normalize -1); without it every output
 * vector (each row, for NONE) has Euclidean norm 1 (--embd-normalize 2). */
enum {
    CINFER_POOL_MEAN = 0, /* mean over the tokens (default) */
    CINFER_POOL_LAST = 1, /* the last token's state (decoder embedding models) */
    CINFER_POOL_CLS = 2,  /* the first token's state */
    CINFER_POOL_NONE = 3, /* no pooling: one row per token */
    CINFER_EMBED_RAW = 0x100,
};

/* Width of the model's hidden state: floats per embedding. */
int cinfer_model_n_embd(const cinfer_model *m);

/* 1 when the model is an encoder — a BERT-style embedding model (archs bert,
 * nomic-bert): bidirectional attention and no output layer, so it only
 * embeds.  cinfer_eval, cinfer_generate* and cinfer_chat on its sessions are
 * CINFER_EUNSUPPORTED; cinfer_embed evaluates each input whole, at most the
 * model's batch (min(n_ctx_train, 4096) tokens) at once.  0 for a generative
 * model. */
int cinfer_model_is_encoder(const cinfer_model *m);
/* Tokens one forward call evaluates (the compiled batch: longer prompts take
 * several calls); an encoder's longest input. */
int cinfer_model_n_batch(const cinfer_model *m);

/* The pooling the model's file declares (`<arch>.pooling_type`, written by
 * llama.cpp's converter for embedding models: BGE CLS, MiniLM/E5/Nomic mean)
 * as CINFER_POOL_*, or -1 when it declares none (generative models) or one
 * cinfer does not implement (4, rank: a reranker's classifier head). */
int cinfer_model_pooling(const cinfer_model *m);

/* Embed tokens[0..n): evaluate them as the session's whole history (from
 * position 0; the previous history is replaced by tokens, so a later
 * generation that starts with them reuses the cache) and pool the final
 * normalized hidden state (the input of the output projection, (n,
 * n_embd); an encoder's last layer output) with `pooling` (CINFER_POOL_* |
 * CINFER_EMBED_RAW; an embedding model's own is cinfer_model_pooling).  Any
 * model embeds: a generative model gives llama.cpp-style pooled hidden
 * states, an encoder (cinfer_model_is_encoder) its trained sentence
 * embedding, as llama.cpp's llama_get_embeddings_seq.
 * out receives n_embd floats, or n * n_embd for CINFER_POOL_NONE (token
 * major); n_out is its capacity in floats.  Errors: CINFER_EARG (n < 1, a
 * bad pooling, out too small, an id out of range), CINFER_ECTX (n > n_ctx, or
 * for an encoder n > its batch),
 * CINFER_ENOMEM. */
int cinfer_embed(cinfer_session *s, const int32_t *tokens, int n, int pooling, float *out,
                 int n_out, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif
