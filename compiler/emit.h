/*
 * emit.h — turn an IR program into one self-contained C translation unit.
 */
#ifndef CINFER_EMIT_H
#define CINFER_EMIT_H

#include <stddef.h>

#include "ir.h"

typedef struct {
    const char *generator_version;     /* banner: "cinfer 0.1.0" */
    const char *prelude;               /* text of templates/prelude.h, pasted verbatim */
    const char *forward_template;      /* text of templates/forward.c.in */
    const char *forward_template_name; /* for #line: "templates/forward.c.in" */
    const char *ops_template;          /* text of templates/ops.c.in (or ops.cu.in) */
    const char *ops_template_name;     /* for messages; NULL: "templates/ops.c.in" */
    const char *prelude_cuda;          /* text of templates/prelude_cuda.h for the CUDA template's
                                        * prelude_cuda region; NULL for C */
    int n_batch;                       /* max tokens per forward call */
    const char *precision;             /* banner: compute precision ("int4"); NULL or
                                        * "native" adds nothing */
} emit_options;

/* Emit p as C (templates/forward.c.in + ops.c.in) or, with the CUDA
 * templates (forward.cu.in + ops.cu.in, prelude_cuda set), as CUDA: the
 * forward template's op-list regions are "body" (the "op" lines), "kernels"
 * and "launches" (the "kernel" and "launch" lines).  *out is malloc'd
 * (caller frees), NUL-terminated, *out_len bytes.  Deterministic: same IR and
 * options → same bytes.  Errors: -1 with a message naming the template and
 * what is wrong ("emit: templates/ops.cu.in has no 'kernel' line for op 'x'"). */
int emit_c(const ir_program *p, const emit_options *o, char **out, size_t *out_len, char *err,
           size_t err_len);

#endif
