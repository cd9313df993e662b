/*
 * tok.h — tokenizers read from GGUF or a Hugging Face tokenizer.json, exactly
 * as llama.cpp implements them:
 *   SPM        `tokenizer.ggml.model = "llama"`  SentencePiece-style merges by score
 *   BPE        `tokenizer.ggml.model = "gpt2"`   byte-level BPE, merges by rank, with
 *              the pre-tokenizer `tokenizer.ggml.pre` names (gpt-2, llama3/llama-bpe,
 *              qwen2, deepseek-llm, deepseek-coder, falcon, mpt, starcoder, refact, ...)
 *   WordPiece  `tokenizer.ggml.model = "bert"`   greedy longest match after BERT's
 *              normalisation (lowercase, accents stripped, punctuation split)
 *   UGM        `tokenizer.ggml.model = "t5"`     SentencePiece unigram (T5, XLM-RoBERTa:
 *              multilingual BERT embedders), Viterbi over log-probabilities after the
 *              precompiled charsmap's normalisation (tok_ugm.c)
 *   Gemma 4    `tokenizer.ggml.model = "gemma4"` BPE over raw UTF-8 with SentencePiece's
 *              escaped spaces and <0xXX> byte fallback (pre-tokenizer "gemma4")
 *
 * Owns: the vocabulary (pieces, scores, token types, special ids, merges),
 * encoding text to ids, decoding ids to bytes, and streaming detokenization
 * that only ever hands out complete UTF-8.
 *
 * Source of every rule: llama.cpp src/llama-vocab.cpp (llm_tokenizer_{spm,bpe,
 * wpm}_session, llama_vocab::impl::{load, tokenize, tokenizer_st_partition,
 * token_to_piece, detokenize}) and src/unicode.cpp (unicode_regex_split and
 * its custom gpt2/llama3 splitters); the reference outputs in ../shared were
 * made with llama.cpp c392e509 and the tests check them id for id, and
 * llama.cpp's own tokenizer test vectors for every vocabulary type.
 *
 * Ids are int32_t (llama_token); -1 is "no such token" (LLAMA_TOKEN_NULL).
 *
 * Errors: functions return 0 or a negative TOK_E* code.  The loaders fill the
 * caller's err buffer; the others have nothing to explain beyond the code.
 */
#ifndef CINFER_TOK_H
#define CINFER_TOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/gguf.h"

enum {
    TOK_OK = 0,
    TOK_EINVAL = -1,      /* bad argument (NULL, id out of range) */
    TOK_ENOMEM = -2,
    TOK_ETOOSMALL = -3,   /* output buffer too small; the call reports the size needed */
    TOK_EFORMAT = -4,     /* tokenizer metadata missing or malformed */
    TOK_EUNSUPPORTED = -5 /* a tokenizer model or pre-tokenizer this code does not implement */
};

/* Tokenizer models (llama.h enum llama_vocab_type). */
enum {
    TOK_TYPE_SPM = 1, /* "llama" */
    TOK_TYPE_BPE = 2, /* "gpt2", and tokenizer.json model.type "BPE" */
    TOK_TYPE_WPM = 3, /* "bert" */
    TOK_TYPE_UGM = 4, /* "t5" */
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

/* Build the vocabulary from GGUF metadata, as llama_vocab::impl::load does:
 *   tokenizer.ggml.model              "llama" (SPM), "gpt2" (BPE), "bert" (WordPiece),
 *                                     "t5" (UGM) or "gemma4" (BPE, pre-tokenizer "gemma4"),
 *                                     else TOK_EUNSUPPORTED
 *   tokenizer.ggml.pre                BPE pre-tokenizer (default "default"); a name
 *                                     not implemented here is TOK_EUNSUPPORTED
 *   tokenizer.ggml.precompiled_charsmap  UGM: u8/i8 array, optional (no normalisation)
 *   tokenizer.ggml.remove_extra_whitespaces  UGM: bool, default false
 *   tokenizer.ggml.tokens             string array (n_vocab), required; duplicates are an error
 *   tokenizer.ggml.scores             f32 or i32 array (>= n_vocab), optional (0)
 *   tokenizer.ggml.token_type         i32 array (>= n_vocab), optional (all normal)
 *   tokenizer.ggml.merges             string array "left right", required for BPE (rank = index)
 *   tokenizer.ggml.{bos,eos,unknown,seperator,padding,eot,eom,fim_*}_token_id
 *                                     optional; defaults as llama.cpp: SPM bos 1, eos 2,
 *                                     unk 0; BPE bos = eos = 11 (glm4: no bos; gemma4:
 *                                     none); bert bos ([CLS]) 101, unk 100, sep 102, pad 0;
 *                                     UGM eos 1, unk 2, pad 0; out-of-range values keep
 *                                     the default
 *   tokenizer.ggml.add_bos_token      default true for SPM and bert, for BPE as the
 *                                     pre-tokenizer says (true for llama3, tekken; gemma4
 *                                     always true, as llama.cpp forces it), false for UGM
 *   tokenizer.ggml.add_eos_token      default false (UGM: true)
 *   tokenizer.ggml.add_sep_token      default true for bert
 *   tokenizer.ggml.add_space_prefix   default true for SPM (UGM: false, as llama.cpp)
 * Like llama.cpp, tokens whose text is one of the well-known end-of-turn,
 * end-of-message and fill-in-the-middle markers ("<|eot_id|>", "<|im_end|>",
 * "<|end|>", "<|fim_pad|>", "<|file_sep|>", ...) are found by name, become
 * control tokens, and the end-of-turn ones, FIM pad/repo/separator, EOS, EOT
 * and EOM are end-of-generation; for a general.name containing
 * "phi-3"/"phi3" the specials get RSTRIP.  The vocabulary copies everything
 * it needs: it stays valid after gguf_close(g).  *out is freed with tok_free. */
int tok_load_gguf(const gguf_file *g, tok_vocab **out, char *err, size_t err_len);

/* Build the vocabulary from a Hugging Face tokenizer.json (model.type "BPE"):
 *   model.vocab, model.merges ("a b" strings or ["a", "b"] pairs), model.ignore_merges
 *   added_tokens      special ones (and ones that look special: "<|...|>") are
 *                     control tokens, matched only with parse_special; the others
 *                     user-defined, always matched; lstrip/rstrip honoured,
 *                     single_word refused
 *   normalizer        null or NFC (applied to text outside added tokens)
 *   pre_tokenizer     ByteLevel (use_regex: the GPT-2 regex) or a Split with one of
 *                     the known regexes (GPT-2, Llama 3, Qwen2) followed by
 *                     ByteLevel without regex; anything else is TOK_EUNSUPPORTED
 *                     with the offending part named, never tokenized differently
 *   post_processor    TemplateProcessing adding a special token before/after $A
 *                     sets add_bos/add_eos (ByteLevel or null: nothing added)
 *   decoder           ByteLevel (or null)
 * Ids without a token (gaps up to the largest id) become unused "[PAD<id>]"
 * tokens, as llama.cpp's converter writes them.  When a tokenizer_config.json
 * sits next to path, its bos_token/eos_token name BOS and EOS and its
 * add_bos_token/add_eos_token override the post-processor.  The Split regex
 * is run with llama.cpp's pre-tokenizer of the same regex, so a tokenizer.json
 * and the GGUF converted from it give the same ids.  TOK_EFORMAT for a file
 * that is not such JSON, with the JSON path of the problem in err. */
int tok_load_hf_json(const char *path, tok_vocab **out, char *err, size_t err_len);
/* The same from memory: json[0..len) is tokenizer.json, config[0..config_len)
 * tokenizer_config.json (config may be NULL). */
int tok_load_hf_json_mem(const char *json, size_t len, const char *config, size_t config_len, tok_vocab **out,
                         char *err, size_t err_len);
void tok_free(tok_vocab *v); /* NULL is a no-op */

/* ---- queries ------------------------------------------------------------ */

int tok_type(const tok_vocab *v); /* TOK_TYPE_* */
/* BPE pre-tokenizer as resolved ("llama3" for "llama-bpe", "gpt-2", ...); "" otherwise. */
const char *tok_pre_name(const tok_vocab *v);
/* For a BPE vocabulary from a GGUF without tokenizer.ggml.pre (the
 * pre-tokenizer then defaults, as in llama.cpp, which warns too): a one-line
 * warning saying so and what to do; NULL otherwise. */
const char *tok_pre_note(const tok_vocab *v);
int tok_n_vocab(const tok_vocab *v);
int32_t tok_bos(const tok_vocab *v); /* -1 when none */
int32_t tok_eos(const tok_vocab *v); /* -1 when none */
int32_t tok_eot(const tok_vocab *v); /* -1 when none */
int32_t tok_sep(const tok_vocab *v); /* -1 when none ([SEP] for bert) */
bool tok_add_bos(const tok_vocab *v);
bool tok_add_eos(const tok_vocab *v);
bool tok_add_space_prefix(const tok_vocab *v);
/* End of generation: EOS, EOT, EOM, FIM pad/repo/separator or a well-known
 * end-of-turn token. */
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
 *  1. parse_special: control and unknown tokens ("<s>", "<|im_end|>") found
 *     verbatim in the text become those ids; user-defined tokens are always
 *     matched (longest token first, then leftmost occurrence; whitespace next
 *     to an LSTRIP/RSTRIP token is dropped);
 *  2. each remaining text fragment is encoded by the vocabulary's model:
 *     SPM: a leading space when add_space_prefix and the fragment is the
 *       first or follows a special token, spaces become U+2581, then the
 *       merge: split into UTF-8 characters, merge the adjacent pair whose
 *       concatenation is a piece with the highest score (ties: leftmost)
 *       until none is left, then emit each symbol's id, or byte tokens
 *       <0xXX> for a symbol that is not a piece (byte fallback; a vocab
 *       without byte tokens falls back to single-byte pieces, then to the
 *       unknown id — llama.cpp throws there);
 *     BPE: NFC first for a tokenizer.json that asks for it; the
 *       pre-tokenizer's regexes cut the text into words; each word's UTF-8
 *       bytes become GPT-2 characters, and the adjacent pair with the lowest
 *       merge rank (ties: leftmost) merges until none is left (a word that is
 *       a token is taken whole when the pre-tokenizer ignores merges, as
 *       llama3 does); invalid UTF-8 becomes U+FFFD first, as in llama.cpp;
 *     WordPiece: BERT normalisation (first code point of the NFD, controls
 *       and marks dropped, lowercase), words split at whitespace,
 *       punctuation, ASCII symbols and CJK ideographs, then greedy longest
 *       match of "▁" + word; a word with no full match is [UNK];
 *     UGM: the charsmap's normalisation and escaped spaces, then the
 *       highest-scoring segmentation (Viterbi), unknown code points as one
 *       [UNK] per run (tok_ugm.c);
 *     Gemma 4: spaces become U+2581, lines and runs of newlines are the
 *       words, merges work on UTF-8 characters, a leftover symbol becomes
 *       its bytes' <0xXX> tokens;
 *  3. add_special: BOS first when the vocab adds BOS, EOS last when it adds
 *     EOS (WordPiece: [CLS] first and [SEP] last, always).
 * Writes up to n_max ids to ids (which may be NULL when n_max is 0) and the
 * full count to *n_ids.  Returns 0, TOK_ETOOSMALL when the count exceeds
 * n_max (ids then holds the first n_max; call again with *n_ids), TOK_ENOMEM,
 * TOK_EFORMAT (SPM: a byte the vocab cannot represent at all; UGM: a charsmap
 * pointing outside itself) or TOK_EINVAL.
 * Allocates scratch per call, sized from the input, and frees it before
 * returning; nothing per token.  SPM: 49 bytes per byte of escaped text
 * (spaces count 3); BPE and WordPiece: about 20 bytes per input byte plus 16
 * per byte of the longest word (NFC work area when needed: 16 per byte); 8
 * more per byte when special tokens are matched, plus 8 per occurrence. */
int tok_encode(const tok_vocab *v, const char *text, size_t len, bool add_special,
               bool parse_special, int32_t *ids, size_t n_max, size_t *n_ids);

/* ---- decoding ------------------------------------------------------------ */

/* Raw piece text of id as stored in the vocab ("▁Once", "<0x0A>", "<s>"),
 * NUL-terminated, *len bytes; NULL when id is out of range.  Valid until
 * tok_free. */
const char *tok_piece(const tok_vocab *v, int32_t id, size_t *len);

/* Bytes of id as llama_token_to_piece(lstrip 0) gives them: normal tokens
 * with U+2581 turned into spaces (SPM, WordPiece) or each GPT-2 character
 * turned back into its byte (BPE; a character that stands for no byte shows
 * as "[UNK_BYTE_0x<utf-8 hex><token text>]", as in llama.cpp), byte tokens
 * <0xXX> as the one raw byte, user-defined tokens as their text, control and
 * unknown tokens as nothing unless special, unused/undefined tokens as
 * nothing.  May be an incomplete UTF-8 sequence.  Zero-copy: *len bytes,
 * valid until tok_free; NULL when id is out of range. */
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
 * "Hello").  Then, for vocabularies llama.cpp marks clean_spaces (BPE except
 * deepseek/qwen2/command-r..., WordPiece; for a tokenizer.json its config's
 * clean_up_tokenization_spaces), llama.cpp's clean-up: " ?", " !", " .",
 * " ," lose the space, " ' " becomes "'", and " 's", " 'm", " 're", " 've"
 * lose the space — so decoding is lossy there; the bytes of tok_token_bytes
 * and the stream below never are.  Flags: TOK_SPECIAL, TOK_REMOVE_SPECIAL.
 * Output is raw bytes (not UTF-8-checked).  Writes the text only when all of
 * it fits: returns 0 with *n_out = n bytes (NUL added when n < cap), or
 * TOK_ETOOSMALL with *n_out = the size needed (before the clean-up: an upper
 * bound), or TOK_EINVAL for an id out of range. */
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
