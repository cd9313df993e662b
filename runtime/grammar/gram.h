/*
 * gram.h — grammar-constrained decoding: JSON Schema → grammar over bytes →
 * incremental matcher → token masks.  Internal to the library; the public
 * face is cinfer_grammar_* and the `grammar`/`confidence` fields of
 * cinfer_gen_options in include/cinfer.h.
 *
 * Pieces (one .c each):
 *   gram_fa.c      automata: regex, strings, numbers, DFAs (gram_fa.h)
 *   gram_schema.c  JSON Schema → rules (this header's gram_compile)
 *   gram_match.c   the byte-level matcher and the canonicaliser
 *   gram_mask.c    vocabulary trie, per-frame token caches, masks, forced tokens
 *   gram_conf.c    confidence capture at enum/boolean/integer decisions
 *   gram_struct.c  C struct descriptors → schema, JSON → struct
 *   gram_api.c     the public cinfer_grammar_* / cinfer_confidence_* functions
 *
 * The grammar.  A set of rules; each rule is either
 *   FA   a DFA over bytes whose states may also "call" other rules (arrays,
 *        alternations, and every leaf: strings, numbers, literals), or
 *   OBJ  an object: keys in any order, each declared key at most once,
 *        required keys before '}', a key DFA whose accepting states name the
 *        key's class (declared name, patternProperties match, additional).
 * The matcher's configuration is a set of stacks of frames (rule, state, aux);
 * aux is an OBJ frame's "seen keys" set (interned in the grammar).  Stacks
 * are hash-consed, sets of stacks interned, and byte steps on sets memoised,
 * so stepping is a lookup once a configuration has been seen: in effect a
 * lazily built DFA over pushdown configurations.  The grammar has no left
 * recursion and no rule matches the empty string (checked at compile time),
 * so every step terminates.
 *
 * Threads: a grammar may be shared by any number of matchers on any threads
 * (its caches take a lock); a matcher is used by one thread at a time.
 */
#ifndef CINFER_GRAM_H
#define CINFER_GRAM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "cinfer.h"
#include "gram_fa.h"
#include "text/tok.h"

enum { GRAM_FA = 0, GRAM_OBJ = 1 };
enum { GRAM_DEC_NONE = 0, GRAM_DEC_ENUM, GRAM_DEC_BOOL, GRAM_DEC_INT };

/* OBJ frame states (OPEN: before '{', START: after it); key DFA state k is GRAM_OBJ_KEY + k, and "value of
 * label L follows" is GRAM_OBJ_KEY + key.n_states + L. */
enum { GRAM_OBJ_OPEN = 0, GRAM_OBJ_START, GRAM_OBJ_AFTER, GRAM_OBJ_COMMA, GRAM_OBJ_DONE, GRAM_OBJ_KEY };
/* Flexible whitespace: at most this many bytes in a row.  In objects, the
 * states after GRAM_OBJ_KEY + key.n_states + n_labels are "base state after
 * c whitespace bytes" (gram_obj_base). */
#define GRAM_WS_MAX 16

typedef struct {
    int n_decl;             /* declared names (properties, required, dependencies) */
    int n_words;            /* (n_decl + 63) / 64: seen-set words */
    int n_labels;           /* n_decl declared labels, then undeclared key classes */
    char **decl_names;      /* (n_decl) names as UTF-8 */
    int32_t *label_rule;    /* (n_labels) value rule, -1: the key is not allowed */
    uint64_t *required;     /* (n_words) */
    gram_dfa key;           /* over the key's canonical text with both quotes */
    uint64_t *reach;        /* (key.n_states, n_words) declared labels reachable from a key state */
    uint8_t *reach_undecl;  /* (key.n_states) an allowed undeclared class reachable */
    int min_props, max_props; /* -1: no bound */
    int32_t *dep_off, *dep; /* dependentRequired: decl i needs dep[dep_off[i]..dep_off[i+1]) */
    int track_count;        /* aux counts properties (min/maxProperties) */
    int keys_free;          /* any unfinished key can still end in an allowed key, whatever was seen */
} gram_obj;

typedef struct {
    uint8_t kind;           /* GRAM_FA or GRAM_OBJ */
    uint8_t decision;       /* GRAM_DEC_*: confidence is captured where this rule starts */
    uint8_t leaf;           /* FA without calls */
    uint8_t counted;        /* a string whose code points the frame counts (aux): min/max_count */
    int32_t aux0;           /* aux of a new frame (OBJ: the empty seen set) */
    uint8_t *univ;          /* (DFA or key DFA states) behaves like any string content: set by gram_bind */
    long cp_span;           /* counted: the largest finite cp_min/cp_max value */
    int32_t *cp_min, *cp_max; /* counted: (n_states, GRAM_N_TR) fewest / most code points still needed
                               * to close the string (most: capped at min_count) */
    long min_count, max_count; /* counted: bounds on code points (max -1: none) */
    uint8_t first[32];      /* bitset of bytes that can start the rule */
    gram_dfa fa;            /* GRAM_FA */
    gram_obj *obj;          /* GRAM_OBJ */
    char **values;          /* decision candidates as canonical JSON (enum, boolean, small integer ranges) */
    int n_values;
} gram_rule;

typedef struct {
    int32_t rule, state, aux;
} gram_frame;

/* Counted strings: aux = code points so far * 16 + where we are in the
 * current character (the DFA alone does not say, after minimisation). */
enum { GRAM_TR_BND = 0, GRAM_TR_ESC, GRAM_TR_U0, GRAM_TR_U1, GRAM_TR_U2, GRAM_TR_U3, GRAM_TR_C1, GRAM_TR_C2, GRAM_TR_C3,
       GRAM_N_TR };
#define GRAM_CP_INF 0x3fffffff

/* Tracker after byte b; *cost 1 when b starts a code point. */
static inline int gram_tr_next(int tr, uint8_t b, int *cost) {
    *cost = 0;
    switch (tr) {
    case GRAM_TR_BND:
        *cost = 1;
        return b == '\\' ? GRAM_TR_ESC : b < 0x80 ? GRAM_TR_BND : b >= 0xF0 ? GRAM_TR_C3 : b >= 0xE0 ? GRAM_TR_C2 : GRAM_TR_C1;
    case GRAM_TR_ESC: return b == 'u' ? GRAM_TR_U0 : GRAM_TR_BND;
    case GRAM_TR_U3: return GRAM_TR_BND;
    case GRAM_TR_C1: return GRAM_TR_BND;
    default: return tr + 1 <= GRAM_TR_U3 && tr >= GRAM_TR_U0 ? tr + 1 : tr - 1;
    }
}

typedef struct gram_vocab gram_vocab;
typedef struct gram_cache gram_cache;

typedef struct {
    uint64_t hash;
    int32_t count;          /* properties so far (min/maxProperties) */
    int n_words;
    uint64_t words[];       /* seen declared keys */
} gram_aux;
#define GRAM_AUX_CHUNK 4096
#define GRAM_AUX_CHUNKS 4096

struct cinfer_grammar {
    gram_rule *rules;
    int n_rules, cap_rules;
    int32_t root;
    int ws_flexible;
    /* seen-key sets of OBJ frames, interned (under lock).  Entries never move:
     * a reader that got an id from gram_aux_intern reads it without the lock. */
    pthread_mutex_t lock;
    gram_aux **aux_dir[GRAM_AUX_CHUNKS]; /* aux id → aux_dir[id / GRAM_AUX_CHUNK][id % GRAM_AUX_CHUNK] */
    int n_aux;
    int32_t *aux_hash;
    size_t aux_hcap;
    /* bound to a vocabulary (NULL when compiled for checking only) */
    const gram_vocab *vocab;
    gram_cache *cache;
    void (*cache_free)(gram_cache *c); /* set with cache by gram_bind: the masker owns it */
};
typedef struct cinfer_grammar gram_grammar;

/* One byte of a counted string frame (state, aux); 0 when not allowed.
 * Keeps only configurations from which the string can still close within
 * its bounds (so a mask never leads into a dead end). */
static inline int gram_counted_step(const gram_rule *R, int32_t *state, int32_t *aux, uint8_t b) {
    int32_t t = gram_dfa_next(&R->fa, *state, b);
    if (t < 0) return 0;
    if (*state == 0) {
        *state = t;
        *aux = 0;
        return 1;
    }
    int tr = *aux & 15;
    long count = *aux >> 4;
    if (tr == GRAM_TR_BND && b == '"') {
        if (count < R->min_count) return 0;
        *state = t;
        return 1;
    }
    int cost;
    int ntr = gram_tr_next(tr, b, &cost);
    count += cost;
    if (R->cp_min && R->max_count >= 0 && count + R->cp_min[t * GRAM_N_TR + ntr] > R->max_count) return 0;
    if (R->max_count >= 0 && count > R->max_count) return 0;
    if (R->cp_max && R->min_count > 0 && count + R->cp_max[t * GRAM_N_TR + ntr] < R->min_count) return 0;
    long sat = R->max_count >= 0 ? R->max_count : R->min_count;
    if (count > sat) count = sat;
    *state = t;
    *aux = (int32_t)(count * 16 + ntr);
    return 1;
}

/* ---- compile ------------------------------------------------------------------------ */

typedef struct {
    int ws_flexible;   /* allow JSON whitespace between tokens (default: compact) */
    int permissive;    /* ignore unsupported keywords (the grammar then accepts a superset) */
    int max_states;    /* per automaton; 0: 200000 */
    int default_draft; /* draft when the schema has no $schema: 4, 6, 7, 2019, 2020 (0: 2020) */
    int format_annotation; /* format is an annotation (2020-12's default) instead of asserted */
    int gen_limits;    /* for generation: numbers get at most max(18, what the bounds need) integer
                        * and 16 fraction digits, so a sampled number always ends */
} gram_options;

/* Compile schema (JSON text) into *out.  Errors: CINFER_EFORMAT (not JSON),
 * CINFER_EUNSUPPORTED (keywords or constructs the compiler cannot express
 * exactly: the message lists them with their schema locations),
 * CINFER_ENOMEM. */
int gram_compile(const char *schema, size_t len, const gram_options *opts, gram_grammar **out, char *err,
                 size_t err_len);
void gram_free(gram_grammar *g);

/* Intern a seen-key set; returns aux id (or -1 out of memory).  Locks. */
int32_t gram_aux_intern(gram_grammar *g, const uint64_t *words, int n_words, int32_t count);
static inline const gram_aux *gram_aux_get(const gram_grammar *g, int32_t id) {
    return g->aux_dir[id / GRAM_AUX_CHUNK][id % GRAM_AUX_CHUNK];
}

/* Canonical JSON text of a parsed value (malloc'd; NULL out of memory). */
struct cJSON;
char *gram_json_print(const struct cJSON *v);
/* cJSON_Parse that keeps each number's exact decimal text (in valuestring). */
struct cJSON *gram_json_parse(const char *text, size_t len, const char **err_at);

/* ---- matcher ------------------------------------------------------------------------ */

#define GRAM_BOTTOM (-1)
#define GRAM_CTX (-2)

typedef struct {
    gram_frame f;
    int32_t parent;         /* node id, GRAM_BOTTOM or GRAM_CTX */
} gram_node;

typedef struct gram_matcher gram_matcher;

int gram_matcher_new(const gram_grammar *g, gram_matcher **out);
void gram_matcher_free(gram_matcher *m);
/* Back to "nothing consumed". */
void gram_matcher_reset(gram_matcher *m);
/* Consume bytes; returns 0, or -1 when they leave the grammar (the state is
 * then unchanged). */
int gram_matcher_feed(gram_matcher *m, const char *s, size_t len);
/* The bytes so far form a complete value. */
int gram_matcher_accepting(gram_matcher *m);
/* Some byte can follow. */
int gram_matcher_can_continue(gram_matcher *m);
/* Bytes that every continuation must start with (stops where a choice
 * exists or the value may end); up to cap bytes, returns the count. */
int gram_matcher_forced(gram_matcher *m, char *buf, int cap);
/* Current configuration (a set id, stable for the matcher's lifetime), and
 * jumping back to one: lets callers roll back cheaply. */
int32_t gram_matcher_state(const gram_matcher *m);
void gram_matcher_set_state(gram_matcher *m, int32_t state);
/* Confidence: the enum/boolean/integer rule whose value starts after the
 * forced bytes lead[0..*n_lead) (up to 32; often none), or -1. */
int32_t gram_matcher_decision_rule(gram_matcher *m, char *lead, int *n_lead);

/* Internals shared with gram_mask.c. */
int32_t gram_set_step(gram_matcher *m, int32_t set, uint8_t b, int *popped);
int32_t gram_set_of_node(gram_matcher *m, int32_t node);
int32_t gram_node_make(gram_matcher *m, gram_frame f, int32_t parent);
const int32_t *gram_set_items(const gram_matcher *m, int32_t set, int *n);
const gram_node *gram_node_get(const gram_matcher *m, int32_t node);
int gram_set_accepting(gram_matcher *m, int32_t set);
int gram_matcher_oom(const gram_matcher *m);
/* OBJ frames: can key DFA state t still end in a key allowed with seen set
 * aux; may the complete key of label L be used now. */
int gram_obj_viable(const gram_grammar *g, const gram_obj *o, int32_t t, int32_t aux);
int gram_obj_label_ok(const gram_grammar *g, const gram_obj *o, int32_t L, int32_t aux);
/* The base state of an OBJ state (whitespace states map to where they
 * started), *ws = whitespace bytes so far. */
static inline int32_t gram_obj_base(const gram_obj *o, int32_t st, int *ws) {
    int32_t base_ws = GRAM_OBJ_KEY + o->key.n_states + o->n_labels;
    *ws = 0;
    if (st < base_ws) return st;
    int32_t idx = st - base_ws, p = idx / GRAM_WS_MAX;
    *ws = idx % GRAM_WS_MAX + 1;
    if (p < 3) return p == 0 ? GRAM_OBJ_START : p == 1 ? GRAM_OBJ_AFTER : GRAM_OBJ_COMMA;
    if (p < 3 + o->n_labels) return GRAM_OBJ_KEY + o->key.n_states + (p - 3);
    return GRAM_OBJ_KEY + (p - 3 - o->n_labels);
}

/* ---- canonical JSON ------------------------------------------------------------------- */

/* Rewrite JSON text into canonical form (gram_fa.h): no whitespace, strings
 * with the one escaping, numbers in canonical decimal.  Returns 0 and a
 * malloc'd *out (*out_len bytes, NUL-terminated), or -1 with a message
 * naming the byte offset (malformed JSON, invalid UTF-8, lone surrogate,
 * nesting deeper than 512). */
int gram_canon(const char *json, size_t len, char **out, size_t *out_len, char *err, size_t err_len);

/* Check canonical text against the grammar: 1 accepted, 0 rejected (err
 * says at which byte and what the grammar expected), -1 out of memory. */
int gram_check(const gram_grammar *g, const char *canon, size_t len, char *err, size_t err_len);

/* ---- vocabulary and masks ------------------------------------------------------------- */

/* The token trie of a vocabulary: built once per model (cinfer_model caches
 * it), read-only afterwards. */
int gram_vocab_new(const tok_vocab *v, gram_vocab **out);
void gram_vocab_free(gram_vocab *gv);
int gram_vocab_n_vocab(const gram_vocab *gv);
/* Bytes of token id (empty for control tokens). */
const char *gram_vocab_bytes(const gram_vocab *gv, int32_t id, int *len);

/* Bind a compiled grammar to a vocabulary (once; allocates its token caches). */
int gram_bind(gram_grammar *g, const gram_vocab *gv);

/* Allowed tokens in the matcher's state: bits and scratch are
 * (n_vocab + 31) / 32 words each.  End-of-generation tokens are allowed when
 * the value is complete.  Returns 1 when some token is allowed, 0 when none
 * is, -1 out of memory (or no vocabulary bound). */
int gram_mask(gram_matcher *m, uint32_t *bits, uint32_t *scratch);
const gram_grammar *gram_matcher_grammar(const gram_matcher *m);
/* Tokens a forced byte prefix determines: longest-match tokenization of the
 * bytes every continuation starts with, keeping tokens that cannot be
 * extended across the forced end.  Returns the count written to ids. */
int gram_forced_tokens(gram_matcher *m, int32_t *ids, int cap);
/* Advance by a token's bytes (EOG tokens: accepted when the value is
 * complete, and leave the state as is).  0 or -1 (not allowed). */
int gram_accept_token(gram_matcher *m, int32_t id);
int gram_is_eog(const gram_vocab *gv, int32_t id);

/* ---- generation glue (runtime/api/api.c) ------------------------------------------------------ */

/* One constrained generation: matcher, mask buffer, confidence capture.
 * All allocation happens in gram_run_new. */
typedef struct gram_run gram_run;
int gram_run_new(const cinfer_grammar *g, cinfer_confidence *conf, gram_run **out, char *err, size_t err_len);
void gram_run_free(gram_run *r);
/* Tokens to append without sampling (forced by the grammar); count written. */
int gram_run_forced(gram_run *r, int32_t *ids, int cap);
/* Set disallowed logits to -INFINITY (logits: n_vocab floats).  Returns 1,
 * or 0 when no token may continue (an error), -1 out of memory. */
int gram_run_mask(gram_run *r, float *logits, int n_vocab);
/* Record token id as chosen; raw_logits (the unmasked logits it was sampled
 * from, or NULL for a forced token) feed the confidence capture.  Returns
 * 0, or -1 when the token is not allowed. */
int gram_run_accept(gram_run *r, int32_t id, const float *raw_logits);
/* The value is complete and nothing may follow: stop. */
int gram_run_done(gram_run *r);
/* The bytes the grammar allows next, printable (for error messages). */
int gram_run_expected(gram_run *r, char *buf, size_t cap);

/* ---- confidence (gram_conf.c) --------------------------------------------------------- */

typedef struct gram_conf_track gram_conf_track;
int gram_conf_track_new(gram_conf_track **out);
void gram_conf_track_free(gram_conf_track *t);
void gram_conf_clear(cinfer_confidence *c);
/* Token id chosen at a step: rule is the decision rule whose value starts
 * after n_lead forced bytes (or -1), bits the allowed set and logits the raw logits it was sampled from
 * (NULL for a forced token), path the value's JSON Pointer. */
void gram_conf_on_token(gram_conf_track *t, cinfer_confidence *c, const gram_grammar *g, int32_t rule,
                        int n_lead, const uint32_t *bits, const float *logits, int32_t id, const char *path);
void gram_conf_finish(gram_conf_track *t, cinfer_confidence *c);

#endif
