/*
 * test_gram_suite.c — the official JSON-Schema-Test-Suite (draft2020-12 and
 * draft7, ../shared/json-schema-test-suite) against cinfer's grammar: for
 * every test group whose schema compiles, each valid instance must be
 * accepted and each invalid one rejected.  Groups whose schema does not
 * compile (unsupported keywords) are counted, not failed.  "format" is an
 * annotation here, as the suite (and the 2020-12 spec) has it by default.
 * CINFER_GRAM_REPORT=1 prints the per-file table.
 */
#include <cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_match.h"
#include "test.h"

typedef struct {
    int groups, compiled, valid, valid_ok, invalid, invalid_ok;
} suite_counts;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Runs one draft directory; returns the number of invalid instances accepted. */
static int run_dir(const char *dir, int draft, suite_counts *tot, int report, char *rejected_kw, size_t kw_cap) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256)
        if (strstr(e->d_name, ".json")) names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    int bad_accept = 0;
    for (int i = 0; i < n; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t len;
        char *txt = read_file(path, &len);
        cJSON *doc = txt ? gram_json_parse(txt, len, NULL, 0) : NULL;
        suite_counts c = {0};
        for (cJSON *grp = doc ? doc->child : NULL; grp; grp = grp->next) {
            c.groups++;
            char *schema = gram_json_print(cJSON_GetObjectItem(grp, "schema"));
            gram_options go = {.default_draft = draft, .format_annotation = 1};
            gram_grammar *g = NULL;
            char err[2048];
            int rc = gram_compile(schema, strlen(schema), &go, &g, err, sizeof err);
            free(schema);
            if (rc) {
                /* collect the keyword names of the message */
                char *p = strstr(err, "unsupported:");
                for (p = p ? p + 12 : NULL; p && *p;) {
                    while (*p == ' ' || *p == ';') p++;
                    size_t kl = strcspn(p, " ;");
                    char kwb[128];
                    snprintf(kwb, sizeof kwb, "%.*s", (int)(kl < 120 ? kl : 120), p);
                    if (!strstr(rejected_kw, kwb) && strlen(rejected_kw) + kl + 3 < kw_cap) {
                        strcat(rejected_kw, rejected_kw[0] ? ", " : "");
                        strcat(rejected_kw, kwb);
                    }
                    p = strchr(p, ';');
                }
                if (report > 1) printf("      %s: %s: %s\n", names[i], cJSON_GetObjectItem(grp, "description")->valuestring, err);
                continue;
            }
            c.compiled++;
            for (cJSON *t = cJSON_GetObjectItem(grp, "tests")->child; t; t = t->next) {
                int valid = cJSON_IsTrue(cJSON_GetObjectItem(t, "valid"));
                char *inst = gram_json_print(cJSON_GetObjectItem(t, "data"));
                char *canon = NULL;
                size_t cl;
                int acc = 0;
                if (!gram_canon(inst, strlen(inst), &canon, &cl, err, sizeof err)) acc = gram_check(g, canon, cl, err, sizeof err) == 1;
                if (valid) c.valid++, c.valid_ok += acc;
                else c.invalid++, c.invalid_ok += !acc;
                if (valid != acc && report > 1)
                    printf("      %s: %s / %s: %s (%s)\n", names[i], cJSON_GetObjectItem(grp, "description")->valuestring,
                           cJSON_GetObjectItem(t, "description")->valuestring, valid ? "valid REJECTED" : "invalid ACCEPTED",
                           inst);
                if (!valid && acc) {
                    bad_accept++;
                    test_fail(__FILE__, __LINE__, "%s: \"%s\" / \"%s\": invalid instance %s accepted", names[i],
                              cJSON_GetObjectItem(grp, "description")->valuestring,
                              cJSON_GetObjectItem(t, "description")->valuestring, inst);
                }
                if (valid && !acc)
                    test_fail(__FILE__, __LINE__, "%s: \"%s\" / \"%s\": valid instance %s rejected: %s", names[i],
                              cJSON_GetObjectItem(grp, "description")->valuestring,
                              cJSON_GetObjectItem(t, "description")->valuestring, inst, err);
                free(canon);
                free(inst);
            }
            gram_free(g);
        }
        if (report)
            printf("    %-28s groups %3d compiled %3d  valid %3d/%-3d  invalid rejected %3d/%-3d\n", names[i], c.groups,
                   c.compiled, c.valid_ok, c.valid, c.invalid_ok, c.invalid);
        tot->groups += c.groups, tot->compiled += c.compiled, tot->valid += c.valid, tot->valid_ok += c.valid_ok;
        tot->invalid += c.invalid, tot->invalid_ok += c.invalid_ok;
        cJSON_Delete(doc);
        free(txt);
        free(names[i]);
    }
    return bad_accept;
}

/* Published in docs/benchmarks.md ("JSON-Schema-Test-Suite"): groups that
 * compile and the valid instances they hold, each of which must be accepted
 * (and each invalid one rejected: run_dir fails on every miss).  Fewer
 * compiled groups or fewer valid instances checked fails.  Change these
 * with the docs. */
static const struct {
    int draft, groups, compiled, valid, invalid;
} published[] = {
    {2020, 383, 229, 537, 326},
    {7, 257, 215, 477, 311},
};

static void run_draft(const char *rel, int draft) {
    const char *dir = shared_path(rel);
    if (!dir) SKIP("../shared/%s absent", rel);
    char dcopy[1024];
    snprintf(dcopy, sizeof dcopy, "%s", dir);
    const char *rep = getenv("CINFER_GRAM_REPORT");
    int report = rep ? atoi(rep) : 0;
    if (report) printf("  %s\n", rel);
    suite_counts tot = {0};
    char kw[4096] = "";
    run_dir(dcopy, draft, &tot, report, kw, sizeof kw);
    if (report)
        printf("    total: groups %d compiled %d  valid accepted %d/%d  invalid rejected %d/%d\n"
               "    rejected at compile time: %s\n",
               tot.groups, tot.compiled, tot.valid_ok, tot.valid, tot.invalid_ok, tot.invalid, kw);
    for (size_t i = 0; i < sizeof published / sizeof published[0]; i++) {
        if (published[i].draft != draft) continue;
        EXPECT_EQ_I(tot.groups, published[i].groups);
        EXPECT_MSG(tot.compiled >= published[i].compiled, "compiled %d of %d groups, published %d", tot.compiled,
                   tot.groups, published[i].compiled);
        EXPECT_MSG(tot.valid_ok >= published[i].valid && tot.valid_ok == tot.valid,
                   "accepted %d of %d valid instances, published %d", tot.valid_ok, tot.valid, published[i].valid);
        EXPECT_MSG(tot.invalid_ok >= published[i].invalid && tot.invalid_ok == tot.invalid,
                   "rejected %d of %d invalid instances, published %d", tot.invalid_ok, tot.invalid, published[i].invalid);
    }
}

TEST(gram_suite, draft2020_12) { run_draft("json-schema-test-suite/tests/draft2020-12", 2020); }
TEST(gram_suite, draft7) { run_draft("json-schema-test-suite/tests/draft7", 7); }
