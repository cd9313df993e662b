/*
 * memplan.h — what binding a compiled module and opening a context will
 * allocate, computed from the module description and the GGUF tensor table
 * alone, before any weight or cache byte is touched (cinfer_plan_model,
 * the --mem ladder; docs/memory.md).
 *
 * It mirrors eng_model_bind and eng_ctx_new buffer by buffer, so a change
 * there needs one here; tests/test_memplan.c holds the sum to the measured
 * peak RSS of `cinfer run`.  All figures are bytes of resident memory at a
 * full context: pages the run touches, not address space reserved.
 */
#ifndef CINFER_MEMPLAN_H
#define CINFER_MEMPLAN_H

#include <stdint.h>

#include "formats/gguf.h"
#include "prelude.h"

#define MEMPLAN_MAX_KINDS 12

/* Weights of one compiled type, bound one way. */
typedef struct {
    int type;          /* ggml or cinfer type id they compute in (CF_*) */
    int mapped;        /* 1: the file mapping (page cache backed); 0: converted at bind */
    int n_tensors;
    uint64_t bytes;    /* resident bytes */
} memplan_kind;

typedef struct {
    memplan_kind kinds[MEMPLAN_MAX_KINDS]; /* (n_kinds), mapped first, then by type id */
    int n_kinds;
    uint64_t weights_bytes;  /* sum of kinds[].bytes */
    uint64_t embd_bytes;     /* of weights_bytes: an untied token_embd in the mapping,
                              * counted as the rows a full context reads (at least one
                              * page each), not the whole table */
    uint64_t load_bytes;     /* transient while converting: the largest source tensors
                              * in flight, one per thread (their pages are dropped as
                              * each conversion ends) */
    uint64_t kv_bytes;       /* K and V of every layer, in their cache types, at n_ctx positions */
    uint64_t arena_bytes;    /* the activation arena rows a batch of min(n_batch, n_ctx)
                              * tokens writes */
    uint64_t scratch_bytes;  /* per-thread kernel scratch, all threads */
    uint64_t logits_bytes;   /* logits, batch positions and a session's token history */
    uint64_t state_bytes;    /* recurrent state (Mamba/Mamba-2 conv + SSM, gated DeltaNet, RWKV,
                              * LFM2 conv: desc->state_floats), the live one and the
                              * ENG_DEFAULT_SNAPSHOTS snapshots prefix reuse keeps, each with
                              * its logits row; 0 without recurrent layers */
} memplan_parts;

/* Fill *out for desc bound over g at n_ctx positions (<= 0: eng_ctx_new's
 * default) with n_threads threads (<= 0: physical cores) and activation mode
 * act_quant (cf_env.act_quant), K and V cache rows of kv_type_k / kv_type_v
 * (CF_F32, CF_F16, CF_Q8_0, CF_Q4_0; eng_kv_types_check is the caller's).  Errors: -1 and "tensor 'X': compiled code
 * needs it, the file lacks it" (as eng_model_bind). */
int memplan_parts_of(const gguf_file *g, const cf_model_desc *desc, int n_ctx, int n_threads,
                     int act_quant, int kv_type_k, int kv_type_v, memplan_parts *out, char *err,
                     size_t err_len);

/* The n_ctx eng_ctx_new uses for a request of n_ctx (<= 0: the default). */
int memplan_n_ctx(const cf_model_desc *desc, int n_ctx);

/* Resident bytes of this process now (/proc/self/statm), 0 when unknown;
 * memplan_anon_now: of those, the ones not backed by a file (heap,
 * anonymous mappings) — what a step allocated, without the file pages it
 * happened to fault in (the GGUF parser prefaults the mapping in 4 MiB
 * steps: weight pages the weights part counts already). */
uint64_t memplan_rss_now(void);
uint64_t memplan_anon_now(void);

/* Bytes of machine code this process has mapped but not run yet: the
 * executable mappings (r-x, /proc/self/smaps Size - Rss) of the program or
 * shared library holding cinfer's runtime (kernels, sampler, engine), of
 * libm and of libc (measured: a run of stories260K maps 256 KiB more of
 * cinfer's code than the plan's process, 192 KiB more of libc's, 224 KiB
 * of libm's).  A run executes part of it (the kernels of its types and ISA, the
 * sampler): the plan counts all of it, so it errs high by the code no run
 * reaches.  0 when /proc is not there. */
uint64_t memplan_code_unrun(void);

#endif
