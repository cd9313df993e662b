/*
 * gram_schema.h — the grammar: JSON Schema compiled into rules over bytes
 * (gram_compile), and the per-object state the matcher interns into it.
 *
 * The grammar is a set of rules; each rule is either
 *   FA   a DFA over bytes whose states may also "call" other rules (arrays,
 *        alternations, and every leaf: strings, numbers, literals), or
 *   OBJ  an object: keys in any order, each key at most once, required keys
 *        before '}', a key DFA whose accepting states name the key's class
 *        (declared name, patternProperties match, additional).  Compiled for
 *        generation (gram_options.gen_objects) an object is "ordered": its
 *        declared keys come in declaration order (optional ones may be
 *        skipped) and undeclared keys, where allowed, only after them.
 * No rule matches the empty string and none calls itself before consuming a
 * byte (gram_compile refuses schemas that would need it), so a matcher's
 * every step terminates.
 *
 * Layer: the bottom of the grammar modules' chain
 *   gram_fa < gram_json < gram_schema < gram_match < gram_mask < gram_conf < gram_api
 * (each uses only those to its left).  Threads: a grammar may be shared by
 * any number of matchers on any threads (interning takes its lock).
 */
#ifndef CINFER_GRAM_SCHEMA_H
#define CINFER_GRAM_SCHEMA_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "cinfer.h"
#include "gram_fa.h"
#include "gram_json.h"

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
    int track_keys;         /* undeclared keys are allowed: aux records each (no key twice) and the key being read */
    int32_t *u_cnt;         /* (key.n_states) distinct completions into an allowed undeclared key
                             * (GRAM_U_INF: unbounded); only finite counts need the seen keys checked */
    int u_finite;           /* some unfinished key state has a finite u_cnt > 0 */
    /* generation semantics (gram_options.gen_objects) */
    int ordered;            /* declared label i only after every declared label seen is < i, undeclared
                             * labels after all declared ones: words then has bit n_decl, "an undeclared
                             * key was seen" (n_words counts it) */
    uint8_t *gen_closed;    /* (n_labels) or NULL: 1 where the label's key is refused only because the
                             * schema leaves additionalProperties out (validation would allow it: the
                             * oneOf disjointness proof must not rest on it) */
    int has_deps;           /* dependentRequired lists exist (ordered checks follow them) */
    int undecl_any;         /* ordered: some undeclared label is usable */
    int32_t *avail_after;   /* ordered: (n_decl) usable declared labels after label i (minProperties) */
} gram_obj;
#define GRAM_U_INF 0x7fffffff

typedef struct {
    uint8_t kind;           /* GRAM_FA or GRAM_OBJ */
    uint8_t decision;       /* GRAM_DEC_*: confidence is captured where this rule starts */
    uint8_t leaf;           /* FA without calls */
    uint8_t counted;        /* a string whose code points the frame counts (aux): min/max_count */
    int32_t aux0;           /* aux of a new frame (OBJ: the empty seen set) */
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
/* Largest count a bound may name (minLength, maxLength, min/maxProperties):
 * counted-string frames keep the count in aux bits above the tracker. */
#define GRAM_COUNT_MAX ((1L << 26) - 1)

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

/* Interned records (under the grammar's lock): variable-length blobs with
 * stable ids.  Records never move once made, so a reader holding an id
 * reads its record without the lock. */
#define GRAM_ICHUNK 16384
#define GRAM_ICHUNKS 1024 /* up to 16M records per table */
typedef struct {
    uint64_t hash;
    uint32_t len;    /* payload bytes */
    uint32_t pad;
    uint64_t data[]; /* payload, 8-byte aligned */
} gram_irec;

typedef struct {
    gram_irec **dir[GRAM_ICHUNKS]; /* id → dir[id / GRAM_ICHUNK][id % GRAM_ICHUNK] */
    int32_t n;
    int32_t *htab;
    size_t hcap;
} gram_itab;

static inline const void *gram_itab_data(const gram_itab *t, int32_t id) {
    return t->dir[id / GRAM_ICHUNK][id % GRAM_ICHUNK]->data;
}

/* An OBJ frame's aux: what the object has seen so far. */
typedef struct {
    int32_t count;          /* properties so far (min/maxProperties) */
    int32_t keys;           /* undeclared keys so far: a key-set id (0: none) */
    int32_t prefix;         /* the key being read, quotes included: a key-text id (0: not in a key) */
    int32_t base;           /* the same aux without keys and prefix (itself when it has neither) */
    int32_t n_words;
    int32_t pad;
    uint64_t words[];       /* (n_words) seen declared keys */
} gram_aux;

/* A key text: the byte string of its parent text plus one byte (id 0: ""). */
typedef struct {
    int32_t parent, byte;
} gram_text;

/* A compiled schema: the rules, and the OBJ-frame state the matchers intern
 * into it while they run (so their ids are shared by every matcher). */
typedef struct gram_grammar {
    gram_rule *rules;
    int n_rules, cap_rules;
    int32_t root;
    int ws_flexible;
    pthread_mutex_t lock;   /* guards the interning tables (readers of a made record need none) */
    gram_itab aux;          /* gram_aux records */
    gram_itab texts;        /* gram_text records: key texts as a trie */
    gram_itab keysets;      /* sorted int32 arrays of key-text ids (id 0: the empty set) */
} gram_grammar;

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
    long max_work;     /* work units for the whole compile (automaton states built, conjunction members);
                        * 0: GRAM_MAX_WORK.  Past it: "schema too large" */
    int default_draft; /* draft when the schema has no $schema: 4, 6, 7, 2019, 2020 (0: 2020) */
    int format_annotation; /* format is an annotation (2020-12's default) instead of asserted */
    int gen_limits;    /* for generation: numbers get at most max(18, what the bounds need) integer
                        * and 16 fraction digits, so a sampled number always ends */
    int gen_objects;   /* generation semantics for objects (what llama.cpp's json_schema_to_grammar and
                        * OpenAI's structured outputs do): a schema member with properties or
                        * patternProperties but no additionalProperties (nor unevaluatedProperties)
                        * allows no undeclared key, and declared keys come in declaration order.
                        * Still a subset of what the schema validates.  0: validation semantics */
} gram_options;

/* Compile schema (JSON text) into *out.  Errors: CINFER_EFORMAT (not JSON),
 * CINFER_EUNSUPPORTED (keywords or constructs the compiler cannot express
 * exactly: the message lists them with their schema locations),
 * CINFER_ENOMEM. */
int gram_compile(const char *schema, size_t len, const gram_options *opts, gram_grammar **out, char *err,
                 size_t err_len);
void gram_free(gram_grammar *g);

/* OBJ-frame state interning (each takes the grammar's lock; ids stay valid
 * until gram_free).  All return an id, or -1 out of memory. */
int32_t gram_aux_intern(gram_grammar *g, const uint64_t *words, int n_words, int32_t count, int32_t keys,
                        int32_t prefix);
static inline const gram_aux *gram_aux_get(const gram_grammar *g, int32_t id) {
    return (const gram_aux *)gram_itab_data(&g->aux, id);
}
/* The id of the aux without keys and prefix. */
static inline int32_t gram_aux_base(const gram_grammar *g, int32_t id) {
    int32_t b = gram_aux_get(g, id)->base;
    return b < 0 ? id : b;
}
/* The aux a with prefix (keys, count and words unchanged). */
int32_t gram_aux_with_prefix(gram_grammar *g, int32_t a, int32_t prefix);
/* Key text id + byte: the text one byte longer (made when absent). */
int32_t gram_text_child(gram_grammar *g, int32_t text, uint8_t b);
/* The same without making it: -1 when no such text was ever made (so no
 * key with that text was ever seen). */
int32_t gram_text_find(gram_grammar *g, int32_t text, uint8_t b);
/* The bytes of a text, into buf (up to cap); returns its length. */
size_t gram_text_bytes(const gram_grammar *g, int32_t text, char *buf, size_t cap);
/* A key set plus one key. */
int32_t gram_keyset_add(gram_grammar *g, int32_t set, int32_t key);
/* Is key in the set?  (No lock: sets never change.) */
int gram_keyset_has(const gram_grammar *g, int32_t set, int32_t key);
/* The keys of a set (sorted ids), *n of them. */
const int32_t *gram_keyset_items(const gram_grammar *g, int32_t set, int *n);

#endif
