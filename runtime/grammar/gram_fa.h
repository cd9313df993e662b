/*
 * gram_fa.h — finite automata over bytes for the grammar module: a Thompson
 * NFA builder, subset construction into byte-class DFAs (with optional "call"
 * symbols that the grammar uses to invoke other rules), trimming,
 * minimisation, intersection, and the regular languages JSON Schema needs:
 * ECMA-262 regex patterns (a subset), canonical JSON strings, canonical
 * numbers within a range, multipleOf, and string formats.
 *
 * Canonical JSON text (what every grammar in cinfer accepts and generates):
 *   strings  raw UTF-8 except '"' → \", '\' → \\, U+0008/0C/0A/0D/09 →
 *            \b \f \n \r \t, other controls → \u00XX (lowercase hex);
 *            so each string value has exactly one spelling;
 *   numbers  -?(0|[1-9][0-9]*)(\.[0-9]*[1-9])? — no exponent, no trailing
 *            fraction zeros, no "-0": one spelling per decimal value.
 * gram_canon (gram.h) rewrites any JSON text into this form, so "the
 * grammar accepts the instance" is a statement about values.
 *
 * Automata are built once at schema compile time; nothing here runs per token.
 */
#ifndef CINFER_GRAM_FA_H
#define CINFER_GRAM_FA_H

#include <stddef.h>
#include <stdint.h>

/* Symbols: 0..255 are bytes; GRAM_SYM_CALL + k is "call rule k". */
#define GRAM_SYM_CALL 256

/* ---- NFA builder --------------------------------------------------------------- */

typedef struct {
    int32_t from, to;
    int32_t lo, hi; /* symbol range [lo, hi]; lo = -1: epsilon */
} gram_nfa_edge;

typedef struct {
    int n_states, cap_states;
    int32_t *tag;            /* (n_states) accept tag, -1 when not accepting */
    gram_nfa_edge *edges;
    int n_edges, cap_edges;
    int oom;                 /* an allocation failed: every later call is a no-op */
} gram_nfa;

typedef struct {
    int32_t start, end;      /* Thompson fragment: one entry, one exit */
} gram_frag;

void gram_nfa_init(gram_nfa *n);
void gram_nfa_free(gram_nfa *n);
int32_t gram_nfa_state(gram_nfa *n);
void gram_nfa_edge_add(gram_nfa *n, int32_t from, int32_t to, int32_t lo, int32_t hi);
gram_frag gram_frag_empty(gram_nfa *n);
gram_frag gram_frag_bytes(gram_nfa *n, const char *s, size_t len);
gram_frag gram_frag_range(gram_nfa *n, int lo, int hi);      /* one byte in [lo, hi] */
gram_frag gram_frag_call(gram_nfa *n, int32_t rule);         /* one call symbol */
gram_frag gram_frag_cat(gram_nfa *n, gram_frag a, gram_frag b);
gram_frag gram_frag_alt(gram_nfa *n, gram_frag a, gram_frag b);
gram_frag gram_frag_opt(gram_nfa *n, gram_frag a);
gram_frag gram_frag_star(gram_nfa *n, gram_frag a);
/* A fragment for one code point in [lo, hi] as canonical JSON string content
 * (UTF-8, with the escapes listed above).  Surrogates are skipped. */
gram_frag gram_frag_cp_range(gram_nfa *n, uint32_t lo, uint32_t hi);

/* ---- DFA ----------------------------------------------------------------------- */

typedef struct {
    int32_t rule; /* callee */
    int32_t next; /* state after the callee returns */
} gram_call;

typedef struct {
    int n_states;            /* state 0 is the start; no state is dead after trimming */
    int n_classes;
    uint8_t cls[256];        /* byte → class */
    int32_t *next;           /* (n_states, n_classes): next state or -1 */
    int32_t *label;          /* (n_states): accept label, -1 when not accepting */
    int32_t *call_off;       /* (n_states + 1) into calls, or NULL when there are none */
    gram_call *calls;
    int n_calls;
} gram_dfa;

/* Accept labels come from tag sets: the set of NFA tags a DFA state holds is
 * mapped to a label by labeller (user data u); NULL: label 0 for any
 * non-empty set.  A labeller returns -1 for "not accepting". */
typedef int32_t (*gram_labeller)(const int32_t *tags, int n_tags, void *u);

/* Subset construction from start, then trim (drop states that cannot reach
 * an accepting one) and minimise.  Returns 0, -1 out of memory, -2 more than
 * max_states states (err says so). */
int gram_dfa_from_nfa(const gram_nfa *n, int32_t start, gram_labeller lab, void *u, int max_states,
                      gram_dfa *out);
/* The same with a work budget: the subset construction stops (-2) once it
 * has visited more than max_work NFA states and edges (sets processed,
 * closures made), and adds what it visited to *work (may be NULL). */
int gram_dfa_from_nfa_limited(const gram_nfa *n, int32_t start, gram_labeller lab, void *u, int max_states,
                              long max_work, long *work, gram_dfa *out);
void gram_dfa_free(gram_dfa *d);
/* The language is empty (no accepting state reachable). */
int gram_dfa_empty(const gram_dfa *d);
/* Intersection of two call-free DFAs; labels from a (accepting where both
 * accept).  Same return codes as gram_dfa_from_nfa. */
int gram_dfa_intersect(const gram_dfa *a, const gram_dfa *b, int max_states, gram_dfa *out);
/* Union of k call-free DFAs by a product construction (no subset
 * construction): a state is accepting when the labeller says so of the
 * tags tag_base[i] + label of each component i accepting there (sorted).
 * Same return codes as gram_dfa_from_nfa. */
int gram_dfa_union(const gram_dfa *const *ds, const int32_t *tag_base, int k, gram_labeller lab, void *u,
                   int max_states, gram_dfa *out);
/* The DFA of n literal byte strings, string i accepting with labels[i]
 * (labels NULL: 0); of equal strings the first label wins. */
int gram_dfa_literals(const char *const *strs, const size_t *lens, const int32_t *labels, int n, int max_states,
                      gram_dfa *out);
/* '"' d '"': a call-free DFA of canonical string content, quoted. */
int gram_dfa_quote(const gram_dfa *d, gram_dfa *out);
/* A deep copy.  0 or -1 out of memory. */
int gram_dfa_copy(const gram_dfa *d, gram_dfa *out);
/* Complement of a call-free DFA over all byte strings (labels become 0). */
int gram_dfa_complement(const gram_dfa *d, gram_dfa *out);
/* Copy d into n as a fragment (labels become accepting exits). */
gram_frag gram_frag_dfa(gram_nfa *n, const gram_dfa *d);
/* Remove call edges to rules for which dead(rule, u) is true, then trim and
 * minimise again.  Returns as above. */
int gram_dfa_prune_calls(gram_dfa *d, int (*dead)(int32_t rule, void *u), void *u);
/* Step one byte from state s: next state or -1. */
static inline int32_t gram_dfa_next(const gram_dfa *d, int32_t s, uint8_t b) {
    return d->next[(size_t)s * (size_t)d->n_classes + d->cls[b]];
}
/* Does d accept bytes[0..len) as a whole?  (Calls are not followed.) */
int gram_dfa_match(const gram_dfa *d, const char *s, size_t len);
/* A structural hash (for sharing identical call-free rules). */
uint64_t gram_dfa_hash(const gram_dfa *d);
int gram_dfa_equal(const gram_dfa *a, const gram_dfa *b);

/* ---- languages ----------------------------------------------------------------- */

/* Compile an ECMA-262 pattern (search semantics: unanchored unless ^/$) into
 * a fragment over canonical string content.  Supported: literals and escapes
 * (\d \D \w \W \s \S \t \n \r \f \v \0 \xHH \uHHHH \u{H..} identity escapes),
 * '.', classes with ranges and negation, groups (capturing, (?:), (?<name>)),
 * alternation, quantifiers * + ? {n} {n,} {n,m} (lazy forms too), ^ and $ at
 * the start/end of a top-level alternative.  Anything else (lookaround,
 * backreferences, \b, \p{..}) fails with a message in err.  Returns 0 or -1. */
int gram_regex(gram_nfa *n, const char *pattern, gram_frag *out, char *err, size_t err_len);
/* Any canonical string content with min..max code points (max -1: no bound). */
gram_frag gram_frag_string_len(gram_nfa *n, long min, long max);
/* DFA of canonical string content for a format: *known = 1 (out set), 0 for a
 * format JSON Schema does not define (an annotation), -1 for a defined one
 * we cannot check (idn-hostname).  Formats: date, time, date-time,
 * duration, uuid, email, idn-email, hostname, ipv4, ipv6, uri,
 * uri-reference, iri, iri-reference, uri-template, json-pointer,
 * relative-json-pointer, regex (a regular subset of valid expressions).
 * Returns 0, -1 out of memory, -2 too large. */
int gram_format_dfa(const char *format, int max_states, gram_dfa *out, int *known);
/* A decimal bound: canonical decimal text (as gram_canon_number gives). */
typedef struct {
    const char *lo, *hi; /* NULL: unbounded */
    int lo_excl, hi_excl;
    int integer;         /* integers only */
    int frac_only;       /* non-integers only */
    const char *multiple_of; /* canonical decimal > 0, or NULL */
    long max_work;       /* work budget (NFA states and edges built and visited, product states);
                          * 0: only the per-automaton state limits */
    long *work;          /* the work done is added here (may be NULL) */
} gram_num_spec;
/* DFA of canonical numbers in the range.  Returns 0, -1 OOM, -2 too large
 * or over max_work (err says so). */
int gram_number_dfa(const gram_num_spec *spec, gram_dfa *out, char *err, size_t err_len);

/* ---- canonical values ------------------------------------------------------------ */

/* Canonical decimal text of a JSON number literal s[0..len) (exponents
 * expanded, trailing fraction zeros and "-0" removed) into buf.  Returns the
 * length, -1 malformed, -2 does not fit cap. */
long gram_canon_number(const char *s, size_t len, char *buf, size_t cap);
/* Canonical decimal of a double (shortest text that round-trips). */
long gram_canon_double(double v, char *buf, size_t cap);
/* Compare two canonical decimals: <0, 0, >0. */
int gram_dec_cmp(const char *a, const char *b);

/* A growable int32 array shared by the grammar modules. */
typedef struct {
    int32_t *v;
    int n, cap;
} gram_ivec;
/* Append x; 0, or -1 when out of memory (the array is unchanged). */
int gram_ivec_push(gram_ivec *a, int32_t x);

#endif
