/*
 * tok_hf.c — a Hugging Face tokenizer.json (byte-level BPE) as a tok_vocab.
 *
 * The vocabulary is built the way llama.cpp's convert_hf_to_gguf.py would
 * write it (ids from model.vocab and added_tokens, gaps as unused "[PAD<id>]",
 * added tokens control when special or special-looking, user-defined
 * otherwise) and then finished by the same code as a GGUF vocabulary, so the
 * two give the same ids for the same text.  What HF itself decides is read
 * from the file: model.ignore_merges, the normalizer (NFC), which special
 * tokens the post-processor adds, and, from a tokenizer_config.json next to
 * the file, BOS/EOS and clean_up_tokenization_spaces.
 *
 * Only what can be reproduced exactly is accepted: a pre-tokenizer, model,
 * normalizer, post-processor or decoder outside the known set is refused with
 * TOK_EUNSUPPORTED naming it, never approximated.  Errors carry the JSON path.
 */
#include <cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_impl.h"

#define fail tok_fail

typedef struct {
    const char *s; /* into the cJSON tree */
    size_t n;
    uint16_t attr;
    bool set;
} hf_tok;

static const char *jstr(const cJSON *o, const char *key) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(j) ? j->valuestring : NULL;
}

/* true/false/absent: *out unchanged when absent or null; -1 for another type */
static int jbool(const cJSON *o, const char *key, bool *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!j || cJSON_IsNull(j)) return 0;
    if (!cJSON_IsBool(j)) return -1;
    *out = cJSON_IsTrue(j);
    return 0;
}

static bool is_int(const cJSON *j, double lo, double hi) {
    return cJSON_IsNumber(j) && j->valuedouble >= lo && j->valuedouble <= hi && j->valuedouble == (double)(int64_t)j->valuedouble;
}

/* convert_hf_to_gguf.py does_token_look_special */
static bool looks_special(const char *s, size_t n) {
    static const char *const names[] = {"<pad>", "<mask>", "<2mass>", "[@BOS@]"};
    for (size_t k = 0; k < 4; k++)
        if (strlen(names[k]) == n && !memcmp(s, names[k], n)) return true;
#define ENDS(a, b) (n >= strlen(a) + strlen(b) && !memcmp(s, a, strlen(a)) && !memcmp(s + n - strlen(b), b, strlen(b)))
    return ENDS("<|", "|>") || ENDS("<\xef\xbd\x9c", "\xef\xbd\x9c>") || ENDS("<unused", ">");
#undef ENDS
}

static int check_pre_tokenizer(const cJSON *pt, const pre_def **pre, char *err, size_t err_len) {
    *pre = NULL;
    if (!pt || cJSON_IsNull(pt))
        return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: pre_tokenizer is null (byte-level BPE needs ByteLevel)");
    const cJSON *items[8];
    int n = 0;
    const char *type = jstr(pt, "type");
    if (type && !strcmp(type, "Sequence")) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers"), *it;
        if (!cJSON_IsArray(arr)) return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: pre_tokenizer.pretokenizers is not an array");
        cJSON_ArrayForEach(it, arr) {
            if (n == 8) return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: pre_tokenizer: too many steps");
            items[n++] = it;
        }
    } else {
        items[n++] = pt;
    }
    const char *regex = NULL;
    bool byte_level = false;
    for (int k = 0; k < n; k++) {
        const char *t = jstr(items[k], "type");
        if (!t) return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: pre_tokenizer step %d has no type", k);
        if (!strcmp(t, "Split")) {
            const cJSON *pat = cJSON_GetObjectItemCaseSensitive(items[k], "pattern");
            const char *rx = pat ? jstr(pat, "Regex") : NULL;
            const char *beh = jstr(items[k], "behavior");
            bool invert = false;
            if (jbool(items[k], "invert", &invert)) return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: Split.invert is not a boolean");
            if (!rx || regex || byte_level)
                return fail(err, err_len, TOK_EUNSUPPORTED,
                            "tok: tokenizer.json: pre_tokenizer: only one Split with a Regex pattern, before ByteLevel, is supported");
            if (!beh || strcmp(beh, "Isolated") || invert)
                return fail(err, err_len, TOK_EUNSUPPORTED,
                            "tok: tokenizer.json: pre_tokenizer Split behavior '%s' invert %d not supported (Isolated, false)",
                            beh ? beh : "(none)", (int)invert);
            regex = rx;
        } else if (!strcmp(t, "ByteLevel")) {
            bool aps = true, use_regex = true;
            if (jbool(items[k], "add_prefix_space", &aps) || jbool(items[k], "use_regex", &use_regex))
                return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: ByteLevel flags are not booleans");
            if (aps)
                return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: ByteLevel add_prefix_space true not supported");
            if (byte_level) return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: two ByteLevel pre-tokenizers");
            byte_level = true;
            if (use_regex) {
                if (regex)
                    return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: Split followed by ByteLevel use_regex not supported");
                *pre = tok_pre_lookup("gpt-2", 5);
            }
        } else {
            return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: pre_tokenizer type '%.40s' not supported", t);
        }
    }
    if (!byte_level) return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: pre_tokenizer has no ByteLevel step");
    if (regex) {
        *pre = tok_pre_for_hf_regex(regex);
        if (!*pre)
            return fail(err, err_len, TOK_EUNSUPPORTED,
                        "tok: tokenizer.json: pre_tokenizer Split regex not supported (known: GPT-2, Llama 3, Qwen2): '%.200s'",
                        regex);
    }
    if (!*pre) return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: ByteLevel without a split regex not supported");
    return 0;
}

static int check_normalizer(const cJSON *nm, bool *nfc, char *err, size_t err_len) {
    *nfc = false;
    if (!nm || cJSON_IsNull(nm)) return 0;
    const char *t = jstr(nm, "type");
    if (t && !strcmp(t, "NFC")) {
        *nfc = true;
        return 0;
    }
    if (t && !strcmp(t, "Sequence")) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(nm, "normalizers"), *it;
        if (!cJSON_IsArray(arr)) return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: normalizer.normalizers is not an array");
        cJSON_ArrayForEach(it, arr) {
            const char *st = jstr(it, "type");
            if (!st || strcmp(st, "NFC"))
                return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: normalizer '%.40s' not supported (NFC only)",
                            st ? st : "?");
            *nfc = true;
        }
        return 0;
    }
    return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: normalizer '%.40s' not supported (null or NFC)",
                t ? t : "?");
}

/* TemplateProcessing "single": special tokens before/after $A set BOS/EOS. */
static int read_template(const cJSON *tp, tok_vocab *v, char *err, size_t err_len) {
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(tp, "single"), *it;
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(tp, "special_tokens");
    if (!cJSON_IsArray(single)) return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: post_processor.single is not an array");
    bool seen_a = false;
    cJSON_ArrayForEach(it, single) {
        const cJSON *seq = cJSON_GetObjectItemCaseSensitive(it, "Sequence");
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");
        if (seq) {
            const char *id = jstr(seq, "id");
            if (!id || strcmp(id, "A") || seen_a)
                return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: post_processor.single: only one $A supported");
            seen_a = true;
            continue;
        }
        const char *name = sp ? jstr(sp, "id") : NULL;
        const cJSON *ent = name && specials ? cJSON_GetObjectItemCaseSensitive(specials, name) : NULL;
        const cJSON *ids = ent ? cJSON_GetObjectItemCaseSensitive(ent, "ids") : NULL;
        if (!cJSON_IsArray(ids) || cJSON_GetArraySize(ids) != 1 || !is_int(cJSON_GetArrayItem(ids, 0), 0, INT32_MAX))
            return fail(err, err_len, TOK_EUNSUPPORTED,
                        "tok: tokenizer.json: post_processor.single: special token '%.40s' without exactly one id",
                        name ? name : "?");
        int32_t id = (int32_t)cJSON_GetArrayItem(ids, 0)->valuedouble;
        if (id >= v->n_vocab) return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: post_processor token id %d out of range", (int)id);
        if (!seen_a) {
            if (v->add_bos) return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: two special tokens before $A");
            v->add_bos = true;
            v->bos = id;
        } else {
            if (v->add_eos) return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: two special tokens after $A");
            v->add_eos = true;
            v->eos = id;
        }
    }
    return 0;
}

static int check_post_processor(const cJSON *pp, tok_vocab *v, char *err, size_t err_len) {
    if (!pp || cJSON_IsNull(pp)) return 0;
    const char *t = jstr(pp, "type");
    if (t && !strcmp(t, "ByteLevel")) return 0; /* offsets only */
    if (t && !strcmp(t, "TemplateProcessing")) return read_template(pp, v, err, err_len);
    if (t && !strcmp(t, "Sequence")) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(pp, "processors"), *it;
        if (!cJSON_IsArray(arr)) return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: post_processor.processors is not an array");
        cJSON_ArrayForEach(it, arr) {
            int rc = check_post_processor(it, v, err, err_len);
            if (rc) return rc;
        }
        return 0;
    }
    return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: post_processor '%.40s' not supported", t ? t : "?");
}

static int check_decoder(const cJSON *d, char *err, size_t err_len) {
    if (!d || cJSON_IsNull(d)) return 0;
    const char *t = jstr(d, "type");
    if (t && !strcmp(t, "ByteLevel")) return 0;
    return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: decoder '%.40s' not supported (ByteLevel)", t ? t : "?");
}

/* tokenizer_config.json token: "text" or {"content": "text"}; -1 when absent/unknown. */
static int32_t config_token(const cJSON *cfg, const char *key, const tok_vocab *v) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(cfg, key);
    const char *s = cJSON_IsString(j) ? j->valuestring : j ? jstr(j, "content") : NULL;
    return s ? tok_vocab_find(v, s, strlen(s)) : -1;
}

/* model.vocab and added_tokens into v (n_min: pad to at least that many
 * tokens, as llama.cpp's converter pads to the model's vocab_size).
 * spm: SentencePiece-style, "<0xXX>" pieces are byte tokens. */
static int read_vocab(const cJSON *root, const cJSON *model, int32_t n_min, bool spm, tok_vocab *v, char *err,
                      size_t err_len) {
    int rc;
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsObject(vocab)) return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: model.vocab is not an object");
    if (added && !cJSON_IsNull(added) && !cJSON_IsArray(added))
        return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: added_tokens is not an array");
    const cJSON *it;
    int64_t n_entries = 0, max_id = -1;
    cJSON_ArrayForEach(it, vocab) {
        if (!is_int(it, 0, INT32_MAX / 4))
            return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: model.vocab['%.40s'] is not a token id", it->string);
        n_entries++;
        if (it->valuedouble > max_id) max_id = (int64_t)it->valuedouble;
    }
    if (cJSON_IsArray(added))
        cJSON_ArrayForEach(it, added) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
            if (!is_int(id, 0, INT32_MAX / 4) || !jstr(it, "content"))
                return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: added_tokens[%lld] without id/content",
                            (long long)n_entries);
            n_entries++;
            if (id->valuedouble > max_id) max_id = (int64_t)id->valuedouble;
        }
    if (max_id < 0) return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: no tokens");
    if (max_id + 1 > 2 * n_entries + 4096) /* gaps are padding; refuse absurd ones */
        return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: largest id %lld for %lld tokens", (long long)max_id,
                    (long long)n_entries);
    if (n_min > 2 * (max_id + 1) + 4096)
        return fail(err, err_len, TOK_EFORMAT, "tok: the model's vocab_size %d is far beyond the tokenizer's %lld tokens",
                    (int)n_min, (long long)max_id + 1);
    int32_t n = (int32_t)(max_id + 1);
    if (n < n_min) n = n_min;
    hf_tok *tk = calloc((size_t)n, sizeof *tk);
    if (!tk) return fail(err, err_len, TOK_ENOMEM, "tok: out of memory");
    rc = 0;
    cJSON_ArrayForEach(it, vocab) {
        int32_t id = (int32_t)it->valuedouble;
        if (tk[id].set) {
            rc = fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: id %d used twice in model.vocab", (int)id);
            break;
        }
        size_t l = strlen(it->string);
        bool byte = spm && l == 6 && !strncmp(it->string, "<0x", 3) && it->string[5] == '>' &&
                    isxdigit((unsigned char)it->string[3]) && isxdigit((unsigned char)it->string[4]);
        tk[id] = (hf_tok){it->string, l, byte ? TOK_ATTR_BYTE : TOK_ATTR_NORMAL, true};
    }
    if (!rc && cJSON_IsArray(added))
        cJSON_ArrayForEach(it, added) {
            int32_t id = (int32_t)cJSON_GetObjectItemCaseSensitive(it, "id")->valuedouble;
            const char *content = jstr(it, "content");
            size_t cl = strlen(content);
            if (tk[id].set && (tk[id].n != cl || memcmp(tk[id].s, content, cl))) {
                rc = fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: added token %d '%.40s' differs from model.vocab '%.40s'",
                          (int)id, content, tk[id].s);
                break;
            }
            bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
            if (jbool(it, "special", &special) || jbool(it, "lstrip", &lstrip) || jbool(it, "rstrip", &rstrip) ||
                jbool(it, "single_word", &single_word) || jbool(it, "normalized", &normalized)) {
                rc = fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: added token %d: flags are not booleans", (int)id);
                break;
            }
            if (single_word) { /* HF matches it only as a whole word; llama.cpp has no such rule */
                rc = fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: added token %d '%.40s': single_word not supported",
                          (int)id, content);
                break;
            }
            uint16_t attr = (special || looks_special(content, cl)) ? TOK_ATTR_CONTROL : TOK_ATTR_USER_DEFINED;
            if (lstrip) attr |= TOK_ATTR_LSTRIP;
            if (rstrip) attr |= TOK_ATTR_RSTRIP;
            if (spm && normalized) attr |= TOK_ATTR_NORMALIZED_;
            tk[id] = (hf_tok){content, cl, attr, true};
        }
    if (!rc) rc = tok_vocab_alloc(v, n, err, err_len);
    for (int32_t i = 0; i < n && !rc; i++) {
        char pad[32];
        if (tk[i].set) {
            rc = tok_vocab_set(v, i, tk[i].s, tk[i].n, 0.0f, tk[i].attr, err, err_len);
        } else {
            int l = snprintf(pad, sizeof pad, "[PAD%d]", (int)i);
            rc = tok_vocab_set(v, i, pad, (size_t)l, 0.0f, TOK_ATTR_UNUSED, err, err_len);
        }
    }
    free(tk);
    return rc;
}

static int read_merges(const cJSON *model, tok_vocab *v, char *err, size_t err_len) {
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges"), *it;
    if (!cJSON_IsArray(merges)) return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: model.merges is not an array");
    int rc;
    if ((rc = tok_merge_reserve(v, (size_t)cJSON_GetArraySize(merges), err, err_len))) return rc;
    int64_t k = 0;
    cJSON_ArrayForEach(it, merges) {
        const char *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        if (cJSON_IsString(it)) { /* "a b": exactly one space (HF's split(' ')) */
            const char *sp = strchr(it->valuestring, ' ');
            if (sp && !strchr(sp + 1, ' ')) {
                a = it->valuestring, na = (size_t)(sp - a);
                b = sp + 1, nb = strlen(b);
            }
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(cJSON_GetArrayItem(it, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(it, 1))) {
            a = cJSON_GetArrayItem(it, 0)->valuestring, na = strlen(a);
            b = cJSON_GetArrayItem(it, 1)->valuestring, nb = strlen(b);
        }
        if (!a || !na || !nb)
            return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: model.merges[%lld] is not \"a b\" or [\"a\", \"b\"]",
                        (long long)k);
        if ((rc = tok_merge_add(v, a, na, b, nb, err, err_len))) return rc;
        k++;
    }
    return 0;
}

/* tokenizer_config.json: BOS/EOS/PAD by text, add_bos/add_eos, clean-up. */
static int read_config(const cJSON *cfg, tok_vocab *v, char *err, size_t err_len) {
    if (!cfg) return 0;
    int32_t id;
    if ((id = config_token(cfg, "bos_token", v)) >= 0) v->bos = id;
    if ((id = config_token(cfg, "eos_token", v)) >= 0) v->eos = id;
    if ((id = config_token(cfg, "pad_token", v)) >= 0) v->pad = id;
    if (jbool(cfg, "add_bos_token", &v->add_bos) || jbool(cfg, "add_eos_token", &v->add_eos) ||
        jbool(cfg, "clean_up_tokenization_spaces", &v->clean_spaces))
        return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer_config.json: add_bos_token/add_eos_token/"
                                               "clean_up_tokenization_spaces are not booleans");
    return 0;
}

static bool is_metaspace_char(const char *s) { return s && !strcmp(s, "\xe2\x96\x81"); }

/* The SentencePiece-style pipeline of a byte_fallback BPE (Llama 2,
 * TinyStories, Mistral v1 style): spaces become U+2581 (a Replace
 * normalizer or a Metaspace pre-tokenizer), a U+2581 is prepended (a
 * Prepend normalizer or Metaspace's prepend_scheme), no other splitting;
 * decoders among Replace/ByteFallback/Fuse/Strip/Metaspace. */
static int check_spm_pipeline(const cJSON *root, tok_vocab *v, char *err, size_t err_len) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    const cJSON *steps[8];
    int n = 0;
    bool prepend = false, replace = false;
    if (nm && !cJSON_IsNull(nm)) {
        const char *t = jstr(nm, "type");
        if (t && !strcmp(t, "Sequence")) {
            const cJSON *arr = cJSON_GetObjectItemCaseSensitive(nm, "normalizers"), *it;
            if (!cJSON_IsArray(arr)) return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: normalizer.normalizers is not an array");
            cJSON_ArrayForEach(it, arr) {
                if (n == 8) return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: normalizer: too many steps");
                steps[n++] = it;
            }
        } else {
            steps[n++] = nm;
        }
    }
    for (int k = 0; k < n; k++) {
        const char *t = jstr(steps[k], "type");
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(steps[k], "pattern");
        if (t && !strcmp(t, "Prepend") && is_metaspace_char(jstr(steps[k], "prepend")) && !prepend && !replace) {
            prepend = true;
        } else if (t && !strcmp(t, "Replace") && pat && jstr(pat, "String") && !strcmp(jstr(pat, "String"), " ") &&
                   is_metaspace_char(jstr(steps[k], "content")) && !replace) {
            replace = true;
        } else {
            return fail(err, err_len, TOK_EUNSUPPORTED,
                        "tok: tokenizer.json: normalizer step '%.40s' not supported for SentencePiece-style BPE (model.byte_fallback) "
                        "(Prepend \"\xe2\x96\x81\", then Replace \" \" -> \"\xe2\x96\x81\")", t ? t : "?");
        }
    }
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    int mode = TOK_PREFIX_RUN;
    bool meta = false, meta_prefix = false;
    if (pt && !cJSON_IsNull(pt)) {
        const char *t = jstr(pt, "type");
        if (!t || strcmp(t, "Metaspace") || !is_metaspace_char(jstr(pt, "replacement")))
            return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: pre_tokenizer '%.40s' not supported for "
                        "SentencePiece-style BPE, model.byte_fallback (null or Metaspace with \"\xe2\x96\x81\")", t ? t : "?");
        meta = true;
        const char *scheme = jstr(pt, "prepend_scheme");
        bool aps = true, split = true;
        if (jbool(pt, "add_prefix_space", &aps) || jbool(pt, "split", &split))
            return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: Metaspace flags are not booleans");
        if (scheme && !strcmp(scheme, "first")) meta_prefix = true, mode = TOK_PREFIX_FIRST;
        else if (scheme && !strcmp(scheme, "always")) meta_prefix = true, mode = TOK_PREFIX_EACH;
        else if (scheme && !strcmp(scheme, "never")) meta_prefix = false;
        else if (scheme) return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: Metaspace prepend_scheme '%.20s'", scheme);
        else meta_prefix = aps, mode = TOK_PREFIX_EACH;
        v->spm_split = split;
    }
    if (!replace && !meta)
        return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: SentencePiece-style BPE whose spaces are not "
                    "turned into \xe2\x96\x81 (no Replace normalizer, no Metaspace) is not supported");
    if (prepend && !replace)
        return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: a Prepend normalizer without Replace \" \" -> "
                    "\"\xe2\x96\x81\" is not supported");
    if (prepend && meta_prefix)
        return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: both a Prepend normalizer and Metaspace prepend");
    v->add_space_prefix = prepend || meta_prefix;
    v->prefix_unless_space = meta_prefix; /* Metaspace prepends only when the text lacks its U+2581 */
    v->prefix_mode = prepend ? TOK_PREFIX_RUN : mode;

    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    n = 0;
    if (dec && !cJSON_IsNull(dec)) {
        const char *t = jstr(dec, "type");
        if (t && !strcmp(t, "Sequence")) {
            const cJSON *arr = cJSON_GetObjectItemCaseSensitive(dec, "decoders"), *it;
            if (!cJSON_IsArray(arr)) return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: decoder.decoders is not an array");
            cJSON_ArrayForEach(it, arr) {
                if (n == 8) return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: decoder: too many steps");
                steps[n++] = it;
            }
        } else {
            steps[n++] = dec;
        }
    }
    for (int k = 0; k < n; k++) {
        const char *t = jstr(steps[k], "type");
        if (!t || (strcmp(t, "Replace") && strcmp(t, "ByteFallback") && strcmp(t, "Fuse") && strcmp(t, "Strip") &&
                   strcmp(t, "Metaspace")))
            return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: decoder '%.40s' not supported for "
                        "SentencePiece-style BPE, model.byte_fallback (Replace, ByteFallback, Fuse, Strip, Metaspace)", t ? t : "?");
    }
    return 0;
}

/* tokenizer.json + tokenizer_config.json into v; n_min pads the vocabulary. */
static int build(const cJSON *root, const cJSON *cfg, int32_t n_min, tok_vocab *v, char *err, size_t err_len) {
    int rc;
    if (!cJSON_IsObject(root)) return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: not a JSON object");
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model)) return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: model missing");
    const char *mtype = jstr(model, "type");
    if (!mtype || strcmp(mtype, "BPE"))
        return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: model.type '%.40s' not supported (BPE)",
                    mtype ? mtype : "(none)");
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (dropout && !cJSON_IsNull(dropout))
        return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: model.dropout not supported");
    static const char *const empty_keys[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int k = 0; k < 2; k++) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(model, empty_keys[k]);
        if (j && !cJSON_IsNull(j) && !(cJSON_IsString(j) && !j->valuestring[0]))
            return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: model.%s not supported", empty_keys[k]);
    }
    bool byte_fallback = false, ignore_merges = false, fuse_unk = false;
    if (jbool(model, "byte_fallback", &byte_fallback) || jbool(model, "ignore_merges", &ignore_merges) ||
        jbool(model, "fuse_unk", &fuse_unk))
        return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: model.byte_fallback/ignore_merges/fuse_unk not booleans");

    if (byte_fallback) { /* SentencePiece-style: an SPM vocabulary merged by rank */
        if (ignore_merges)
            return fail(err, err_len, TOK_EUNSUPPORTED, "tok: tokenizer.json: byte_fallback BPE with ignore_merges not supported");
        if ((rc = check_spm_pipeline(root, v, err, err_len)) || (rc = read_vocab(root, model, n_min, true, v, err, err_len)) ||
            (rc = read_merges(model, v, err, err_len)))
            return rc;
        v->type = TOK_TYPE_SPM;
        v->spm_ranks = true;
        v->spm_fuse_unk = fuse_unk;
        v->bos = v->eos = v->unk = v->pad = -1;
        const char *unk = jstr(model, "unk_token");
        if (unk) v->unk = tok_vocab_find(v, unk, strlen(unk));
        if ((rc = check_post_processor(cJSON_GetObjectItemCaseSensitive(root, "post_processor"), v, err, err_len))) return rc;
        v->clean_spaces = false;
        if ((rc = read_config(cfg, v, err, err_len))) return rc;
        return 0;
    }

    const pre_def *pre;
    bool nfc;
    if ((rc = check_pre_tokenizer(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), &pre, err, err_len))) return rc;
    if ((rc = check_normalizer(cJSON_GetObjectItemCaseSensitive(root, "normalizer"), &nfc, err, err_len))) return rc;
    if ((rc = check_decoder(cJSON_GetObjectItemCaseSensitive(root, "decoder"), err, err_len))) return rc;
    if ((rc = read_vocab(root, model, n_min, false, v, err, err_len))) return rc;

    v->type = TOK_TYPE_BPE;
    v->ignore_merges = ignore_merges;
    v->nfc = nfc;
    snprintf(v->pre_name, sizeof v->pre_name, "%s", pre->names[0]);
    if ((rc = check_post_processor(cJSON_GetObjectItemCaseSensitive(root, "post_processor"), v, err, err_len))) return rc;
    const char *unk = jstr(model, "unk_token");
    if (unk) v->unk = tok_vocab_find(v, unk, strlen(unk));
    if ((rc = read_merges(model, v, err, err_len))) return rc;
    if ((rc = tok_pre_init(v, pre, err, err_len))) return rc;
    v->clean_spaces = false;
    return read_config(cfg, v, err, err_len);
}

/* Parse and build; then the end-of-generation ids and the shared finish. */
static int load(const char *json, size_t len, const char *config, size_t config_len, int32_t n_min, const int32_t *eog,
                size_t n_eog, const char *model_name, size_t model_name_len, tok_vocab **out, char *err,
                size_t err_len) {
    if (err && err_len) err[0] = 0;
    if (!out) return fail(err, err_len, TOK_EINVAL, "tok: out is NULL");
    *out = NULL;
    if (!json) return fail(err, err_len, TOK_EINVAL, "tok: tokenizer.json text is NULL");
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= json && at <= json + len ? (size_t)(at - json) : 0;
        return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.json: JSON syntax error at byte %zu", off);
    }
    cJSON *cfg = NULL;
    if (config) {
        cfg = cJSON_ParseWithLength(config, config_len);
        if (!cJSON_IsObject(cfg)) {
            cJSON_Delete(root);
            cJSON_Delete(cfg);
            return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer_config.json: not a JSON object");
        }
    }
    tok_vocab *v = calloc(1, sizeof *v);
    int rc = v ? build(root, cfg, n_min, v, err, err_len) : fail(err, err_len, TOK_ENOMEM, "tok: out of memory");
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    if (!rc && v->eos < 0 && n_eog && eog[0] < v->n_vocab) v->eos = eog[0];
    if (!rc) rc = tok_vocab_finish(v, model_name, model_name_len, err, err_len);
    if (!rc && v->type == TOK_TYPE_BPE) tok_bpe_finish(v);
    for (size_t i = 0; !rc && i < n_eog; i++)
        if (eog[i] >= 0 && eog[i] < v->n_vocab) v->attr[eog[i]] |= TOK_ATTR_EOG_;
    if (rc) {
        tok_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

int tok_load_hf_json_mem(const char *json, size_t len, const char *config, size_t config_len, tok_vocab **out,
                         char *err, size_t err_len) {
    return load(json, len, config, config_len, 0, NULL, 0, NULL, 0, out, err, err_len);
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
            if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
                free(buf);
                buf = NULL;
            } else {
                buf[n] = 0;
                *len = (size_t)n;
            }
        }
    }
    fclose(f);
    return buf;
}

int tok_load_hf_json(const char *path, tok_vocab **out, char *err, size_t err_len) {
    if (out) *out = NULL;
    if (!path) return fail(err, err_len, TOK_EINVAL, "tok: path is NULL");
    size_t len = 0, clen = 0;
    char *json = slurp(path, &len);
    if (!json) return fail(err, err_len, TOK_EFORMAT, "tok: cannot read %s", path);
    /* tokenizer_config.json in the same directory, when there is one */
    size_t pl = strlen(path);
    char *cpath = malloc(pl + 32);
    char *config = NULL;
    if (cpath) {
        const char *slash = strrchr(path, '/');
        size_t dl = slash ? (size_t)(slash - path) + 1 : 0;
        memcpy(cpath, path, dl);
        strcpy(cpath + dl, "tokenizer_config.json");
        config = slurp(cpath, &clen);
        free(cpath);
    }
    int rc = tok_load_hf_json_mem(json, len, config, clen, out, err, err_len);
    free(json);
    free(config);
    return rc;
}

int tok_load_hf_gguf(const gguf_file *g, tok_vocab **out, char *err, size_t err_len) {
    if (out) *out = NULL;
    gguf_str json = {0}, config = {0}, arch = {0}, name = {0};
    if (gguf_get_str(g, "tokenizer.huggingface.json", &json, err, err_len))
        return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.huggingface.json is not a string");
    bool has_cfg = gguf_get(g, "tokenizer.huggingface.config") != NULL;
    if (has_cfg && gguf_get_str(g, "tokenizer.huggingface.config", &config, err, err_len))
        return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.huggingface.config is not a string");
    /* padded to the model's vocab_size: the output layer has that many rows */
    uint32_t n_min = 0;
    if (!gguf_get_str(g, "general.architecture", &arch, NULL, 0) && arch.len < 64) {
        char key[96];
        snprintf(key, sizeof key, "%.*s.vocab_size", (int)arch.len, arch.ptr);
        if (gguf_get(g, key) && (gguf_get_u32(g, key, &n_min, NULL, 0) || n_min > INT32_MAX / 4))
            return fail(err, err_len, TOK_EFORMAT, "tok: %s is not a token count", key);
    }
    int32_t eog[64];
    size_t n_eog = 0;
    const gguf_value *ids = gguf_get(g, "tokenizer.huggingface.eos_token_ids");
    if (ids) {
        if (ids->type != GGUF_VT_ARRAY || ids->v.arr.type != GGUF_VT_INT32)
            return fail(err, err_len, TOK_EFORMAT, "tok: tokenizer.huggingface.eos_token_ids is not an i32 array");
        for (uint64_t i = 0; i < ids->v.arr.n && n_eog < 64; i++) {
            int32_t x;
            memcpy(&x, (const char *)ids->v.arr.data + 4 * i, 4);
            eog[n_eog++] = x;
        }
    }
    bool has_name = !gguf_get_str(g, "general.name", &name, NULL, 0);
    return load(json.ptr, (size_t)json.len, has_cfg ? config.ptr : NULL, (size_t)config.len, (int32_t)n_min, eog, n_eog,
                has_name ? name.ptr : NULL, has_name ? (size_t)name.len : 0, out, err, err_len);
}
