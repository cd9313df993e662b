/*
 * test_gram_diff.h — the differential test (tests/test_gram_diff.c), shared
 * by the test runner (a sample of mutants) and `make test-grammar-full`
 * (tests/test_gram_bench.c's bench_gram, every mutant).
 */
#ifndef CINFER_TEST_GRAM_DIFF_H
#define CINFER_TEST_GRAM_DIFF_H

typedef struct {
    int schemas, compiled, refused;
    int valid, valid_ok;              /* valid instances of compiled schemas, and how many the grammar accepts */
    int invalid_inst, invalid_inst_acc; /* the sample's invalid instances, and how many it accepts (must be 0) */
    long mutants, mutants_acc, validated;
    int invalid;                      /* accepted mutants the validator rejects (must be 0) */
    int skipped_schemas;              /* schemas python3-jsonschema cannot use */
    int unverified;                   /* instances it raised on (no verdict) */
    int gen_compiled, gen_refused;    /* generation semantics (gen_objects, gen_limits) */
    int gen_valid, gen_valid_ok;      /* valid instances, and how many generation's grammar accepts */
    int gen_not_subset;               /* instances or mutants generation accepts and validation rejects (must be 0) */
    double grammar_s, validate_s;
} gram_diff_counts;

/* Compile every schema under dir, check its instances, write n_mut mutants
 * per valid instance to the batch file (every flex_every-th schema also with
 * flexible whitespace, and as many, offset by flex_every / 2, also with
 * generation semantics, whose accepted instances and mutants the validation
 * grammar must accept too; 0: never).  0, or -1 when dir or the batch cannot
 * be opened. */
int gram_diff_run(const char *dir, int n_mut, int flex_every, const char *batch_path, int verbose, gram_diff_counts *out);
/* One validate_batch.py run over the batch (exact: decimal numbers). */
int gram_diff_validate(const char *batch_path, int exact, gram_diff_counts *out);
int gram_diff_validator(void);
void gram_diff_report(const gram_diff_counts *c);

/* The generation stress test (tests/test_gram_gen.c): every stride-th
 * schema compiled for the model at model_rel, one generation each at
 * temperature 1.0 with the logits biased toward closing tokens, at most
 * max_tokens; each complete output goes to the batch (validated with
 * gram_diff_validate, float numbers: what validators do). */
typedef struct {
    int schemas, compiled, refused, complete, incomplete, failed;
    long tokens;
} gram_stress_counts;
int gram_stress_run(const char *model_rel, const char *data_dir, int stride, int max_tokens, const char *batch_path,
                    gram_stress_counts *out);
void gram_stress_report(const gram_stress_counts *c);

#endif
