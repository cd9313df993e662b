/*
 * gguf_set — a copy of a GGUF file with metadata keys set, added or dropped
 * (tensors and alignment kept), for making test vocabularies from existing
 * ones (tools/tok-refs.sh: a byte-level BPE vocabulary with another
 * pre-tokenizer name, a SentencePiece vocabulary read as a unigram one).
 *
 *   gguf_set IN.gguf OUT.gguf KEY=str:TEXT | KEY=bool:true|false | KEY=u32:N | KEY=drop ...
 *
 * Built against libcinfer.a (runtime/formats/gguf_write.h); not a test-time tool.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "formats/gguf_write.h"

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s IN.gguf OUT.gguf KEY=str:TEXT|bool:true|bool:false|u32:N|drop ...\n", argv[0]);
        return 2;
    }
    enum { MAX_SET = 32 };
    gguf_kv_set set[MAX_SET];
    const char *drop[MAX_SET + 1];
    char *keys[MAX_SET];
    size_t n_set = 0, n_drop = 0;
    for (int i = 3; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq || n_set + n_drop >= MAX_SET) {
            fprintf(stderr, "gguf_set: '%s': expected KEY=TYPE:VALUE (at most %d)\n", argv[i], MAX_SET);
            return 2;
        }
        char *key = strndup(argv[i], (size_t)(eq - argv[i]));
        const char *v = eq + 1;
        keys[n_set + n_drop] = key;
        if (!strcmp(v, "drop")) {
            drop[n_drop++] = key;
            continue;
        }
        gguf_value val;
        if (!strncmp(v, "str:", 4)) val = gguf_val_str(v + 4);
        else if (!strcmp(v, "bool:true") || !strcmp(v, "bool:false"))
            val = (gguf_value){.type = GGUF_VT_BOOL, .v.b = !strcmp(v, "bool:true")};
        else if (!strncmp(v, "u32:", 4)) val = gguf_val_u32((uint32_t)strtoul(v + 4, NULL, 10));
        else {
            fprintf(stderr, "gguf_set: '%s': the value is str:TEXT, bool:true, bool:false, u32:N or drop\n", argv[i]);
            return 2;
        }
        set[n_set++] = (gguf_kv_set){key, val};
    }
    drop[n_drop] = NULL;
    gguf_file *g;
    char e[512];
    if (gguf_open(argv[1], &g, e, sizeof e)) {
        fprintf(stderr, "gguf_set: %s\n", e);
        return 1;
    }
    gguf_out o;
    if (gguf_out_open(&o, argv[2], ".partial", g, e, sizeof e)) {
        fprintf(stderr, "gguf_set: %s\n", e);
        gguf_close(g);
        return 1;
    }
    uint32_t align = gguf_alignment(g);
    uint64_t nt = gguf_n_tensors(g), off = 0;
    gguf_w_header(&o.w, g, nt, n_drop ? gguf_key_in_list : NULL, drop, set, n_set);
    for (uint64_t i = 0; i < nt; i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        gguf_w_tensor_info(&o.w, t->name, t->n_dims, t->ne, t->type, off);
        off += gguf_align_up(t->n_bytes, align);
    }
    gguf_w_pad(&o.w, align);
    for (uint64_t i = 0; i < nt; i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        gguf_w_bytes(&o.w, t->data, (size_t)t->n_bytes);
        gguf_w_pad(&o.w, align);
    }
    int rc = gguf_out_commit(&o, e, sizeof e);
    gguf_out_abort(&o);
    gguf_close(g);
    for (size_t k = 0; k < n_set + n_drop; k++) free(keys[k]);
    if (rc) fprintf(stderr, "gguf_set: %s\n", e);
    return rc ? 1 : 0;
}
