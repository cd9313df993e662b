/*
 * gram_mask.h — token masks: the vocabulary as a byte trie, a grammar bound
 * to it (the masker and its caches), which tokens may come next, the tokens
 * a forced byte prefix determines.
 *
 * Layer: above the matcher (gram_match.h), below confidence capture and the
 * API facade.  The trie is built once per model (runtime/api/api.c keeps it
 * with the model) and read-only afterwards; a masker is made per grammar and
 * model, and may be shared by several generations on several threads.
 */
#ifndef CINFER_GRAM_MASK_H
#define CINFER_GRAM_MASK_H

#include <stdint.h>

#include "gram_match.h"
#include "text/tok.h"

/* ---- vocabulary trie ------------------------------------------------------------------ */

typedef struct gram_vocab gram_vocab;

/* Tokens longer than GRAM_TOKEN_MAX bytes are left out of the trie: no
 * grammar allows them (the mask walks are that deep at most). */
#define GRAM_TOKEN_MAX 1024

/* The trie of vocabulary v.  0, or -1 out of memory. */
int gram_vocab_new(const tok_vocab *v, gram_vocab **out);
void gram_vocab_free(gram_vocab *gv); /* NULL: no-op */
int gram_vocab_n_vocab(const gram_vocab *gv);
/* Bytes of token id (empty for control tokens); valid until gram_vocab_free. */
const char *gram_vocab_bytes(const gram_vocab *gv, int32_t id, int *len);
int gram_is_eog(const gram_vocab *gv, int32_t id);

/* ---- masks ------------------------------------------------------------------------------ */

typedef struct gram_masker gram_masker;

/* Bind grammar g to vocabulary gv (both must outlive the masker).  0, or -1
 * out of memory. */
int gram_masker_new(const gram_grammar *g, const gram_vocab *gv, gram_masker **out);
void gram_masker_free(gram_masker *mk); /* NULL: no-op */
const gram_vocab *gram_masker_vocab(const gram_masker *mk);

/* Allowed tokens in matcher m's state (m runs mk's grammar): bits and
 * scratch are (n_vocab + 31) / 32 words each.  End-of-generation tokens are
 * allowed when the value is complete.  Returns 1 when some token is allowed,
 * 0 when none is, -1 out of memory (or m on another grammar). */
int gram_mask(gram_masker *mk, gram_matcher *m, uint32_t *bits, uint32_t *scratch);
/* Apply a mask to logits (n_vocab floats): disallowed ones become -INFINITY,
 * a 32-token word at a time (most words are all-disallowed or all-allowed). */
void gram_mask_apply(const uint32_t *bits, float *logits, int n_vocab);
/* The allowed ids of a mask, ascending, into ids (room for n_vocab); their count. */
int gram_mask_ids(const uint32_t *bits, int n_vocab, int32_t *ids);
/* Tokens a forced byte prefix determines: longest-match tokenization of the
 * bytes every continuation starts with, keeping tokens that cannot be
 * extended across the forced end.  Returns the count written to ids. */
int gram_forced_tokens(const gram_masker *mk, gram_matcher *m, int32_t *ids, int cap);
/* Advance m by a token's bytes (EOG tokens: accepted when the value is
 * complete, and leave the state as is).  0, or -1 (not allowed). */
int gram_accept_token(const gram_vocab *gv, gram_matcher *m, int32_t id);

#endif
