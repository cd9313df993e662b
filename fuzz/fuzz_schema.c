/*
 * fuzz_schema.c — libFuzzer target for the JSON Schema compiler and what a
 * compiled grammar then does: the matcher on arbitrary bytes, the checker on
 * canonical text, and token masks on a real vocabulary.  Built and run by
 * `make fuzz-schema`.
 *
 * Input: SCHEMA [ '\0' FLAGS TEXT ].  FLAGS' low bit asks for flexible
 * whitespace, the next for the permissive mode, then generation's number
 * limits, then generation semantics for objects.  The schema is compiled;
 * when it compiles, TEXT goes to gram_check as raw bytes and, canonicalised,
 * again; then a matcher walks TEXT byte by byte, and at each accepted byte
 * (up to 64) a mask is computed over the vocabulary of
 * $CINFER_FUZZ_VOCAB (default ../shared/models/stories260K/stories260K.gguf;
 * masks are skipped when it is absent).
 *
 * Beyond "no crash, no sanitizer report" it checks the contracts: an error
 * is a one-line message with a known code and leaves no grammar; a check of
 * canonical text agrees with the matcher fed the same bytes; every token in
 * a mask is one the matcher accepts, checked on the first mask.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "grammar/gram_mask.h"
#include "text/tok.h"

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static gram_vocab *g_vocab;
static tok_vocab *g_tok;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *p = getenv("CINFER_FUZZ_VOCAB");
    if (!p) p = "../shared/models/stories260K/stories260K.gguf";
    gguf_file *gf;
    char err[512];
    if (gguf_open(p, &gf, err, sizeof err)) return 0;
    if (!tok_load_gguf(gf, &g_tok, err, sizeof err) && gram_vocab_new(g_tok, &g_vocab)) g_vocab = NULL;
    gguf_close(gf);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t slen = nul ? (size_t)(nul - data) : size;
    unsigned flags = nul && nul + 1 < data + size ? nul[1] : 0;
    const char *text = nul && nul + 2 <= data + size ? (const char *)nul + 2 : "";
    size_t tlen = nul && nul + 2 <= data + size ? size - slen - 2 : 0;
    /* smaller automata and work than the library's defaults: the same code paths, and
     * inputs that take seconds under the sanitizers would stall the search */
    gram_options o = {.ws_flexible = flags & 1, .permissive = flags >> 1 & 1, .gen_limits = flags >> 2 & 1,
                      .gen_objects = flags >> 3 & 1,
                      .max_states = 20000, .max_work = 500000};
    gram_grammar *g = NULL;
    char err[2048];
    int rc = gram_compile((const char *)data, slen, &o, &g, err, sizeof err);
    if (rc) {
        CHECK(!g);
        CHECK(rc == CINFER_EFORMAT || rc == CINFER_EUNSUPPORTED || rc == CINFER_ENOMEM);
        CHECK(err[0] && !strchr(err, '\n'));
        return 0;
    }
    CHECK(g);
    int raw = gram_check(g, text, tlen, err, sizeof err);
    CHECK(raw == 0 || raw == 1);
    char *canon = NULL;
    size_t cl;
    if (!gram_canon(text, tlen, &canon, &cl, err, sizeof err)) {
        int c = gram_check(g, canon, cl, err, sizeof err);
        CHECK(c == 0 || c == 1);
        /* the same bytes through a matcher, one at a time */
        gram_matcher *m;
        CHECK(!gram_matcher_new(g, &m));
        size_t i = 0;
        while (i < cl && !gram_matcher_feed(m, canon + i, 1)) i++;
        CHECK((i == cl && gram_matcher_accepting(m)) == (c == 1));
        gram_matcher_free(m);
        free(canon);
    }
    if (g_vocab) {
        gram_masker *mk;
        gram_matcher *m;
        CHECK(!gram_masker_new(g, g_vocab, &mk));
        CHECK(!gram_matcher_new(g, &m));
        int nv = gram_vocab_n_vocab(g_vocab), nw = (nv + 31) / 32;
        uint32_t *bits = malloc((size_t)nw * 4), *scratch = malloc((size_t)nw * 4);
        CHECK(bits && scratch);
        int masks = 0;
        for (size_t i = 0; i <= tlen && masks < 64; i++) {
            int r = gram_mask(mk, m, bits, scratch);
            CHECK(r >= 0);
            masks++;
            if (masks == 1) {
                /* every allowed token is accepted by the matcher (EOG tokens: when accepting) */
                int32_t st = gram_matcher_state(m);
                for (int32_t id = 0; id < nv; id++) {
                    if (!(bits[id >> 5] >> (id & 31) & 1)) continue;
                    CHECK(gram_accept_token(g_vocab, m, id) == 0);
                    gram_matcher_set_state(m, st);
                }
            }
            if (i == tlen || gram_matcher_feed(m, text + i, 1)) break;
        }
        free(bits);
        free(scratch);
        gram_matcher_free(m);
        gram_masker_free(mk);
    }
    gram_free(g);
    return 0;
}
