/*
 * tok.h — SentencePiece-style ("SPM") tokenizer read from GGUF, as llama.cpp
 * implements it for `tokenizer.ggml.model = "llama"` vocabularies.
 *
 * Owns: the vocabulary (pieces, scores, token types, special ids), encoding
 * text to ids, decoding ids to bytes, and streaming detokenization that only
 * ever hands out complete UTF-8.
 *
 * Source of every rule: llama.cpp src/llama-vocab.cpp (llm_tokenizer_spm_session,
 * llama_vocab::impl::{load, tokenize, tokenizer_st_partition, token_to_piece,
 * detokenize}); the reference outputs in ../shared/reference were made with
 * llama.cpp c392e509 and the tests check them id for id.
 *
 * Ids are int32_t (llama_token); -1 is "no such token" (LLAMA_TOKEN_NULL).
 *
 * Errors: functions return 0 or a negative TOK_E* code.  tok_load_gguf fills
 * the caller's err buffer; the others have nothing to explain beyond the code.
 */
#ifndef CINFER_TOK_H
#define CINFER_TOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

enum {
    TOK_OK = 0,
    TOK_EINVAL = -1,      /* bad argument (NULL, id out of range) */
    TOK_ENOMEM = -2,
    TOK_ETOOSMALL = -3,   /* output buffer too small; the call reports the size needed */
    TOK_EFORMAT = -4,     /* tokenizer metadata missing or malformed */
    TOK_EUNSUPPORTED = -5 /* a tokenizer model other than SPM ("llama") */
};

/* Token attributes (llama.h enum llama_token_attr), derived from the GGUF
 * tokenizer.ggml.token_type array (1 normal, 2 unknown, 3 control,
 * 4 user-defined, 5 unused, 6 byte, other: undefined). */
enum {
    TOK_ATTR_UNDEFINED = 0,
    TOK_ATTR_UNKNOWN = 1 << 0,
    TOK_ATTR_UNUSED = 1 << 1,
    TOK_ATTR_NORMAL = 1 << 2,
    TOK_ATTR_CONTROL = 1 << 3,
    TOK_ATTR_USER_DEFINED = 1 << 4,
    TOK_ATTR_BYTE = 1 << 5,
    TOK_ATTR_LSTRIP = 1 << 7, /* strip whitespace left of the token when parsing specials */
    TOK_ATTR_RSTRIP = 1 << 8, /* ... right of it */
};

/* Flags for tok_decode and tok_stream_new. */
enum {
    /* Render control/unknown tokens as their text ("<s>"); otherwise they
     * decode to nothing (llama_token_to_piece's `special`). */
    TOK_SPECIAL = 1 << 0,
    /* tok_decode only: drop a leading BOS (when the vocab adds BOS) and a
     * trailing EOS (when it adds EOS) — llama_detokenize's remove_special. */
    TOK_REMOVE_SPECIAL = 1 << 1,
    /* tok_stream only: the first token fed starts the text, so its leading
     * space (the one add_space_prefix put there) is stripped — see below. */
    TOK_TEXT_START = 1 << 2,
};

typedef struct tok_vocab tok_vocab;

/* ---- loading ----------------------------------------------------------- */

/* Build the vocabulary from GGUF metadata:
 *   tokenizer.ggml.model              must be "llama" (SPM), else TOK_EUNSUPPORTED
 *   tokenizer.ggml.tokens             string array (n_vocab), required; duplicates are an error
 *   tokenizer.ggml.scores             f32 or i32 array (>= n_vocab), optional (0)
 *   tokenizer.ggml.token_type         i32 array (>= n_vocab), optional (all normal)
 *   tokenizer.ggml.{bos,eos,unknown,padding,eot,eom}_token_id
 *                                     optional; defaults as llama.cpp for SPM:
 *                                     bos 1, eos 2, unk 0, pad/eot/eom none;
 *                                     out-of-range values keep the default
 *   tokenizer.ggml.add_bos_token      default true
 *   tokenizer.ggml.add_eos_token      default false
 *   tokenizer.ggml.add_space_prefix   default true
 * Like llama.cpp, tokens whose text is one of the well-known end-of-turn
 * markers ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
 * "<|endoftext|>", ...) are end-of-generation and get the control attribute,
 * and for a general.name containing "phi-3"/"phi3" the specials get RSTRIP.
 * The vocabulary copies everything it needs: it stays valid after
 * gguf_close(g).  *out is freed with tok_free. */
int tok_load_gguf(const gguf_file *g, tok_vocab **out, char *err, size_t err_len);
void tok_free(tok_vocab *v); /* NULL is a no-op */

/* ---- queries ------------------------------------------------------------ */

int tok_n_vocab(const tok_vocab *v);
int32_t tok_bos(const tok_vocab *v); /* -1 when none */
int32_t tok_eos(const tok_vocab *v); /* -1 when none */
int32_t tok_eot(const tok_vocab *v); /* -1 when none */
bool tok_add_bos(const tok_vocab *v);
bool tok_add_eos(const tok_vocab *v);
bool tok_add_space_prefix(const tok_vocab *v);
/* End of generation: EOS, EOT, EOM or a well-known end-of-turn token. */
bool tok_is_eog(const tok_vocab *v, int32_t id);
/* TOK_ATTR_* bits of id; 0 for an id out of range. */
unsigned tok_attr(const tok_vocab *v, int32_t id);
float tok_score(const tok_vocab *v, int32_t id);
/* Id of the piece whose raw text is exactly s[0..len), or -1.  O(1) (hash). */
int32_t tok_find(const tok_vocab *v, const char *s, size_t len);

/* ---- encoding ----------------------------------------------------------- */

/* Upper bound on the ids tok_encode can produce for len bytes of text. */
size_t tok_encode_max(size_t len);

/* Encode text[0..len) (any bytes; UTF-8 expected) exactly as llama_tokenize:
 *  1. parse_special: control and unknown tokens ("<s>", "</s>", "<unk>")
 *     found verbatim in the text become those ids; user-defined tokens are
 *     always matched (longest token first, then leftmost occurrence);
 *  2. each remaining text fragment gets a leading space when add_space_prefix
 *     and it is the first fragment or follows a special token, spaces become
 *     U+2581, and the SPM merge runs: split into UTF-8 characters, merge the
 *     adjacent pair whose concatenation is a piece with the highest score
 *     (ties: leftmost) until none is left, then emit each symbol's id, or
 *     byte tokens <0xXX> for a symbol that is not a piece (byte fallback;
 *     a vocab without byte tokens falls back to single-byte pieces, then to
 *     the unknown id — llama.cpp throws there);
 *  3. add_special: BOS first when the vocab adds BOS, EOS last when it adds EOS.
 * Writes up to n_max ids to ids (which may be NULL when n_max is 0) and the
 * full count to *n_ids.  Returns 0, TOK_ETOOSMALL when the count exceeds
 * n_max (ids then holds the first n_max; call again with *n_ids), TOK_ENOMEM,
 * TOK_EFORMAT (a byte the vocab cannot represent at all) or TOK_EINVAL.
 * Allocates one scratch block per call and frees it before returning: 49
 * bytes per byte of escaped text (spaces count 3), plus 48 per input byte
 * when special tokens are matched — about 65 MB for 1 MB of English. */
int tok_encode(const tok_vocab *v, const char *text, size_t len, bool add_special,
               bool parse_special, int32_t *ids, size_t n_max, size_t *n_ids);

/* ---- decoding ------------------------------------------------------------ */

/* Raw piece text of id as stored in the vocab ("▁Once", "<0x0A>", "<s>"),
 * NUL-terminated, *len bytes; NULL when id is out of range.  Valid until
 * tok_free. */
const char *tok_piece(const tok_vocab *v, int32_t id, size_t *len);

/* Bytes of id as llama_token_to_piece(lstrip 0) gives them for SPM: normal
 * tokens with U+2581 turned into spaces, byte tokens <0xXX> as the one raw
 * byte, user-defined tokens as their text, control and unknown tokens as
 * nothing unless special, unused/undefined tokens as nothing.  May be an
 * incomplete UTF-8 sequence.  Zero-copy: *len bytes, valid until tok_free;
 * NULL when id is out of range. */
const char *tok_token_bytes(const tok_vocab *v, int32_t id, bool special, size_t *len);

/* The same bytes copied into buf: returns their count n, and copies them
 * (plus a NUL when n < cap) only when n <= cap — snprintf-style, so n > cap
 * means "call again with n bytes".  TOK_EINVAL for an id out of range. */
int tok_decode_token(const tok_vocab *v, int32_t id, bool special, char *buf, size_t cap);

/* Decode a whole sequence as llama_detokenize(remove_special, unparse_special):
 * pieces are concatenated; when the vocab has add_space_prefix, one leading
 * space is stripped from the first token's piece — except when, with
 * TOK_REMOVE_SPECIAL, a leading BOS was dropped: then nothing is stripped
 * (llama.cpp's rule; so [BOS, "▁Hello"] decodes to " Hello" and ["▁Hello"] to
 * "Hello").  Flags: TOK_SPECIAL, TOK_REMOVE_SPECIAL.  Output is raw bytes
 * (not UTF-8-checked).  Writes the text only when all of it fits: returns 0
 * with *n_out = n bytes (NUL added when n < cap), or TOK_ETOOSMALL with
 * *n_out = the size needed, or TOK_EINVAL for an id out of range. */
int tok_decode(const tok_vocab *v, const int32_t *ids, size_t n_ids, unsigned flags,
               char *buf, size_t cap, size_t *n_out);

/* ---- streaming detokenization ------------------------------------------- */

/* Turns a stream of ids into text that is always complete, valid UTF-8: bytes
 * of a character split across tokens (byte tokens <0xE2><0x96><0x81>) are
 * held back until the character is complete.  A byte that cannot continue
 * or start a valid sequence, and an unfinished sequence at tok_stream_flush,
 * becomes U+FFFD, one per maximal invalid subpart (the WHATWG / Python
 * errors="replace" rule) — so the stream's output is the valid-UTF-8 view of
 * the bytes tok_decode would give.
 * Leading space: with TOK_TEXT_START, the first token fed is the start of the
 * text and gets llama_detokenize's lstrip (one leading space removed when the
 * vocab has add_space_prefix); use it when decoding a text from its first id,
 * not for tokens generated after a prompt (llama.cpp prints those with
 * lstrip 0).  A BOS fed first decodes to nothing (or "<s>"), so, as in
 * llama.cpp, the space of the token after it is kept. */
typedef struct tok_stream tok_stream;

/* flags: TOK_SPECIAL, TOK_TEXT_START.  Allocates the output buffer once. */
int tok_stream_new(const tok_vocab *v, unsigned flags, tok_stream **out);
void tok_stream_free(tok_stream *s); /* NULL is a no-op */
/* Forget held bytes and start again (the TOK_TEXT_START rule applies anew). */
void tok_stream_reset(tok_stream *s);
/* Feed one id.  Returns the text completed by it (possibly empty), *len
 * bytes, NUL-terminated, valid until the next call on s; NULL (and *len 0)
 * for an id out of range.  Never allocates. */
const char *tok_stream_put(tok_stream *s, int32_t id, size_t *len);
/* End of stream: held bytes of an unfinished character come out as U+FFFD. */
const char *tok_stream_flush(tok_stream *s, size_t *len);

#endif
