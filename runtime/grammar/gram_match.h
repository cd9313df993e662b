/*
 * gram_match.h — the byte-level matcher over a compiled grammar, and the
 * check of a text against it.
 *
 * The matcher's configuration is a set of stacks of frames (rule, state,
 * aux); aux is an OBJ frame's interned state (gram_aux: keys seen, count,
 * the key being read).  Stacks are hash-consed, sets of stacks interned,
 * and byte steps on sets memoised, so stepping is a lookup once a
 * configuration has been seen: in effect a lazily built DFA over pushdown
 * configurations.  A matcher is used by one thread at a time; many may share
 * one grammar.
 */
#ifndef CINFER_GRAM_MATCH_H
#define CINFER_GRAM_MATCH_H

#include "gram_schema.h"

#define GRAM_BOTTOM (-1)
#define GRAM_CTX (-2)

typedef struct {
    gram_frame f;
    int32_t parent;         /* node id, GRAM_BOTTOM or GRAM_CTX */
    int32_t depth;          /* frames on this stack, this one included */
} gram_node;
/* Deepest stack the matcher builds: values nested deeper are not accepted
 * (JSON text itself is canonicalised up to GRAM_JSON_DEPTH levels; a level
 * takes one to three frames). */
#define GRAM_STACK_MAX 2048

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

const gram_grammar *gram_matcher_grammar(const gram_matcher *m);

/* Internals shared with the masker (gram_mask.c): configurations are sets
 * of stack nodes, both interned in the matcher. */
int32_t gram_set_step(gram_matcher *m, int32_t set, uint8_t b, int *popped);
int32_t gram_set_of_node(gram_matcher *m, int32_t node);
int32_t gram_node_make(gram_matcher *m, gram_frame f, int32_t parent);
const int32_t *gram_set_items(const gram_matcher *m, int32_t set, int *n);
const gram_node *gram_node_get(const gram_matcher *m, int32_t node);
int gram_set_accepting(gram_matcher *m, int32_t set);
int gram_matcher_oom(const gram_matcher *m);
/* Some step needed a stack deeper than GRAM_STACK_MAX (so a byte was refused for that). */
int gram_matcher_depth_hit(const gram_matcher *m);
/* Scratch of the grammar's largest n_words (for gram_obj_key_done). */
uint64_t *gram_matcher_words(gram_matcher *m);
/* OBJ frames: can key DFA state t still end in a key allowed with seen set
 * aux; may the complete key of label L be used now. */
int gram_obj_viable(const gram_grammar *g, const gram_obj *o, int32_t t, int32_t aux);
int gram_obj_label_ok(const gram_grammar *g, const gram_obj *o, int32_t L, int32_t aux);
/* gram_obj_viable counting the undeclared keys seen: text is the key text
 * that reaches t (its bytes so far, with the opening quote). */
int gram_obj_viable_exact(gram_grammar *g, const gram_obj *o, int32_t t, int32_t aux, int32_t text);
/* The aux after finished key `key` (a key text id; label L) and its ':':
 * the key recorded, the count advanced, the prefix cleared.  -2 when the
 * key may not come now (seen before, or no room), -1 out of memory.
 * scratch holds o->n_words words. */
int32_t gram_obj_key_done(gram_grammar *g, const gram_obj *o, int32_t aux, int32_t L, int32_t key, uint64_t *scratch);
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

/* ---- check ----------------------------------------------------------------------------- */

/* Check canonical text against the grammar: 1 accepted, 0 rejected (err
 * says at which byte and what the grammar expected), -1 out of memory. */
int gram_check(const gram_grammar *g, const char *canon, size_t len, char *err, size_t err_len);

#endif
