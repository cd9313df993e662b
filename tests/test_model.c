/*
 * test_model.c — see test_model.h.
 */
#include "test_model.h"

#include <string.h>

void unload(loaded *l) {
    eng_ctx_free(l->ctx);
    eng_model_release(&l->em);
    cc_module_free(l->mod);
    gguf_close(l->g);
    memset(l, 0, sizeof *l);
}

int loaded_open(const char *path, const cc_options *co, const eng_ctx_opts *eo, loaded *l, char *err, size_t el) {
    memset(l, 0, sizeof *l);
    if (gguf_open(path, &l->g, err, el) || cc_build(l->g, co, &l->mod, err, el) ||
        eng_model_bind(&l->em, l->g, l->mod->desc, l->mod->forward, err, el) ||
        eng_ctx_open(&l->em, eo, &l->ctx, err, el)) {
        unload(l);
        return -1;
    }
    return 0;
}
