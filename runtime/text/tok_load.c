/*
 * tok_load.c — tok_load_gguf: the vocabulary of a model file, from its
 * tokenizer.ggml.* metadata (tok.c) or, for a Hugging Face folder opened as
 * a GGUF (formats/hf.h), from the tokenizer.json it carries (tok_hf.c).
 * Its own module so that neither loader calls the other.
 */
#include "tok_impl.h"

int tok_load_gguf(const gguf_file *g, tok_vocab **out, char *err, size_t err_len) {
    if (g && !gguf_get(g, "tokenizer.ggml.model") && gguf_get(g, "tokenizer.huggingface.json"))
        return tok_load_hf_gguf(g, out, err, err_len);
    return tok_load_ggml(g, out, err, err_len);
}
