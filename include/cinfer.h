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
};

typedef struct cinfer_model cinfer_model;
typedef struct cinfer_session cinfer_session;

/* ---- models ----------------------------------------------------------------- */

typedef enum { CINFER_JIT = 0, CINFER_AOT = 1 } cinfer_compile_mode;

typedef struct {
    cinfer_compile_mode compile; /* JIT (libtcc, default) or AOT (cc -O3, cached) */
    const char *archspec_path;   /* NULL: the built-in archspecs/<arch>.lua */
    int verbose;                 /* 1: compile/cache messages on stderr */
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

int cinfer_model_n_vocab(const cinfer_model *m);
int cinfer_model_n_ctx_train(const cinfer_model *m);
/* general.architecture, e.g. "llama".  Valid until cinfer_model_close. */
const char *cinfer_model_arch(const cinfer_model *m);
/* Milliseconds spent compiling at open (0 for an AOT cache hit). */
double cinfer_model_compile_ms(const cinfer_model *m);

/* ---- tokens ----------------------------------------------------------------- */

/* Tokenize text[0..len).  add_special: add BOS/EOS as the model's GGUF asks;
 * parse_special: turn control-token text ("<|im_start|>") into its id.
 * Writes up to n_max ids; *n_ids = the count needed.  CINFER_EARG when the
 * ids do not fit (call again with *n_ids). */
int cinfer_tokenize(const cinfer_model *m, const char *text, size_t len, int add_special,
                    int parse_special, int32_t *ids, size_t n_max, size_t *n_ids);
/* Bytes of ids (control tokens omitted).  Writes up to cap bytes plus a NUL
 * when it fits; *n_out = bytes needed.  CINFER_EARG when it does not fit or
 * an id is out of range. */
int cinfer_detokenize(const cinfer_model *m, const int32_t *ids, size_t n_ids, char *buf,
                      size_t cap, size_t *n_out);
int32_t cinfer_token_bos(const cinfer_model *m); /* -1 when none */
int32_t cinfer_token_eos(const cinfer_model *m); /* -1 when none */

/* ---- sessions ---------------------------------------------------------------- */

typedef struct {
    int n_ctx;     /* KV cache positions; 0: min(n_ctx_train, 4096) */
    int n_threads; /* 0: physical cores */
} cinfer_session_options;

/* A new session with an empty history.  Allocates the KV cache
 * (n_layer × n_ctx × kv_dim × 2 floats), activation arena and thread pool up
 * front; generation allocates nothing per token. */
int cinfer_session_new(cinfer_model *m, const cinfer_session_options *opts,
                       cinfer_session **out, char *err, size_t err_len);
void cinfer_session_free(cinfer_session *s);
/* Forget the history (the next generate evaluates its prompt from scratch). */
void cinfer_session_reset(cinfer_session *s);
int cinfer_session_n_ctx(const cinfer_session *s);
/* Tokens in the history (prompt + generated) and the ids; valid until the
 * next call that changes the session. */
int cinfer_session_n_past(const cinfer_session *s);
const int32_t *cinfer_session_tokens(const cinfer_session *s);

/* Save the history and KV cache to path (written to path.tmp, then renamed)
 * and restore it into a session of the same model (checked by fingerprint;
 * the session's n_ctx must hold the saved tokens).  CINFER_EIO, CINFER_EFORMAT. */
int cinfer_session_save(const cinfer_session *s, const char *path, char *err, size_t err_len);
int cinfer_session_load(cinfer_session *s, const char *path, char *err, size_t err_len);

/* Evaluate ids as the full history: the longest common prefix with the current
 * history is kept (its KV cache reused), the rest evaluated in batches.
 * Afterwards cinfer_logits() holds the last token's logits.  CINFER_ECTX when
 * n_ids > n_ctx; CINFER_EARG for an id out of range. */
int cinfer_eval(cinfer_session *s, const int32_t *ids, size_t n_ids, char *err, size_t err_len);
/* Logits of the last evaluated token: (n_vocab) floats, valid until the next
 * call that evaluates.  NULL before any evaluation. */
const float *cinfer_logits(const cinfer_session *s);

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
    float temperature;     /* 0: greedy argmax, deterministic */
    int top_k;             /* 0: off */
    float top_p;           /* 0 or >= 1: off */
    float min_p;           /* 0: off */
    float repeat_penalty;  /* 0 or 1: off */
    int repeat_last_n;     /* penalty window; 0: 64 */
    uint64_t seed;         /* sampling seed: same seed, same inputs → same text */
    const char *const *stop; /* n_stop strings that end generation (not emitted) */
    int n_stop;
    int no_special;        /* 1: do not add BOS to the prompt */
    int parse_special;     /* 1: control-token text in the prompt becomes ids */
    cinfer_logit_fn logit_fn; /* optional logit processor */
    void *logit_user;
} cinfer_gen_options;

typedef enum {
    CINFER_STOP_EOS = 0,    /* end-of-generation token */
    CINFER_STOP_MAX_TOKENS, /* max_tokens reached */
    CINFER_STOP_STRING,     /* a stop string was produced */
    CINFER_STOP_CALLBACK,   /* the callback returned nonzero */
    CINFER_STOP_CTX_FULL,   /* n_ctx reached */
} cinfer_stop_reason;

typedef struct {
    int n_prompt;          /* prompt tokens */
    int n_reused;          /* of them, taken from the KV cache (prefix reuse) */
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

/* The same starting from token ids (no tokenization, nothing added). */
int cinfer_generate_tokens(cinfer_session *s, const int32_t *ids, size_t n_ids,
                           const cinfer_gen_options *opts, cinfer_token_cb cb, void *user,
                           cinfer_gen_result *res, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif
