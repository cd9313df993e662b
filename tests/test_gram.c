/*
 * test_gram.c — the grammar module: canonical JSON, number and regex
 * automata, schema compilation (keywords, errors with locations), the
 * matcher, token masks against a brute-force check on real vocabularies,
 * forced tokens, and schema-check's exit codes.
 */
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_mask.h"
#include "test.h"

#define STORIES "models/stories260K/stories260K.gguf"
#define QWEN3 "models/chat/qwen3-chat.gguf"

static gram_grammar *compile(const char *schema) {
    gram_grammar *g = NULL;
    char err[2048];
    int rc = gram_compile(schema, strlen(schema), NULL, &g, err, sizeof err);
    if (rc) test_fail(__FILE__, __LINE__, "schema %s: %s", schema, err);
    return g;
}

/* 1 accepted, 0 rejected, -1 not JSON */
static int check(const gram_grammar *g, const char *json) {
    char *c;
    size_t cl;
    char err[512];
    if (gram_canon(json, strlen(json), &c, &cl, err, sizeof err)) return -1;
    int r = gram_check(g, c, cl, err, sizeof err);
    free(c);
    return r;
}

#define ACCEPT(g, j) EXPECT_MSG(check(g, j) == 1, "expected %s to be accepted", j)
#define REJECT(g, j) EXPECT_MSG(check(g, j) == 0, "expected %s to be rejected", j)

TEST(gram, canon) {
    static const struct {
        const char *in, *out;
    } cases[] = {
        {" { \"a\" : [ 1 , 2.50 , -0 , 1e3, 1.5E-2, -0.0e5 ] } ", "{\"a\":[1,2.5,0,1000,0.015,0]}"},
        {"\"\\u00e9\\/\\u0041\\ud83d\\ude00\\u001f\\u0008\"", "\"é/A😀\\u001f\\b\""},
        {"[true,false,null]", "[true,false,null]"},
        {"123456789012345678901234567890", "123456789012345678901234567890"},
        {"0.000", "0"},
        {"-12.3400e-1", "-1.234"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *o;
        size_t ol;
        char err[256];
        EXPECT(gram_canon(cases[i].in, strlen(cases[i].in), &o, &ol, err, sizeof err) == 0);
        if (!test_failed()) EXPECT_STR_EQ(o, cases[i].out);
        free(o);
    }
    static const char *bad[] = {"[1,]", "{\"a\" 1}", "\"\\ud800\"", "01", "1.", "\"\x01\"", "\"\xc3\x28\"", "[1] x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *o = NULL;
        size_t ol;
        char err[256];
        EXPECT_MSG(gram_canon(bad[i], strlen(bad[i]), &o, &ol, err, sizeof err) == -1, "accepted %s", bad[i]);
        free(o);
    }
}

/* number ranges: exhaustive over a grid of canonical decimals */
TEST(gram, number_ranges) {
    static const char *vals[] = {"-1000", "-100.5", "-10", "-2", "-1.5", "-1", "-0.5", "-0.05", "0", "0.05", "0.1",
                                 "0.5", "1", "1.25", "2", "9", "10", "10.5", "99", "100", "100.01", "1000", "12345"};
    static const struct {
        const char *lo, *hi;
        int lo_excl, hi_excl, integer;
        const char *mult;
    } specs[] = {
        {"0", "100", 0, 0, 1, NULL},   {"-1.5", "10.5", 1, 0, 0, NULL}, {"0.1", NULL, 0, 0, 0, NULL},
        {NULL, "-1", 0, 1, 0, NULL},   {"-10", "99", 0, 1, 1, NULL},    {"-100.5", "0.05", 1, 1, 0, NULL},
        {NULL, NULL, 0, 0, 0, "0.05"}, {"0", "1000", 0, 0, 1, "10"},    {"-2", "2", 0, 0, 0, "0.25"},
        {"0.5", "0.5", 0, 0, 0, NULL},
    };
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        gram_num_spec sp = {specs[s].lo, specs[s].hi, specs[s].lo_excl, specs[s].hi_excl, specs[s].integer, 0, specs[s].mult, 0, NULL};
        gram_dfa d;
        char err[128];
        if (gram_number_dfa(&sp, &d, err, sizeof err)) {
            test_fail(__FILE__, __LINE__, "spec %zu: %s", s, err);
            continue;
        }
        for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
            const char *v = vals[i];
            int want = 1;
            if (sp.lo) {
                int c = gram_dec_cmp(v, sp.lo);
                want &= sp.lo_excl ? c > 0 : c >= 0;
            }
            if (sp.hi) {
                int c = gram_dec_cmp(v, sp.hi);
                want &= sp.hi_excl ? c < 0 : c <= 0;
            }
            if (sp.integer && strchr(v, '.')) want = 0;
            if (sp.multiple_of) {
                double q = strtod(v, NULL) / strtod(sp.multiple_of, NULL);
                want &= q == (double)(long long)q;
            }
            EXPECT_MSG(gram_dfa_match(&d, v, strlen(v)) == want, "spec %zu value %s: got %d", s, v, !want);
        }
        /* never a non-canonical spelling */
        EXPECT(!gram_dfa_match(&d, "1.0", 3) && !gram_dfa_match(&d, "-0", 2) && !gram_dfa_match(&d, "01", 2));
        gram_dfa_free(&d);
    }
}

TEST(gram, regex) {
    static const struct {
        const char *re, *yes[4], *no[4];
    } cases[] = {
        {"^[a-z]+$", {"abc", "z"}, {"", "aB", "a1"}},
        {"ab", {"ab", "xaby", "abab"}, {"a", "ba"}},
        {"^\\d{3}-\\d{4}$", {"555-1234"}, {"5551234", "555-12345"}},
        {"^(foo|bar)?baz$", {"baz", "foobaz", "barbaz"}, {"fbaz", "foobarbaz"}},
        {"^[^\\s@]+@[^\\s@]+\\.[a-z]{2,}$", {"a@b.co"}, {"a b@c.de", "a@b.c"}},
        {"^\\p{L}", {NULL}, {NULL}},
        {"(^a$)|^b", {"a", "bc"}, {"ab", "cb"}},
        {"^.$", {"é", "😀"}, {"\\n", "ab"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char schema[256];
        cJSON *p = cJSON_CreateString(cases[i].re);
        char *pj = cJSON_PrintUnformatted(p);
        snprintf(schema, sizeof schema, "{\"type\":\"string\",\"pattern\":%s}", pj);
        free(pj);
        cJSON_Delete(p);
        gram_grammar *g = NULL;
        char err[1024];
        int rc = gram_compile(schema, strlen(schema), NULL, &g, err, sizeof err);
        if (!cases[i].yes[0]) {
            EXPECT_EQ_I(rc, CINFER_EUNSUPPORTED);
            EXPECT_MSG(strstr(err, "pattern") && strstr(err, "at #"), "%s", err);
            continue;
        }
        EXPECT_EQ_I(rc, 0);
        for (int k = 0; k < 4 && g; k++) {
            char j[64];
            if (cases[i].yes[k]) {
                snprintf(j, sizeof j, "\"%s\"", cases[i].yes[k]);
                ACCEPT(g, j);
            }
            if (cases[i].no[k]) {
                snprintf(j, sizeof j, "\"%s\"", cases[i].no[k]);
                REJECT(g, j);
            }
        }
        gram_free(g);
    }
}

TEST(gram, objects_any_order_and_required) {
    gram_grammar *g = compile("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},"
                              "\"required\":[\"a\"],\"additionalProperties\":false}");
    if (!g) return;
    ACCEPT(g, "{\"a\":1}");
    ACCEPT(g, "{\"b\":\"x\",\"a\":1}");
    REJECT(g, "{\"b\":\"x\"}");
    REJECT(g, "{\"a\":1,\"a\":2}");
    REJECT(g, "{\"a\":1,\"c\":2}");
    REJECT(g, "{\"a\":1.5}");
    REJECT(g, "[]");
    gram_free(g);
    /* patternProperties, additionalProperties schema, min/maxProperties, dependentRequired */
    g = compile("{\"type\":\"object\",\"patternProperties\":{\"^x-\":{\"type\":\"integer\"}},"
                "\"additionalProperties\":{\"type\":\"boolean\"},\"minProperties\":1,\"maxProperties\":2,"
                "\"properties\":{\"p\":{}},\"dependentRequired\":{\"p\":[\"q\"]}}");
    if (!g) return;
    ACCEPT(g, "{\"x-a\":1}");
    ACCEPT(g, "{\"y\":true,\"x-b\":2}");
    ACCEPT(g, "{\"q\":true,\"p\":\"anything\"}");
    REJECT(g, "{}");
    REJECT(g, "{\"x-a\":true}");
    REJECT(g, "{\"y\":1}");
    REJECT(g, "{\"a\":true,\"b\":true,\"c\":true}");
    REJECT(g, "{\"p\":1}");
    gram_free(g);
}

TEST(gram, refs_recursion_oneof_enum) {
    gram_grammar *g = compile("{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
                              "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\"],"
                              "\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\"}");
    if (!g) return;
    ACCEPT(g, "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[{\"v\":4}]}]}");
    REJECT(g, "{\"v\":1,\"kids\":[{\"v\":2},{\"kids\":[]}]}");
    gram_free(g);
    /* oneOf with a discriminator compiles; overlapping branches do not */
    g = compile("{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"a\"},\"x\":{\"type\":\"integer\"}},"
                "\"required\":[\"kind\"]},{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"b\"}},\"required\":[\"kind\"]},"
                "{\"type\":[\"string\",\"null\"]}]}");
    if (!g) return;
    ACCEPT(g, "{\"kind\":\"a\",\"x\":3}");
    ACCEPT(g, "{\"kind\":\"b\",\"x\":\"q\"}");
    ACCEPT(g, "null");
    REJECT(g, "{\"kind\":\"c\"}");
    gram_free(g);
    gram_grammar *bad = NULL;
    char err[1024];
    const char *ov = "{\"properties\":{\"n\":{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":2}]}}}";
    EXPECT_EQ_I(gram_compile(ov, strlen(ov), NULL, &bad, err, sizeof err), CINFER_EUNSUPPORTED);
    EXPECT_MSG(strstr(err, "oneOf") && strstr(err, "#/properties/n"), "%s", err);
    /* enum of mixed values, const object (key order free) */
    g = compile("{\"enum\":[1,\"two\",{\"a\":[1,2]},null]}");
    if (!g) return;
    ACCEPT(g, "1.0");
    ACCEPT(g, "\"two\"");
    ACCEPT(g, "{ \"a\" : [1, 2] }");
    ACCEPT(g, "null");
    REJECT(g, "{\"a\":[2,1]}");
    REJECT(g, "2");
    gram_free(g);
}

TEST(gram, strings_formats_lengths) {
    gram_grammar *g = compile("{\"type\":\"object\",\"properties\":{\"d\":{\"format\":\"date\"},\"t\":{\"type\":\"string\","
                              "\"minLength\":2,\"maxLength\":3},\"u\":{\"format\":\"uuid\"},\"e\":{\"format\":\"email\"},"
                              "\"w\":{\"format\":\"date-time\"}}}");
    if (!g) return;
    ACCEPT(g, "{\"d\":\"2024-02-29\",\"t\":\"é😀\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\"}");
    ACCEPT(g, "{\"w\":\"2024-01-31T23:59:59.5+01:00\",\"e\":\"a.b@example.org\"}");
    REJECT(g, "{\"d\":\"2023-02-29\"}");
    REJECT(g, "{\"t\":\"a\"}");
    REJECT(g, "{\"t\":\"abcd\"}");
    REJECT(g, "{\"u\":\"123\"}");
    REJECT(g, "{\"w\":\"2024-01-31 23:59:59Z\"}");
    ACCEPT(g, "{\"t\":\"\\n\\t\"}");
    gram_free(g);
}

TEST(gram, not_forms) {
    gram_grammar *g = compile("{\"properties\":{\"a\":{\"not\":{\"required\":[\"x\"]}},\"b\":{\"not\":{\"pattern\":\"^z\"}},"
                              "\"c\":{\"not\":{\"multipleOf\":3}},\"d\":{\"type\":\"string\",\"not\":{\"enum\":[\"no\",\"nope\"]}},"
                              "\"e\":{\"not\":{\"type\":\"integer\"}}}}");
    if (!g) return;
    ACCEPT(g, "{\"a\":{\"y\":1},\"b\":\"az\",\"c\":4,\"d\":\"yes\",\"e\":1.5}");
    REJECT(g, "{\"a\":{\"x\":1}}");
    REJECT(g, "{\"a\":1}"); /* not {required}: non-objects satisfy required, so they fail the not */
    REJECT(g, "{\"b\":\"zed\"}");
    REJECT(g, "{\"b\":1}");
    REJECT(g, "{\"c\":9}");
    ACCEPT(g, "{\"c\":1.5}");
    REJECT(g, "{\"d\":\"nope\"}");
    ACCEPT(g, "{\"d\":\"nop\"}");
    REJECT(g, "{\"e\":2}");
    ACCEPT(g, "{\"e\":\"2\"}");
    gram_free(g);
}

TEST(gram, unsupported_keywords_listed) {
    const char *s = "{\"properties\":{\"tags\":{\"type\":\"array\",\"uniqueItems\":true},\"x\":{\"if\":{\"type\":\"string\"},"
                    "\"then\":{\"minLength\":1}}},\"not\":{\"required\":[\"a\",\"b\"]}}";
    gram_grammar *g = NULL;
    char err[1024];
    EXPECT_EQ_I(gram_compile(s, strlen(s), NULL, &g, err, sizeof err), CINFER_EUNSUPPORTED);
    EXPECT_MSG(strstr(err, "uniqueItems at #/properties/tags"), "%s", err);
    EXPECT_MSG(strstr(err, "if/then/else at #/properties/x"), "%s", err);
    EXPECT_MSG(strstr(err, "not at #"), "%s", err);
    /* permissive: a superset grammar */
    gram_options po = {.permissive = 1};
    EXPECT_EQ_I(gram_compile(s, strlen(s), &po, &g, err, sizeof err), 0);
    if (g) ACCEPT(g, "{\"tags\":[1,1]}");
    gram_free(g);
    EXPECT_EQ_I(gram_compile("{\"type\":", 9, NULL, &g, err, sizeof err), CINFER_EFORMAT);
}

/* ---- issue 15: what the grammar must never accept, and what it must refuse ------------------------------- */

/* raw bytes, no canonicalising: 1 accepted, 0 rejected */
static int check_bytes(const gram_grammar *g, const char *text) {
    char err[512];
    return gram_check(g, text, strlen(text), err, sizeof err);
}

#define ACCEPT_B(g, t) EXPECT_MSG(check_bytes(g, t) == 1, "expected bytes %s to be accepted", t)
#define REJECT_B(g, t) EXPECT_MSG(check_bytes(g, t) == 0, "expected bytes %s to be rejected", t)

static gram_grammar *compile_ws(const char *schema, int flexible) {
    gram_options o = {.ws_flexible = flexible};
    gram_grammar *g = NULL;
    char err[2048];
    if (gram_compile(schema, strlen(schema), &o, &g, err, sizeof err)) test_fail(__FILE__, __LINE__, "%s: %s", schema, err);
    return g;
}

/* expect gram_compile to fail with rc and a message containing what */
static void refused(const char *schema, int rc, const char *what) {
    gram_grammar *g = NULL;
    char err[2048] = "";
    int got = gram_compile(schema, strlen(schema), NULL, &g, err, sizeof err);
    EXPECT_MSG(got == rc && strstr(err, what), "%s: rc %d (expected %d), \"%s\" (expected \"%s\")", schema, got, rc, err, what);
    gram_free(g);
}

TEST(gram, no_trailing_comma) {
    static const char *const schemas[] = {"{\"type\":\"array\"}", "{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}",
                                          "{\"type\":\"object\"}", "{\"type\":\"array\",\"minItems\":1}",
                                          "{\"type\":\"array\",\"prefixItems\":[{}],\"items\":{\"type\":\"string\"}}"};
    for (size_t i = 0; i < sizeof schemas / sizeof schemas[0]; i++)
        for (int flex = 0; flex < 2; flex++) {
            gram_grammar *g = compile_ws(schemas[i], flex);
            if (!g) continue;
            REJECT_B(g, "[1,]");
            REJECT_B(g, "[1,2,]");
            REJECT_B(g, "[\"a\",]");
            REJECT_B(g, "{\"a\":[1,]}");
            REJECT_B(g, "{\"a\":1,}");
            if (flex) {
                REJECT_B(g, "[1, ]");
                REJECT_B(g, "[1 ,\n]");
            }
            gram_free(g);
        }
    gram_grammar *g = compile_ws("{\"type\":\"array\"}", 0);
    if (g) {
        ACCEPT_B(g, "[]");
        ACCEPT_B(g, "[1,[2,{}]]");
    }
    gram_free(g);
}

TEST(gram, no_duplicate_keys) {
    static const char *const schemas[] = {
        "{\"type\":\"object\"}",
        "{\"additionalProperties\":{\"type\":\"integer\"},\"minProperties\":2}",
        "{\"patternProperties\":{\"^b\":{}},\"additionalProperties\":false}",
        "{\"properties\":{\"a\":{}},\"patternProperties\":{\"^(b|c)$\":{}},\"additionalProperties\":false}",
        "{\"propertyNames\":{\"pattern\":\"^[a-z]$\"}}",
    };
    for (size_t i = 0; i < sizeof schemas / sizeof schemas[0]; i++)
        for (int flex = 0; flex < 2; flex++) {
            gram_grammar *g = compile_ws(schemas[i], flex);
            if (!g) continue;
            REJECT_B(g, "{\"b\":3,\"b\":5}");
            REJECT_B(g, "{\"b\":3,\"c\":4,\"b\":5}");
            REJECT(g, "{\"b\":3,\"b\":5}");
            if (i != 1) ACCEPT_B(g, "{\"b\":3}");
            if (i != 2) ACCEPT_B(g, "{\"b\":3,\"c\":5}");
            else ACCEPT_B(g, "{\"b\":3,\"bc\":5}");
            if (flex) REJECT_B(g, "{\"b\" : 3 , \"b\" : 5}");
            gram_free(g);
        }
    /* repeats do not count toward minProperties, and the count stays exact */
    gram_grammar *g = compile_ws("{\"minProperties\":2,\"maxProperties\":2}", 0);
    if (g) {
        REJECT_B(g, "{\"x\":1,\"x\":1}");
        ACCEPT_B(g, "{\"x\":1,\"y\":1}");
        REJECT_B(g, "{\"x\":1,\"y\":1,\"z\":1}");
        gram_free(g);
    }
    /* a key whose completions are all taken is a dead end the matcher never enters */
    g = compile_ws("{\"patternProperties\":{\"^a(b|c+)$\":{}},\"additionalProperties\":false}", 0);
    if (g) {
        ACCEPT_B(g, "{\"ab\":1,\"ac\":2,\"acc\":3}");
        REJECT_B(g, "{\"ab\":1,\"ab\":2}");
        gram_matcher *m;
        EXPECT(gram_matcher_new(g, &m) == 0);
        /* after "ab" is taken, '"a' may still become "ac...", but '"ab' could only be "ab" again */
        EXPECT(m && gram_matcher_feed(m, "{\"ab\":1,\"a", 10) == 0);
        EXPECT(m && gram_matcher_feed(m, "b", 1) == -1);
        EXPECT(m && gram_matcher_feed(m, "c", 1) == 0);
        gram_matcher_free(m);
        gram_free(g);
    }
}

TEST(gram, cycles_without_input_refused) {
    static const char *const cyc[] = {
        "{\"$ref\":\"#\"}",
        "{\"anyOf\":[{\"$ref\":\"#\"},{\"type\":\"string\"}]}",
        "{\"allOf\":[{\"$ref\":\"#/$defs/a\"}],\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"allOf\":[{\"$ref\":\"#/$defs/a\"}]}}}",
        "{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"definitions\":{\"a\":{\"$ref\":\"#/definitions/a\"}},"
        "\"properties\":{\"x\":{\"$ref\":\"#/definitions/a\"}}}",
        "{\"oneOf\":[{\"$ref\":\"#\"},{\"type\":\"null\"}]}",
        "{\"not\":{\"$ref\":\"#\"}}",
    };
    for (size_t i = 0; i < sizeof cyc / sizeof cyc[0]; i++) refused(cyc[i], CINFER_EFORMAT, "cycle of $ref/allOf/anyOf/oneOf/not that consumes no input");
    /* recursion through a property or an item consumes input: fine */
    gram_grammar *g = compile("{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}}");
    if (g) ACCEPT(g, "[[],[[]]]");
    gram_free(g);
    /* a diamond (the same schema twice) is no cycle */
    g = compile("{\"allOf\":[{\"$ref\":\"#/$defs/x\"},{\"anyOf\":[{\"$ref\":\"#/$defs/x\"}]}],\"$defs\":{\"x\":{\"type\":\"integer\"}}}");
    if (g) ACCEPT(g, "3");
    gram_free(g);
}

/* A misspelt type name or a multipleOf <= 0 is a broken schema (named, CINFER_EFORMAT), not a
 * schema that silently allows nothing where it stands. */
TEST(gram, broken_type_and_multipleof_refused) {
    static const char *const bad[] = {
        "{\"type\":\"objekt\"}",
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"strin\"}}}",
        "{\"type\":[\"string\",\"nul\"]}",
        "{\"type\":[]}",
        "{\"type\":3}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) refused(bad[i], CINFER_EFORMAT, "'type' at #");
    /* multipleOf must be > 0 (it was ignored when zero or negative) */
    refused("{\"type\":\"integer\",\"multipleOf\":-3}", CINFER_EFORMAT, "'multipleOf' at # is -3: it must be greater than 0");
    refused("{\"multipleOf\":0.0e5}", CINFER_EFORMAT, "must be greater than 0");
    refused("{\"properties\":{\"a\":{\"multipleOf\":0}}}", CINFER_EFORMAT, "'multipleOf' at #/properties/a");
    /* a pattern that spends the work budget is "too large" (a 400 in the server), not "out of memory" (a 500) */
    refused("{\"type\":\"string\",\"pattern\":\"[^a]{1,1000}\"}", CINFER_EUNSUPPORTED, "schema too large");
    gram_grammar *g = compile("{\"type\":[\"string\",\"null\"]}");
    if (g) {
        ACCEPT(g, "null");
        ACCEPT(g, "\"x\"");
    }
    gram_free(g);
}

TEST(gram, dependencies_every_draft) {
    /* no $schema: 2020-12 rules, yet "dependencies" is enforced, never dropped */
    static const char *const s[] = {
        "{\"dependencies\":{\"a\":[\"b\"]}}",
        "{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"dependencies\":{\"a\":[\"b\"]}}",
        "{\"dependentRequired\":{\"a\":[\"b\"]}}",
    };
    for (size_t i = 0; i < 3; i++) {
        gram_grammar *g = compile(s[i]);
        if (!g) continue;
        REJECT(g, "{\"a\":1}");
        ACCEPT(g, "{\"a\":1,\"b\":2}");
        ACCEPT(g, "{\"b\":2}");
        gram_free(g);
    }
    /* schema form: "if a is present the object also satisfies S" */
    static const char *const f[] = {"{\"dependencies\":{\"a\":{\"required\":[\"b\"],\"properties\":{\"b\":{\"type\":\"integer\"}}}}}",
                                    "{\"dependentSchemas\":{\"a\":{\"required\":[\"b\"],\"properties\":{\"b\":{\"type\":\"integer\"}}}}}"};
    for (size_t i = 0; i < 2; i++) {
        gram_grammar *g = compile(f[i]);
        if (!g) continue;
        REJECT(g, "{\"a\":1}");
        REJECT(g, "{\"a\":1,\"b\":\"x\"}");
        ACCEPT(g, "{\"a\":1,\"b\":2}");
        ACCEPT(g, "{\"b\":\"x\"}");
        ACCEPT(g, "\"not an object\"");
        gram_free(g);
    }
}

TEST(gram, huge_bounds) {
    /* counted strings: compile cost does not grow with the bound, and values stay accepted */
    gram_grammar *g = compile("{\"type\":\"string\",\"minLength\":9400000}");
    if (g) {
        REJECT(g, "\"short\"");
        gram_matcher *m;
        EXPECT(gram_matcher_new(g, &m) == 0);
        EXPECT(gram_matcher_feed(m, "\"aaaa", 5) == 0 && gram_matcher_can_continue(m) && !gram_matcher_accepting(m));
        gram_matcher_free(m);
        gram_free(g);
    }
    g = compile("{\"type\":\"string\",\"minLength\":3,\"maxLength\":2147483}");
    if (g) {
        ACCEPT(g, "\"abc\"");
        REJECT(g, "\"ab\"");
        gram_free(g);
    }
    refused("{\"type\":\"string\",\"maxLength\":2147483647}", CINFER_EUNSUPPORTED, "maxLength above 67108863");
    refused("{\"type\":\"array\",\"minItems\":9400000}", CINFER_EUNSUPPORTED, "minItems/prefixItems above 4096");
    refused("{\"type\":\"string\",\"pattern\":\"^(a{1000}){1000}$\"}", CINFER_EUNSUPPORTED, "expands to more than");
    /* a count of any length is a count (7+ digits were read as literal text) */
    refused("{\"type\":\"string\",\"pattern\":\"^a{1000000}$\"}", CINFER_EUNSUPPORTED, "repetition count above 1000");
    refused("{\"type\":\"string\",\"pattern\":\"^a{2,99999999999}$\"}", CINFER_EUNSUPPORTED, "repetition count above 1000");
    refused("{\"type\":\"string\",\"pattern\":\"^a{1000001,}$\"}", CINFER_EUNSUPPORTED, "repetition count above 1000");
    refused("{\"minProperties\":1e300}", CINFER_EUNSUPPORTED, "minProperties above 67108863");
}

/* fuzz-schema finding (2026-12-02): allOf of anyOfs of multipleOf distributes
 * into 80 branches, each building remainder automata of up to 100,000 states
 * that the range then cuts small; the budget counted only the small results
 * (5,879 units) and the compile took 8 s.  The budget now counts the
 * subset constructions and NFAs too, so a small budget refuses it. */
TEST(gram, work_budget_counts_number_automata) {
    static const char s[] =
        "{\"type\":\"number\",\"allOf\":[{\"$ref\":\"#/definitions/a\"},{\"$ref\":\"#/definitions/b\"},"
        "{\"$ref\":\"#/definitions/c\"},{\"exclusiveMinimum\":-300},{\"exclusiveMaximum\":0}],\"definitions\":{"
        "\"a\":{\"anyOf\":[{\"multipleOf\":33},{\"multipleOf\":12},{\"multipleOf\":16},{\"multipleOf\":77}]},"
        "\"b\":{\"anyOf\":[{\"allOf\":[{\"not\":{\"multipleOf\":6}},{\"not\":{\"multipleOf\":7}}]},{\"multipleOf\":25},"
        "{\"multipleOf\":42},{\"multipleOf\":51}]},\"c\":{\"anyOf\":[{\"allOf\":[{\"not\":{\"multipleOf\":3}},"
        "{\"not\":{\"multipleOf\":2}}]},{\"multipleOf\":101},{\"multipleOf\":102},{\"multipleOf\":103}]}}}";
    gram_options o = {.max_work = 500000};
    gram_grammar *g = NULL;
    char err[2048];
    int rc = gram_compile(s, strlen(s), &o, &g, err, sizeof err);
    EXPECT_EQ_I(rc, CINFER_EUNSUPPORTED);
    EXPECT_MSG(!g && strstr(err, "more than 500000 work units"), "%s", err);
    gram_free(g);
    /* a small multipleOf schema stays far inside the same budget */
    static const char t[] = "{\"type\":\"integer\",\"anyOf\":[{\"multipleOf\":33},{\"multipleOf\":12}],\"minimum\":-300}";
    rc = gram_compile(t, strlen(t), &o, &g, err, sizeof err);
    EXPECT_MSG(rc == 0, "%s", err);
    if (g) {
        ACCEPT(g, "-264");
        ACCEPT(g, "24");
        REJECT(g, "-301");
        REJECT(g, "25");
        gram_free(g);
    }
}

TEST(gram, schema_text_strict) {
    refused("{\"type\":\"number\"}garbage", CINFER_EFORMAT, "bytes after the JSON value at byte 17");
    refused("{\"type\":\"number\"} {}", CINFER_EFORMAT, "bytes after the JSON value");
    refused("{\"type\":\"string\",\"type\":\"integer\"}", CINFER_EFORMAT, "duplicate key \"type\"");
    refused("{\"properties\":{\"a\":{\"minimum\":1,\"minimum\":2}}}", CINFER_EFORMAT, "at /properties/a");
    char deep[4000];
    int n = 0;
    for (int i = 0; i < 600; i++) n += snprintf(deep + n, sizeof deep - (size_t)n, "[");
    for (int i = 0; i < 600; i++) n += snprintf(deep + n, sizeof deep - (size_t)n, "]");
    refused(deep, CINFER_EFORMAT, "nested deeper than 512 levels");
    gram_grammar *g = compile("{\"type\":\"number\"}\n");
    gram_free(g);
}

/* Deep recursion costs heap and named limits, never the C stack: a $ref chain
 * of 10,000 definitions and values nested 3,000 deep. */
TEST(gram, no_stack_overflow) {
    size_t cap = 1 << 20;
    char *s = malloc(cap);
    if (!s) return;
    int n = snprintf(s, cap, "{\"$ref\":\"#/$defs/d0\",\"$defs\":{");
    for (int i = 0; i < 10000; i++)
        n += snprintf(s + n, cap - (size_t)n, "%s\"d%d\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/d%d\"}}", i ? "," : "", i,
                      i + 1 < 10000 ? i + 1 : 0);
    n += snprintf(s + n, cap - (size_t)n, "}}");
    gram_grammar *g = NULL;
    char err[1024];
    int rc = gram_compile(s, (size_t)n, NULL, &g, err, sizeof err);
    EXPECT_MSG(rc == 0 || strstr(err, "schema too large"), "rc %d: %s", rc, err);
    if (g) {
        /* nesting past the matcher's stack limit is refused by name */
        int d = 3000;
        char *v = malloc((size_t)2 * d + 1);
        for (int i = 0; i < d; i++) v[i] = '[', v[d + i] = ']';
        v[2 * d] = 0;
        char e2[256];
        EXPECT(gram_check(g, v, (size_t)2 * d, e2, sizeof e2) == 0);
        EXPECT_MSG(strstr(e2, "stack limit"), "%s", e2);
        EXPECT(gram_check(g, "[[[]]]", 6, e2, sizeof e2) == 1);
        free(v);
    }
    gram_free(g);
    /* a chain of 2,000 allOf-nested schemas is refused by name */
    n = 0;
    for (int i = 0; i < 2000; i++) n += snprintf(s + n, cap - (size_t)n, "{\"allOf\":[");
    n += snprintf(s + n, cap - (size_t)n, "{}");
    for (int i = 0; i < 2000; i++) n += snprintf(s + n, cap - (size_t)n, "]}");
    rc = gram_compile(s, (size_t)n, NULL, &g, err, sizeof err);
    EXPECT_MSG(rc != 0 && (strstr(err, "nested deeper") || strstr(err, "schema too large")), "rc %d: %s", rc, err);
    gram_free(g);
    free(s);
}

/* ---- masks on real vocabularies --------------------------------------------------------------- */

static gram_vocab *load_vocab(const char *rel, tok_vocab **tv_out) {
    const char *p = shared_path(rel);
    if (!p) return NULL;
    gguf_file *gf;
    char err[512];
    if (gguf_open(p, &gf, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return NULL;
    }
    tok_vocab *tv = NULL;
    gram_vocab *gv = NULL;
    if (tok_load_gguf(gf, &tv, err, sizeof err)) test_fail(__FILE__, __LINE__, "%s", err);
    else if (gram_vocab_new(tv, &gv)) test_fail(__FILE__, __LINE__, "gram_vocab_new failed");
    gguf_close(gf);
    *tv_out = tv;
    return gv;
}

/* Longest token that is a prefix of s (and allowed by bits). */
static int32_t greedy_token(const gram_vocab *gv, const uint32_t *bits, const char *s, size_t n, int *len) {
    int32_t best = -1;
    *len = 0;
    for (int32_t id = 0; id < gram_vocab_n_vocab(gv); id++) {
        int l;
        const char *b = gram_vocab_bytes(gv, id, &l);
        if (l > *len && (size_t)l <= n && !memcmp(b, s, (size_t)l) && (bits[id >> 5] >> (id & 31) & 1)) {
            best = id;
            *len = l;
        }
    }
    return best;
}

/* Walk text token by token; at every step (stride) compare the mask with a
 * brute-force check of every token.  Returns the number of steps. */
static int mask_walk(gram_grammar *g, gram_masker *mk, const gram_vocab *gv, const char *json, int stride, int brute) {
    char *text;
    size_t tl;
    char err[256];
    if (g->ws_flexible) { /* the text as it is, whitespace included */
        text = strdup(json);
        tl = strlen(json);
    } else if (gram_canon(json, strlen(json), &text, &tl, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return 0;
    }
    gram_matcher *m;
    EXPECT(gram_matcher_new(g, &m) == 0);
    int nv = gram_vocab_n_vocab(gv), nw = (nv + 31) / 32;
    uint32_t *bits = malloc((size_t)nw * 4), *scratch = malloc((size_t)nw * 4);
    size_t pos = 0;
    int steps = 0;
    while (!test_failed()) {
        int n = gram_mask(mk, m, bits, scratch);
        EXPECT(n > 0);
        if (brute && steps % stride == 0) {
            int32_t st = gram_matcher_state(m);
            int mism = 0;
            for (int32_t id = 0; id < nv; id++) {
                int ok = gram_accept_token(gv, m, id) == 0;
                gram_matcher_set_state(m, st);
                int in = bits[id >> 5] >> (id & 31) & 1;
                if (ok != in && mism++ < 5) {
                    int l;
                    const char *b = gram_vocab_bytes(gv, id, &l);
                    test_fail(__FILE__, __LINE__, "step %d at \"%.*s\": token %d \"%.*s\": mask %d, matcher %d", steps,
                              (int)pos, text, id, l, b, in, ok);
                }
            }
        }
        if (pos == tl) {
            EXPECT(gram_matcher_accepting(m));
            break;
        }
        int len;
        int32_t id = greedy_token(gv, bits, text + pos, tl - pos, &len);
        EXPECT_MSG(id >= 0, "no allowed token spells \"%.20s\"", text + pos);
        if (id < 0) break;
        EXPECT(gram_accept_token(gv, m, id) == 0);
        pos += (size_t)len;
        steps++;
    }
    free(bits);
    free(scratch);
    gram_matcher_free(m);
    free(text);
    return steps;
}

static const struct {
    const char *schema, *instances[3];
} mask_cases[] = {
    {"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},\"age\":{\"type\":\"integer\","
     "\"minimum\":0,\"maximum\":130},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"green\",\"blue\"]},"
     "\"maxItems\":3},\"ok\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"age\"],\"additionalProperties\":false}",
     {"{\"name\":\"Ann Lee\",\"age\":37,\"tags\":[\"red\",\"blue\"],\"ok\":true}", "{\"age\":0,\"name\":\"\"}", NULL}},
    {"{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"number\",\"minimum\":-5.5},{\"type\":\"null\"},"
     "{\"type\":\"string\",\"pattern\":\"^[A-Z][a-z]*$\"}]},\"minItems\":1}",
     {"[1.25,null,\"Hello\",-5.5,100000]", "[\"A\"]", NULL}},
    {"{\"additionalProperties\":{\"type\":\"string\",\"format\":\"date\"}}",
     {"{\"start\":\"2024-01-31\",\"end\":\"2024-12-01\"}", "{}", NULL}},
};

TEST(gram, mask_exact_stories) {
    tok_vocab *tv = NULL;
    gram_vocab *gv = load_vocab(STORIES, &tv);
    if (!gv) SKIP("%s/" STORIES " absent", shared_root());
    for (size_t c = 0; c < sizeof mask_cases / sizeof mask_cases[0]; c++) {
        gram_grammar *g = compile(mask_cases[c].schema);
        if (!g) continue;
        gram_masker *mk = NULL;
        EXPECT(gram_masker_new(g, gv, &mk) == 0);
        for (int k = 0; k < 3 && mask_cases[c].instances[k] && mk; k++) {
            mask_walk(g, mk, gv, mask_cases[c].instances[k], 1, 1);
            mask_walk(g, mk, gv, mask_cases[c].instances[k], 1, 1); /* warm caches give the same masks */
        }
        gram_masker_free(mk);
        gram_free(g);
    }
    gram_vocab_free(gv);
    tok_free(tv);
}

TEST(gram, mask_exact_qwen3) {
    tok_vocab *tv = NULL;
    gram_vocab *gv = load_vocab(QWEN3, &tv);
    if (!gv) SKIP("%s/" QWEN3 " absent or its tokenizer unsupported", shared_root());
    for (size_t c = 0; c < sizeof mask_cases / sizeof mask_cases[0]; c++) {
        gram_grammar *g = compile(mask_cases[c].schema);
        if (!g) continue;
        gram_masker *mk = NULL;
        EXPECT(gram_masker_new(g, gv, &mk) == 0);
        if (mk) mask_walk(g, mk, gv, mask_cases[c].instances[0], 2, 1);
        gram_masker_free(mk);
        gram_free(g);
    }
    gram_vocab_free(gv);
    tok_free(tv);
}

TEST(gram, whitespace_flexible) {
    const char *schema = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},"
                         "\"b\":{\"type\":\"object\",\"properties\":{\"c\":{\"type\":\"boolean\"}}}},\"required\":[\"a\"]}";
    gram_options o = {.ws_flexible = 1};
    gram_grammar *g = NULL;
    char err[512];
    EXPECT_EQ_I(gram_compile(schema, strlen(schema), &o, &g, err, sizeof err), 0);
    if (!g) return;
    const char *pretty = "{\n  \"a\": [ 1, 2 ],\n  \"b\" : {\"c\": true }\n}";
    EXPECT_EQ_I(gram_check(g, pretty, strlen(pretty), err, sizeof err), 1);
    const char *compact = "{\"a\":[],\"b\":{}}";
    EXPECT_EQ_I(gram_check(g, compact, strlen(compact), err, sizeof err), 1);
    const char *too_much = "{\"a\":                 [1]}"; /* 17 spaces */
    EXPECT_EQ_I(gram_check(g, too_much, strlen(too_much), err, sizeof err), 0);
    const char *inside = "{\"a\":[1\n,2]}";
    EXPECT_EQ_I(gram_check(g, inside, strlen(inside), err, sizeof err), 1);
    tok_vocab *tv = NULL;
    gram_vocab *gv = load_vocab(STORIES, &tv);
    gram_masker *mk = NULL;
    if (gv && !gram_masker_new(g, gv, &mk)) mask_walk(g, mk, gv, pretty, 1, 1);
    gram_masker_free(mk);
    gram_free(g);
    gram_vocab_free(gv);
    tok_free(tv);
}

TEST(gram, forced_tokens) {
    tok_vocab *tv = NULL;
    gram_vocab *gv = load_vocab(QWEN3, &tv);
    if (!gv) SKIP("%s/" QWEN3 " absent", shared_root());
    gram_grammar *g = compile("{\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\"}},"
                              "\"required\":[\"location\"],\"additionalProperties\":false}");
    gram_masker *mk = NULL;
    if (g && !gram_masker_new(g, gv, &mk)) {
        gram_matcher *m;
        EXPECT(gram_matcher_new(g, &m) == 0);
        /* every continuation starts with the object's one required key */
        const char *want = "{\"location\":\"";
        char forced[64];
        int nf = gram_matcher_forced(m, forced, (int)sizeof forced - 1);
        forced[nf > 0 ? nf : 0] = 0;
        EXPECT_STR_EQ(forced, want);
        int32_t ids[16];
        int n = gram_forced_tokens(mk, m, ids, 16);
        char got[64] = "";
        for (int i = 0; i < n; i++) {
            int l;
            const char *b = gram_vocab_bytes(gv, ids[i], &l);
            strncat(got, b, (size_t)l);
            EXPECT(gram_accept_token(gv, m, ids[i]) == 0);
        }
        /* The tokens spell the forced bytes up to one last token, which is
         * held back because it may merge with what follows: so the rest is
         * exactly one vocabulary token, and the matcher still forces it. */
        const size_t gl = strlen(got);
        EXPECT_MSG(n >= 2 && gl > 1 && gl < strlen(want) && !strncmp(want, got, gl), "forced tokens spell \"%s\"", got);
        const char *rest = want + (gl < strlen(want) ? gl : strlen(want));
        int rest_tokens = 0;
        for (int32_t id = 0; id < gram_vocab_n_vocab(gv); id++) {
            int l;
            const char *b = gram_vocab_bytes(gv, id, &l);
            rest_tokens += b && l == (int)strlen(rest) && !memcmp(b, rest, (size_t)l);
        }
        EXPECT_MSG(rest_tokens >= 1, "the unforced rest \"%s\" is not one token: more than one token held back", rest);
        nf = gram_matcher_forced(m, forced, (int)sizeof forced - 1);
        forced[nf > 0 ? nf : 0] = 0;
        EXPECT_STR_EQ(forced, rest);
        gram_matcher_free(m);
    }
    gram_masker_free(mk);
    gram_free(g);
    gram_vocab_free(gv);
    tok_free(tv);
}

TEST(gram, schema_check_exit_codes) {
    const char *dir = test_tmpdir();
    char cmd[4096], path[1024];
    struct {
        const char *name, *text;
    } files[] = {
        {"s.json", "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}},\"required\":[\"n\"]}"},
        {"ok.json", "{ \"n\" : 3 }"},
        {"bad.json", "{\"n\":\"3\"}"},
        {"u.json", "{\"type\":\"array\",\"contains\":{\"type\":\"integer\"}}"},
    };
    for (size_t i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
        FILE *f = fopen(path, "w");
        if (!f) SKIP("cannot write %s", path);
        fputs(files[i].text, f);
        fclose(f);
    }
    char *out = NULL;
    snprintf(cmd, sizeof cmd, "%s schema-check %s/s.json %s/ok.json", cinfer_bin(), dir, dir);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 0);
    free(out);
    snprintf(cmd, sizeof cmd, "%s schema-check %s/s.json %s/ok.json %s/bad.json", cinfer_bin(), dir, dir, dir);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
    EXPECT_MSG(out && strstr(out, "bad.json: rejected") && strstr(out, "byte 5"), "%s", out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "%s schema-check %s/u.json %s/ok.json", cinfer_bin(), dir, dir);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 2);
    EXPECT_MSG(out && strstr(out, "contains at #"), "%s", out ? out : "");
    free(out);
}

/* Every format cinfer.h says the grammar asserts is checked twice: by the
 * grammar (a good value accepted, a bad one rejected) and by the
 * independent validator the differential and generation tests use
 * (tests/data/gram/validate_batch.py: Debian's python3-jsonschema leaves
 * date-time, time, duration, hostname and uri-template unchecked, so the
 * script checks those itself).  The list is read from include/cinfer.h,
 * so a format claimed there without a row here fails. */
TEST(gram, every_claimed_format_checked_by_grammar_and_validator) {
    static const struct {
        const char *name, *good, *bad;
    } fmts[] = {
        {"date", "2024-02-29", "2023-02-29"},
        {"time", "23:59:59.5Z", "24:00:00Z"},
        {"date-time", "2024-01-31T23:59:59+01:00", "2024-13-01T00:00:00Z"},
        {"duration", "P1DT2H", "P1H"},
        {"uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456-42661417400"},
        {"email", "a.b@example.org", "example.org"},
        {"idn-email", "用户@example.com", "用户.example.com"},
        {"hostname", "www.example.com", "-www.example.com"},
        {"ipv4", "192.168.0.1", "256.1.1.1"},
        {"ipv6", "::1", "12345::1"},
        {"uri", "https://example.com/a?b#c", "//example.com/a"},
        {"uri-reference", "../a/b?c", "a b"},
        {"iri", "https://例子.广告/路径", "例子"},
        {"iri-reference", "路径/a", "a b"},
        {"uri-template", "https://x/{id}", "https://x/{id"},
        {"json-pointer", "/a/b~0c", "a/b"},
        {"relative-json-pointer", "0/a", "/a"},
        {"regex", "^a+$", "("},
    };
    const int nf = (int)(sizeof fmts / sizeof fmts[0]);
    /* the claim: "format (asserted: date, time, ...; idn-hostname is refused" */
    char *h = read_file("include/cinfer.h", NULL);
    if (!h) SKIP("cannot read include/cinfer.h");
    char claim[2048] = "";
    const char *a = strstr(h, "format (asserted:"), *e = a ? strstr(a, "; idn-hostname") : NULL;
    EXPECT_MSG(a && e, "include/cinfer.h has no \"format (asserted: ...; idn-hostname\" list");
    int claimed = 0;
    if (a && e) {
        a += strlen("format (asserted:");
        int k = 0;
        for (; a < e && k < (int)sizeof claim - 1; a++)
            if (*a != '*' && *a != '\n' && *a != ' ') claim[k++] = *a; /* drop the comment's line breaks */
        claim[k] = 0;
        for (char *tok = strtok(claim, ","); tok; tok = strtok(NULL, ",")) {
            claimed++;
            int found = 0;
            for (int i = 0; i < nf; i++) found |= !strcmp(fmts[i].name, tok);
            EXPECT_MSG(found, "cinfer.h claims format \"%s\", which this test does not check", tok);
        }
    }
    free(h);
    EXPECT_MSG(claimed == nf, "cinfer.h claims %d formats, this test checks %d", claimed, nf);
    /* the grammar */
    char batch[1024];
    snprintf(batch, sizeof batch, "%s/formats.batch", test_tmpdir());
    FILE *f = fopen(batch, "w");
    if (!f) SKIP("cannot write %s", batch);
    for (int i = 0; i < nf; i++) {
        char schema[256], inst[256];
        snprintf(schema, sizeof schema, "{\"type\":\"string\",\"format\":\"%s\"}", fmts[i].name);
        fprintf(f, "S %d %s\n", i, schema);
        gram_grammar *g = compile(schema);
        for (int bad = 0; bad < 2; bad++) {
            const char *v = bad ? fmts[i].bad : fmts[i].good;
            snprintf(inst, sizeof inst, "\"%s\"", v);
            if (g) EXPECT_MSG(check(g, inst) == !bad, "format %s: the grammar %s %s", fmts[i].name,
                              bad ? "accepts" : "rejects", inst);
            fprintf(f, "I %d %s ", i, bad ? "bad" : "good");
            for (const char *p = inst; *p; p++) fprintf(f, "%02x", (unsigned char)*p);
            fputc('\n', f);
        }
        gram_free(g);
    }
    fclose(f);
    /* the validator: exactly the bad values flagged */
    if (!have_python_module("jsonschema")) SKIP("python3-jsonschema not installed (Debian package python3-jsonschema)");
    char cmd[1200], *out = NULL;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/data/gram/validate_batch.py %s", batch);
    int rc = run_cmd(cmd, true, &out);
    EXPECT_EQ_I(rc, 1);
    for (int i = 0; i < nf; i++) {
        char good[64], bad[64];
        snprintf(good, sizeof good, "BAD %d good ", i);
        snprintf(bad, sizeof bad, "BAD %d bad ", i);
        EXPECT_MSG(out && !strstr(out, good), "validator rejects the good %s \"%s\": %s", fmts[i].name, fmts[i].good,
                   out ? out : "");
        EXPECT_MSG(out && strstr(out, bad), "validator misses format %s: accepts \"%s\"", fmts[i].name, fmts[i].bad);
    }
    char done[64];
    snprintf(done, sizeof done, "DONE %d %d 0 0", 2 * nf, nf);
    EXPECT_MSG(out && strstr(out, done), "expected \"%s\": %s", done, out ? out : "");
    free(out);
}

/* ---- generation semantics for objects (gram_options.gen_objects) ------------------------------------------ */

static gram_grammar *compile_gen(const char *schema) {
    gram_options o = {.gen_objects = 1, .gen_limits = 1};
    gram_grammar *g = NULL;
    char err[2048];
    if (gram_compile(schema, strlen(schema), &o, &g, err, sizeof err)) test_fail(__FILE__, __LINE__, "%s: %s", schema, err);
    return g;
}

/* Both semantics on each instance: expected acceptance under generation and
 * under validation (every instance generation accepts, validation must). */
static void both(const char *schema, const char *const *inst, const int *gen_ok, const int *val_ok, int n) {
    gram_grammar *gg = compile_gen(schema), *gv = compile(schema);
    for (int i = 0; gg && gv && i < n; i++) {
        int a = check(gg, inst[i]), b = check(gv, inst[i]);
        EXPECT_MSG(a == gen_ok[i], "%s: %s: generation %d, expected %d", schema, inst[i], a, gen_ok[i]);
        EXPECT_MSG(b == val_ok[i], "%s: %s: validation %d, expected %d", schema, inst[i], b, val_ok[i]);
        EXPECT_MSG(!a || b, "%s: %s: generation accepts what validation rejects", schema, inst[i]);
    }
    gram_free(gg);
    gram_free(gv);
}

TEST(gram, gen_objects_declared_keys_in_schema_order) {
    /* the trial's schema: validation lets any key in, generation only "a" */
    {
        const char *in[] = {"{\"a\":true}", "{\"a\":true,\"zzz\":[1,2,{\"q\":\"long text\"}]}", "{\"zzz\":1,\"a\":false}", "{}"};
        int gen[] = {1, 0, 0, 0}, val[] = {1, 1, 1, 0};
        both("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"}},\"required\":[\"a\"]}", in, gen, val, 4);
    }
    /* order: optional ones skippable, the required one last here */
    {
        const char *in[] = {"{\"c\":1}", "{\"a\":1,\"c\":1}", "{\"b\":1,\"c\":1}", "{\"a\":1,\"b\":2,\"c\":3}",
                            "{\"c\":1,\"a\":1}", "{\"b\":1,\"a\":1,\"c\":1}", "{\"a\":1}"};
        int gen[] = {1, 1, 1, 1, 0, 0, 0}, val[] = {1, 1, 1, 1, 1, 1, 0};
        both("{\"properties\":{\"a\":{},\"b\":{},\"c\":{}},\"required\":[\"c\"]}", in, gen, val, 7);
    }
    /* additionalProperties true / a schema: other keys after the declared ones */
    {
        const char *in[] = {"{\"a\":1,\"zz\":2}", "{\"zz\":2,\"a\":1}", "{\"zz\":1,\"yy\":\"s\"}", "{\"a\":1,\"zz\":\"s\"}"};
        int gen[] = {1, 0, 1, 1}, val[] = {1, 1, 1, 1};
        both("{\"properties\":{\"a\":{}},\"additionalProperties\":true}", in, gen, val, 4);
        int gen2[] = {1, 0, 0, 0}, val2[] = {1, 1, 0, 0};
        both("{\"properties\":{\"a\":{}},\"additionalProperties\":{\"type\":\"integer\"}}", in, gen2, val2, 4);
    }
    /* patternProperties name keys too; others are closed */
    {
        const char *in[] = {"{\"a\":1,\"x1\":2}", "{\"x1\":2,\"a\":1}", "{\"b\":1}", "{\"x1\":\"s\"}"};
        int gen[] = {1, 0, 0, 0}, val[] = {1, 1, 1, 0};
        both("{\"properties\":{\"a\":{}},\"patternProperties\":{\"^x\":{\"type\":\"integer\"}}}", in, gen, val, 4);
    }
    /* an object schema without properties stays open; required names are declared keys */
    {
        const char *in[] = {"{\"q\":1}", "{\"id\":1,\"q\":2}", "{\"q\":2,\"id\":1}"};
        int gen[] = {0, 1, 0}, val[] = {0, 1, 1};
        both("{\"type\":\"object\",\"required\":[\"id\"]}", in, gen, val, 3);
    }
    /* allOf members merge: keys of either, in document order */
    {
        const char *in[] = {"{\"a\":1,\"b\":2}", "{\"b\":2}", "{\"b\":2,\"a\":1}", "{\"a\":1,\"c\":3}"};
        int gen[] = {1, 1, 0, 0}, val[] = {1, 1, 1, 1};
        both("{\"allOf\":[{\"properties\":{\"a\":{}}},{\"properties\":{\"b\":{}}}]}", in, gen, val, 4);
    }
    /* closing would leave fewer keys than minProperties: the object stays open */
    {
        const char *in[] = {"{\"a\":1,\"b\":2}", "{\"a\":1}"};
        int gen[] = {1, 0}, val[] = {1, 0};
        both("{\"properties\":{\"a\":{}},\"minProperties\":2}", in, gen, val, 2);
    }
    /* nested objects are closed too; additionalProperties false unchanged */
    {
        const char *in[] = {"{\"p\":{\"x\":1}}", "{\"p\":{\"x\":1,\"y\":2}}", "{\"p\":{\"x\":1},\"q\":1}"};
        int gen[] = {1, 0, 0}, val[] = {1, 1, 0};
        both("{\"properties\":{\"p\":{\"properties\":{\"x\":{}}}},\"additionalProperties\":false}", in, gen, val, 3);
    }
}

/* 1 when the matcher takes prefix, then every byte of more: the byte where it stops, or -1 */
static int stops_at(const gram_grammar *g, const char *prefix) {
    gram_matcher *m;
    if (gram_matcher_new(g, &m)) return -2;
    int at = -1;
    for (size_t i = 0; prefix[i]; i++)
        if (gram_matcher_feed(m, prefix + i, 1)) {
            at = (int)i;
            break;
        }
    gram_matcher_free(m);
    return at;
}

/* Ordered keys must never lead into an object no byte can finish: the key
 * that would is refused at its first distinguishing byte. */
TEST(gram, gen_objects_no_dead_ends) {
    struct {
        const char *schema, *text;
        int stop;
    } cases[] = {
        /* minProperties 2: "c" first leaves no second key */
        {"{\"properties\":{\"a\":{},\"b\":{},\"c\":{}},\"minProperties\":2}", "{\"c\":1", 2},
        {"{\"properties\":{\"a\":{},\"b\":{},\"c\":{}},\"minProperties\":2}", "{\"b\":1,\"c\":1}", -1},
        /* maxProperties 2 with "c" required: "a", then "b" would leave no room for it */
        {"{\"properties\":{\"a\":{},\"b\":{},\"c\":{}},\"required\":[\"c\"],\"maxProperties\":2}", "{\"a\":1,\"b\"", 8},
        {"{\"properties\":{\"a\":{},\"b\":{},\"c\":{}},\"required\":[\"c\"],\"maxProperties\":2}", "{\"a\":1,\"c\":1}", -1},
        /* a required key cannot be skipped */
        {"{\"properties\":{\"a\":{},\"b\":{},\"c\":{}},\"required\":[\"a\"]}", "{\"b\"", 2},
        /* dependentRequired: b needs a, which cannot come after it */
        {"{\"properties\":{\"a\":{},\"b\":{}},\"dependentRequired\":{\"b\":[\"a\"]}}", "{\"b\"", 2},
        {"{\"properties\":{\"a\":{},\"b\":{}},\"dependentRequired\":{\"b\":[\"a\"]}}", "{\"a\":1,\"b\":2}", -1},
        /* a needs b (later): a alone cannot close */
        {"{\"properties\":{\"a\":{},\"b\":{}},\"dependentRequired\":{\"a\":[\"b\"]}}", "{\"a\":1}", 6},
        {"{\"properties\":{\"a\":{},\"b\":{}},\"dependentRequired\":{\"a\":[\"b\"]}}", "{\"a\":1,\"b\":1}", -1},
        /* other keys only after every required one */
        {"{\"properties\":{\"a\":{}},\"required\":[\"a\"],\"additionalProperties\":true}", "{\"z\"", 2},
        {"{\"properties\":{\"a\":{}},\"required\":[\"a\"],\"additionalProperties\":true}", "{\"a\":1,\"z\":2,\"y\":3}", -1},
        /* no declared key after an undeclared one */
        {"{\"properties\":{\"a\":{}},\"additionalProperties\":true}", "{\"z\":2,\"a\"", 9},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gram_grammar *g = compile_gen(cases[i].schema);
        if (!g) continue;
        int at = stops_at(g, cases[i].text);
        EXPECT_MSG(at == cases[i].stop, "%s: %s: stopped at byte %d, expected %d", cases[i].schema, cases[i].text, at,
                   cases[i].stop);
        gram_free(g);
    }
    /* "z" then "a": the matcher takes "a as a possible undeclared key, never as the declared one */
    gram_grammar *g = compile_gen("{\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":{\"type\":\"string\"}}");
    if (g) {
        REJECT(g, "{\"z\":\"s\",\"a\":1}");
        REJECT(g, "{\"z\":\"s\",\"a\":\"s\"}");
        ACCEPT(g, "{\"a\":1,\"z\":\"s\"}");
    }
    gram_free(g);
}

/* oneOf is compiled only for provably disjoint branches, and the proof must
 * hold for validation: a value generated from one branch must not satisfy
 * the other under the schema's own semantics.  {"k":1,"j":2} from the first
 * branch satisfies the second (which allows other keys), so generation's
 * closing of the second branch proves nothing. */
TEST(gram, gen_objects_oneof_proof_not_from_closing) {
    const char *s = "{\"type\":\"object\",\"oneOf\":[{\"properties\":{\"k\":{},\"j\":{}},\"required\":[\"k\",\"j\"]},"
                    "{\"properties\":{\"j\":{}},\"required\":[\"j\"]}]}";
    gram_options o = {.gen_objects = 1};
    gram_grammar *g = NULL;
    char err[2048];
    int rc = gram_compile(s, strlen(s), &o, &g, err, sizeof err);
    EXPECT_MSG(rc == CINFER_EUNSUPPORTED && strstr(err, "oneOf"), "rc %d: %s", rc, err);
    if (!rc) REJECT(g, "{\"k\":1,\"j\":2}");
    gram_free(g);
    /* a proof from the schema itself still holds: the first branch forbids j outright */
    s = "{\"type\":\"object\",\"oneOf\":[{\"properties\":{\"k\":{}},\"required\":[\"k\"],\"additionalProperties\":false},"
        "{\"properties\":{\"j\":{}},\"required\":[\"j\"]}]}";
    rc = gram_compile(s, strlen(s), &o, &g, err, sizeof err);
    EXPECT_MSG(rc == 0, "%s", err);
    if (!rc) {
        ACCEPT(g, "{\"k\":1}");
        ACCEPT(g, "{\"j\":1}");
        REJECT(g, "{\"k\":1,\"j\":1}");
    }
    gram_free(g);
}

/* Masks of ordered objects against the matcher, token by token, on both vocabularies */
TEST(gram, gen_objects_mask_exact) {
    static const struct {
        const char *schema, *instance;
    } cases[] = {
        {"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},\"age\":{\"type\":\"integer\","
         "\"minimum\":0,\"maximum\":130},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"green\",\"blue\"]},"
         "\"maxItems\":3},\"ok\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"age\"]}",
         "{\"name\":\"Ann Lee\",\"age\":37,\"ok\":true}"},
        {"{\"properties\":{\"a\":{},\"b\":{},\"c\":{}},\"required\":[\"c\"],\"maxProperties\":2,"
         "\"additionalProperties\":{\"type\":\"integer\"}}",
         "{\"b\":[1],\"c\":{\"x\":null}}"},
        {"{\"properties\":{\"id\":{\"type\":\"integer\"},\"note\":{\"type\":\"string\"}},\"dependentRequired\":{\"id\":"
         "[\"note\"]},\"patternProperties\":{\"^x-\":{\"type\":\"boolean\"}},\"minProperties\":2}",
         "{\"id\":7,\"note\":\"hi\",\"x-a\":true,\"x-b\":false}"},
    };
    const char *models[] = {STORIES, QWEN3};
    for (int mi = 0; mi < 2; mi++) {
        tok_vocab *tv = NULL;
        gram_vocab *gv = load_vocab(models[mi], &tv);
        if (!gv) SKIP("%s/%s absent", shared_root(), models[mi]);
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            gram_grammar *g = compile_gen(cases[c].schema);
            if (!g) continue;
            gram_masker *mk = NULL;
            EXPECT(gram_masker_new(g, gv, &mk) == 0);
            if (mk) mask_walk(g, mk, gv, cases[c].instance, mi ? 3 : 1, 1);
            gram_masker_free(mk);
            gram_free(g);
        }
        gram_vocab_free(gv);
        tok_free(tv);
    }
}

/* The public option: AUTO is validation without a model, GENERATION and
 * VALIDATION say so; schema-check --generation uses generation semantics. */
TEST(gram, gen_objects_public_option) {
    const char *s = "{\"properties\":{\"a\":{}},\"required\":[\"a\"]}";
    const char *extra = "{\"a\":1,\"b\":2}";
    char err[512];
    for (int pol = 0; pol < 3; pol++) {
        cinfer_grammar *g = NULL;
        cinfer_grammar_options o = {.objects = (cinfer_object_policy)pol};
        EXPECT_EQ_I(cinfer_grammar_from_schema(NULL, s, strlen(s), &o, &g, err, sizeof err), 0);
        if (g) EXPECT_EQ_I(cinfer_grammar_check(g, extra, strlen(extra), err, sizeof err), pol == CINFER_OBJECTS_GENERATION ? 0 : 1);
        cinfer_grammar_free(g);
    }
    cinfer_grammar *g = NULL;
    cinfer_grammar_options bad = {.objects = (cinfer_object_policy)7};
    EXPECT_EQ_I(cinfer_grammar_from_schema(NULL, s, strlen(s), &bad, &g, err, sizeof err), CINFER_EARG);
    EXPECT_MSG(strstr(err, "objects 7"), "%s", err);
    const char *dir = test_tmpdir();
    char cmd[4096], path[1024];
    const char *files[][2] = {{"gs.json", s}, {"gi.json", extra}};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i][0]);
        FILE *f = fopen(path, "w");
        if (!f) SKIP("cannot write %s", path);
        fputs(files[i][1], f);
        fclose(f);
    }
    char *out = NULL;
    snprintf(cmd, sizeof cmd, "%s schema-check %s/gs.json %s/gi.json", cinfer_bin(), dir, dir);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 0);
    free(out);
    snprintf(cmd, sizeof cmd, "%s schema-check --generation %s/gs.json %s/gi.json", cinfer_bin(), dir, dir);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
    EXPECT_MSG(out && strstr(out, "gi.json: rejected"), "%s", out ? out : "");
    free(out);
}
