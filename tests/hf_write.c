/*
 * hf_write.c — test-side Hugging Face folder writers (see hf_write.h).
 */
#include "hf_write.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/f16.h"
#include "formats/gguf_write.h"
#include "formats/hf.h"
#include "formats/safetensors.h"
#include "kernels/kern.h"

static int fail(char *err, size_t err_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t err_len, const char *fmt, ...) {
    if (err && err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

void hfw_tensors_free(hfw_tensor *t, size_t n) {
    for (size_t i = 0; t && i < n; i++) free(t[i].data);
    free(t);
}

int hfw_text(const char *dir, const char *name, const char *text, char *err, size_t err_len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return fail(err, err_len, "%s: %s", path, strerror(errno));
    size_t n = strlen(text);
    int bad = fwrite(text, 1, n, f) != n;
    bad |= fclose(f) != 0;
    return bad ? fail(err, err_len, "%s: write failed", path) : 0;
}

int hfw_safetensors(const char *path, const hfw_tensor *t, size_t n, char *err, size_t err_len) {
    cJSON *h = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(h, "__metadata__");
    cJSON_AddStringToObject(meta, "format", "pt");
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        cJSON *e = cJSON_AddObjectToObject(h, t[i].name);
        cJSON_AddStringToObject(e, "dtype", st_dtype_name(t[i].dtype));
        cJSON *sh = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; d < t[i].n_dims; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t[i].shape[d]));
        cJSON *o = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
        off += t[i].n_bytes;
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
    }
    char *js = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    if (!js) return fail(err, err_len, "out of memory");
    size_t hl = strlen(js), pad = (8 - (8 + hl) % 8) % 8;
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(js);
        return fail(err, err_len, "%s: %s", path, strerror(errno));
    }
    uint64_t n_hdr = hl + pad;
    int bad = fwrite(&n_hdr, 8, 1, f) != 1 || fwrite(js, 1, hl, f) != hl;
    for (size_t i = 0; i < pad; i++) bad |= fputc(' ', f) == EOF;
    for (size_t i = 0; i < n; i++) bad |= fwrite(t[i].data, 1, t[i].n_bytes, f) != t[i].n_bytes;
    bad |= fclose(f) != 0;
    free(js);
    return bad ? fail(err, err_len, "%s: write failed", path) : 0;
}

/* ==== GGUF -> HF ============================================================== */

static void expand(char *buf, size_t cap, const char *pat, int layer) {
    const char *d = strstr(pat, "%d");
    if (!d) snprintf(buf, cap, "%s", pat);
    else snprintf(buf, cap, "%.*s%d%s", (int)(d - pat), pat, layer, d + 2);
}

static int gguf_int(const gguf_file *g, const char *arch, const char *key, int def) {
    char k[160];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    uint32_t v;
    return gguf_get_u32(g, k, &v, NULL, 0) ? def : (int)v;
}

/* Tensor t as f32 (n_elems), exactly dequantized. */
static float *to_f32(const gguf_tensor *t) {
    float *f = malloc((size_t)t->n_elems * sizeof *f);
    if (!f) return NULL;
    int64_t cols = t->ne[0], rows = (int64_t)(t->n_elems / (uint64_t)cols);
    size_t rb = kern_row_bytes((int)t->type, (int)cols);
    for (int64_t r = 0; r < rows; r++)
        kern_dequant_row((int)t->type, (const char *)t->data + (size_t)r * rb, f + r * cols, (int)cols);
    return f;
}

/* f32 values into dtype; *n_bytes set. */
static void *from_f32(const float *f, uint64_t n, uint32_t dtype, size_t *n_bytes) {
    size_t es = dtype == ST_F32 ? 4 : 2;
    void *out = malloc((size_t)n * es);
    if (!out) return NULL;
    for (uint64_t i = 0; i < n; i++) {
        if (dtype == ST_F32) memcpy((char *)out + 4 * i, &f[i], 4);
        else {
            uint16_t h = dtype == ST_F16 ? f32_to_f16(f[i]) : f32_to_bf16(f[i]);
            memcpy((char *)out + 2 * i, &h, 2);
        }
    }
    *n_bytes = (size_t)n * es;
    return out;
}

int hfw_hf_tensors(const gguf_file *g, uint32_t dtype, hfw_tensor **out, size_t *n_out, char *err, size_t err_len) {
    if (!dtype) dtype = ST_F32;
    gguf_str as;
    char arch[64];
    if (gguf_get_str(g, "general.architecture", &as, err, err_len)) return -1;
    snprintf(arch, sizeof arch, "%.*s", (int)as.len, as.ptr);
    hf_map *m;
    if (hf_map_load(arch, NULL, &m, err, err_len)) return -1;
    size_t n = gguf_n_tensors(g);
    hfw_tensor *ts = calloc(n ? n : 1, sizeof *ts);
    int rc = ts ? 0 : fail(err, err_len, "out of memory");
    size_t k = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        const char *dot = strrchr(t->name, '.');
        char base[200];
        snprintf(base, sizeof base, "%.*s", dot ? (int)(dot - t->name) : (int)strlen(t->name), t->name);
        const hf_map_tensor *mt = NULL;
        int layer = -1;
        for (size_t e = 0; e < m->n_tensors && !mt; e++)
            if (hf_match(m->tensors[e].gguf, base, &layer)) mt = &m->tensors[e];
        if (!mt) {
            rc = fail(err, err_len, "%s: tensor '%s' has no mapping in %s", arch, t->name, m->file);
            break;
        }
        float *f = to_f32(t);
        if (!f) {
            rc = fail(err, err_len, "out of memory");
            break;
        }
        int64_t cols = t->ne[0], rows = (int64_t)(t->n_elems / (uint64_t)cols);
        if (mt->add != 0.0f)
            for (uint64_t j = 0; j < t->n_elems; j++) f[j] -= mt->add;
        if (mt->permute) { /* GGUF pair order back to HF rotate-half rows */
            int heads = gguf_int(g, arch, mt->permute, gguf_int(g, arch, "attention.head_count", 1));
            float *p = malloc((size_t)t->n_elems * sizeof *p);
            int64_t prow = t->n_dims == 1 ? t->ne[0] : rows;
            size_t rbytes = t->n_dims == 1 ? sizeof(float) : (size_t)cols * sizeof(float);
            if (!p || hf_permute_rows(f, p, prow, rbytes, heads, false)) {
                free(p);
                free(f);
                rc = fail(err, err_len, "%s: cannot unpermute %s (%d heads)", arch, t->name, heads);
                break;
            }
            free(f);
            f = p;
        }
        hfw_tensor *h = &ts[k++];
        expand(h->name, sizeof h->name, mt->hf, layer);
        snprintf(h->name + strlen(h->name), sizeof h->name - strlen(h->name), "%s", dot ? dot : "");
        h->dtype = dtype;
        if (mt->transpose && t->n_dims == 2) { /* Conv1D: (in, out) row-major */
            float *tr = malloc((size_t)t->n_elems * sizeof *tr);
            if (!tr) {
                free(f);
                rc = fail(err, err_len, "out of memory");
                break;
            }
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c = 0; c < cols; c++) tr[c * rows + r] = f[r * cols + c];
            free(f);
            f = tr;
            h->n_dims = 2;
            h->shape[0] = cols;
            h->shape[1] = rows;
        } else {
            h->n_dims = (int)t->n_dims;
            for (uint32_t d = 0; d < t->n_dims; d++) h->shape[d] = t->ne[t->n_dims - 1 - d];
        }
        h->data = from_f32(f, t->n_elems, dtype, &h->n_bytes);
        free(f);
        if (!h->data) rc = fail(err, err_len, "out of memory");
    }
    hf_map_free(m);
    if (rc) {
        hfw_tensors_free(ts, k);
        return -1;
    }
    *out = ts;
    *n_out = k;
    return 0;
}

/* A SentencePiece-style tokenizer.json (byte_fallback BPE) for an SPM GGUF
 * vocabulary; merges as HF's SentencePieceExtractor derives them: for each
 * piece by descending score, every split into two pieces of the vocabulary. */
static cJSON *spm_tokenizer_json(const gguf_file *g, char *err, size_t err_len) {
    const gguf_value *toks = gguf_get(g, "tokenizer.ggml.tokens"), *scores = gguf_get(g, "tokenizer.ggml.scores"),
                     *types = gguf_get(g, "tokenizer.ggml.token_type");
    if (!toks || toks->type != GGUF_VT_ARRAY || toks->v.arr.type != GGUF_VT_STRING) {
        fail(err, err_len, "no tokenizer.ggml.tokens");
        return NULL;
    }
    uint64_t n = toks->v.arr.n;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    int32_t unk = 0, bos = 1;
    uint32_t x;
    if (!gguf_get_u32(g, "tokenizer.ggml.unknown_token_id", &x, NULL, 0)) unk = (int32_t)x;
    if (!gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &x, NULL, 0)) bos = (int32_t)x;
    char **s = calloc(n, sizeof *s);
    float *sc = calloc(n, sizeof *sc);
    int32_t *ty = calloc(n, sizeof *ty);
    for (uint64_t i = 0; i < n; i++) {
        s[i] = strndup(toks->v.arr.strs[i].ptr, toks->v.arr.strs[i].len);
        if (scores) memcpy(&sc[i], (const char *)scores->v.arr.data + 4 * i, 4);
        ty[i] = 1;
        if (types) memcpy(&ty[i], (const char *)types->v.arr.data + 4 * i, 4);
        if (ty[i] == 3 || ty[i] == 2) {
            cJSON *a = cJSON_CreateObject();
            cJSON_AddNumberToObject(a, "id", (double)i);
            cJSON_AddStringToObject(a, "content", s[i]);
            cJSON_AddBoolToObject(a, "single_word", 0);
            cJSON_AddBoolToObject(a, "lstrip", 0);
            cJSON_AddBoolToObject(a, "rstrip", 0);
            cJSON_AddBoolToObject(a, "normalized", 0);
            cJSON_AddBoolToObject(a, "special", 1);
            cJSON_AddItemToArray(added, a);
        }
    }
    cJSON *nm = cJSON_AddObjectToObject(root, "normalizer");
    cJSON_AddStringToObject(nm, "type", "Sequence");
    cJSON *nms = cJSON_AddArrayToObject(nm, "normalizers");
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "type", "Prepend");
    cJSON_AddStringToObject(p, "prepend", "\xe2\x96\x81");
    cJSON_AddItemToArray(nms, p);
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "type", "Replace");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(r, "pattern"), "String", " ");
    cJSON_AddStringToObject(r, "content", "\xe2\x96\x81");
    cJSON_AddItemToArray(nms, r);
    cJSON_AddNullToObject(root, "pre_tokenizer");
    cJSON *pp = cJSON_AddObjectToObject(root, "post_processor");
    cJSON_AddStringToObject(pp, "type", "TemplateProcessing");
    cJSON *single = cJSON_AddArrayToObject(pp, "single");
    cJSON *st = cJSON_CreateObject(), *sti = cJSON_AddObjectToObject(st, "SpecialToken");
    cJSON_AddStringToObject(sti, "id", s[bos]);
    cJSON_AddNumberToObject(sti, "type_id", 0);
    cJSON_AddItemToArray(single, st);
    cJSON *sq = cJSON_CreateObject(), *sqi = cJSON_AddObjectToObject(sq, "Sequence");
    cJSON_AddStringToObject(sqi, "id", "A");
    cJSON_AddNumberToObject(sqi, "type_id", 0);
    cJSON_AddItemToArray(single, sq);
    cJSON *sp = cJSON_AddObjectToObject(cJSON_AddObjectToObject(pp, "special_tokens"), s[bos]);
    cJSON_AddStringToObject(sp, "id", s[bos]);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(sp, "ids"), cJSON_CreateNumber(bos));
    cJSON_AddItemToArray(cJSON_AddArrayToObject(sp, "tokens"), cJSON_CreateString(s[bos]));
    cJSON *dec = cJSON_AddObjectToObject(root, "decoder");
    cJSON_AddStringToObject(dec, "type", "Sequence");
    cJSON *ds = cJSON_AddArrayToObject(dec, "decoders");
    cJSON *d1 = cJSON_CreateObject();
    cJSON_AddStringToObject(d1, "type", "Replace");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(d1, "pattern"), "String", "\xe2\x96\x81");
    cJSON_AddStringToObject(d1, "content", " ");
    cJSON_AddItemToArray(ds, d1);
    const char *steps[] = {"ByteFallback", "Fuse"};
    for (int i = 0; i < 2; i++) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "type", steps[i]);
        cJSON_AddItemToArray(ds, d);
    }
    cJSON *d4 = cJSON_CreateObject();
    cJSON_AddStringToObject(d4, "type", "Strip");
    cJSON_AddStringToObject(d4, "content", " ");
    cJSON_AddNumberToObject(d4, "start", 1);
    cJSON_AddNumberToObject(d4, "stop", 0);
    cJSON_AddItemToArray(ds, d4);
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "dropout");
    cJSON_AddStringToObject(model, "unk_token", s[unk]);
    cJSON_AddNullToObject(model, "continuing_subword_prefix");
    cJSON_AddNullToObject(model, "end_of_word_suffix");
    cJSON_AddBoolToObject(model, "fuse_unk", 1);
    cJSON_AddBoolToObject(model, "byte_fallback", 1);
    cJSON_AddBoolToObject(model, "ignore_merges", 0);
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    for (uint64_t i = 0; i < n; i++) cJSON_AddNumberToObject(vocab, s[i], (double)i);
    /* merges: pieces by descending score (stable), each piece's splits by (left id, right id) */
    cJSON *merges = cJSON_AddArrayToObject(model, "merges");
    uint64_t *order = malloc(n * sizeof *order);
    for (uint64_t i = 0; i < n; i++) order[i] = i;
    for (uint64_t i = 1; i < n; i++) { /* insertion sort: n is small in tests */
        uint64_t v = order[i], j = i;
        for (; j > 0 && sc[order[j - 1]] < sc[v]; j--) order[j] = order[j - 1];
        order[j] = v;
    }
    for (uint64_t oi = 0; oi < n; oi++) {
        uint64_t id = order[oi];
        if (ty[id] != 1) continue;
        const char *piece = s[id];
        size_t len = strlen(piece);
        int64_t best_l[64], best_r[64];
        int nl = 0;
        for (size_t cut = 1; cut < len && nl < 64; cut++) {
            if (((unsigned char)piece[cut] & 0xC0) == 0x80) continue; /* inside a UTF-8 character */
            int64_t li = -1, ri = -1;
            for (uint64_t t = 0; t < n && (li < 0 || ri < 0); t++) {
                if (ty[t] != 1) continue;
                if (li < 0 && strlen(s[t]) == cut && !strncmp(s[t], piece, cut)) li = (int64_t)t;
                if (ri < 0 && !strcmp(s[t], piece + cut)) ri = (int64_t)t;
            }
            if (li >= 0 && ri >= 0) {
                int k = nl++;
                while (k > 0 && (best_l[k - 1] > li || (best_l[k - 1] == li && best_r[k - 1] > ri))) {
                    best_l[k] = best_l[k - 1];
                    best_r[k] = best_r[k - 1];
                    k--;
                }
                best_l[k] = li;
                best_r[k] = ri;
            }
        }
        for (int k = 0; k < nl; k++) {
            char buf[512];
            snprintf(buf, sizeof buf, "%s %s", s[best_l[k]], s[best_r[k]]);
            cJSON_AddItemToArray(merges, cJSON_CreateString(buf));
        }
    }
    free(order);
    for (uint64_t i = 0; i < n; i++) free(s[i]);
    free(s);
    free(sc);
    free(ty);
    return root;
}

static int write_json(const char *dir, const char *name, cJSON *j, char *err, size_t err_len) {
    char *t = cJSON_Print(j);
    if (!t) return fail(err, err_len, "out of memory");
    int rc = hfw_text(dir, name, t, err, err_len);
    free(t);
    return rc;
}

static const char *tok_text(const gguf_file *g, const char *key, char *buf, size_t cap) {
    uint32_t id;
    const gguf_value *toks = gguf_get(g, "tokenizer.ggml.tokens");
    if (gguf_get_u32(g, key, &id, NULL, 0) || !toks || id >= toks->v.arr.n) return NULL;
    snprintf(buf, cap, "%.*s", (int)toks->v.arr.strs[id].len, toks->v.arr.strs[id].ptr);
    return buf;
}

int hfw_from_gguf(const gguf_file *g, const char *dir, const hfw_opts *o, char *err, size_t err_len) {
    hfw_opts def = {0};
    if (!o) o = &def;
    if (mkdir(dir, 0755) && errno != EEXIST) return fail(err, err_len, "%s: %s", dir, strerror(errno));
    gguf_str as;
    char arch[64];
    if (gguf_get_str(g, "general.architecture", &as, err, err_len)) return -1;
    snprintf(arch, sizeof arch, "%.*s", (int)as.len, as.ptr);
    hf_map *m;
    if (hf_map_load(arch, NULL, &m, err, err_len)) return -1;
    hfw_tensor *ts = NULL;
    size_t nt = 0;
    int rc = hfw_hf_tensors(g, o->dtype, &ts, &nt, err, err_len);
    cJSON *cfg = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(cfg, "architectures"), cJSON_CreateString(m->architectures[0]));
    for (size_t i = 0; !rc && i < m->n_hparams; i++) {
        char key[192];
        snprintf(key, sizeof key, "%s.%s", arch, m->hparams[i].key);
        const gguf_value *v = gguf_get(g, key);
        const char *ck = m->hparams[i].config_key;
        if (!v) {
            if (!strcmp(m->hparams[i].key, "vocab_size")) {
                const gguf_value *toks = gguf_get(g, "tokenizer.ggml.tokens");
                if (toks) cJSON_AddNumberToObject(cfg, ck, (double)toks->v.arr.n);
            }
            continue;
        }
        switch (v->type) {
        case GGUF_VT_UINT8: case GGUF_VT_UINT16: case GGUF_VT_UINT32: case GGUF_VT_UINT64:
            cJSON_AddNumberToObject(cfg, ck, (double)v->v.u64);
            break;
        case GGUF_VT_INT8: case GGUF_VT_INT16: case GGUF_VT_INT32: case GGUF_VT_INT64:
            cJSON_AddNumberToObject(cfg, ck, (double)v->v.i64);
            break;
        case GGUF_VT_FLOAT32: case GGUF_VT_FLOAT64: cJSON_AddNumberToObject(cfg, ck, v->v.f64); break;
        case GGUF_VT_BOOL: cJSON_AddBoolToObject(cfg, ck, v->v.b); break;
        case GGUF_VT_STRING: {
            char *sv = strndup(v->v.str.ptr, v->v.str.len);
            cJSON_AddStringToObject(cfg, ck, sv);
            free(sv);
            break;
        }
        default: break;
        }
    }
    cJSON_AddBoolToObject(cfg, "tie_word_embeddings", gguf_find_tensor(g, "output.weight") == NULL);
    cJSON_AddStringToObject(cfg, "torch_dtype", o->dtype == ST_F16 ? "float16" : o->dtype == ST_BF16 ? "bfloat16" : "float32");
    uint32_t id;
    if (!gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &id, NULL, 0)) cJSON_AddNumberToObject(cfg, "bos_token_id", id);
    if (!gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &id, NULL, 0)) cJSON_AddNumberToObject(cfg, "eos_token_id", id);
    if (!rc) rc = write_json(dir, "config.json", cfg, err, err_len);
    cJSON_Delete(cfg);

    int shards = o->n_shards > 1 ? o->n_shards : 1;
    char path[4096];
    if (!rc && shards == 1) {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        rc = hfw_safetensors(path, ts, nt, err, err_len);
    } else if (!rc) {
        cJSON *idx = cJSON_CreateObject(), *wm = cJSON_AddObjectToObject(idx, "weight_map");
        uint64_t total = 0;
        for (int s = 0; s < shards && !rc; s++) {
            char name[96];
            snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
            hfw_tensor *part = calloc(nt ? nt : 1, sizeof *part);
            size_t np = 0;
            for (size_t i = (size_t)s; i < nt; i += (size_t)shards) {
                part[np++] = ts[i];
                cJSON_AddStringToObject(wm, ts[i].name, name);
                total += ts[i].n_bytes;
            }
            snprintf(path, sizeof path, "%s/%s", dir, name);
            rc = hfw_safetensors(path, part, np, err, err_len);
            free(part);
        }
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(idx, "metadata"), "total_size", (double)total);
        if (!rc) rc = write_json(dir, "model.safetensors.index.json", idx, err, err_len);
        cJSON_Delete(idx);
    }
    hfw_tensors_free(ts, nt);

    if (!rc && (o->tokenizer || o->tokenizer_json)) {
        if (o->tokenizer_json) {
            FILE *f = fopen(o->tokenizer_json, "rb");
            char *buf = NULL;
            long len = 0;
            if (f && !fseek(f, 0, SEEK_END) && (len = ftell(f)) > 0 && !fseek(f, 0, SEEK_SET) &&
                (buf = malloc((size_t)len + 1)) && fread(buf, 1, (size_t)len, f) == (size_t)len) {
                buf[len] = 0;
                rc = hfw_text(dir, "tokenizer.json", buf, err, err_len);
            } else {
                rc = fail(err, err_len, "%s: cannot read", o->tokenizer_json);
            }
            free(buf);
            if (f) fclose(f);
        } else {
            cJSON *tj = spm_tokenizer_json(g, err, err_len);
            rc = tj ? write_json(dir, "tokenizer.json", tj, err, err_len) : -1;
            cJSON_Delete(tj);
        }
        cJSON *tc = cJSON_CreateObject();
        char b[256];
        const char *bos = tok_text(g, "tokenizer.ggml.bos_token_id", b, sizeof b);
        if (bos) cJSON_AddStringToObject(tc, "bos_token", bos);
        else cJSON_AddNullToObject(tc, "bos_token");
        const char *eos = tok_text(g, "tokenizer.ggml.eos_token_id", b, sizeof b);
        if (eos) cJSON_AddStringToObject(tc, "eos_token", eos);
        bool add_bos = !o->tokenizer_json;
        const gguf_value *ab = gguf_get(g, "tokenizer.ggml.add_bos_token");
        if (ab && ab->type == GGUF_VT_BOOL) add_bos = ab->v.b;
        cJSON_AddBoolToObject(tc, "add_bos_token", add_bos);
        cJSON_AddBoolToObject(tc, "add_eos_token", 0);
        cJSON_AddBoolToObject(tc, "clean_up_tokenization_spaces", 0);
        gguf_str ct;
        if (!gguf_get_str(g, "tokenizer.chat_template", &ct, NULL, 0)) {
            char *t = strndup(ct.ptr, ct.len);
            cJSON_AddStringToObject(tc, "chat_template", t);
            free(t);
        }
        if (!rc) rc = write_json(dir, "tokenizer_config.json", tc, err, err_len);
        cJSON_Delete(tc);
    }
    hf_map_free(m);
    return rc;
}

/* ==== HF -> GGUF (llama.cpp's conventions) ====================================== */

static bool drop_layout(gguf_str key, const void *user) {
    const char *arch = user;
    char k[128];
    snprintf(k, sizeof k, "%s.rope.layout", arch);
    return gguf_str_eq(key, k);
}

int hfw_gguf_from_hf(const gguf_file *hf, const char *path, char *err, size_t err_len) {
    gguf_str as;
    char arch[64];
    if (gguf_get_str(hf, "general.architecture", &as, err, err_len)) return -1;
    snprintf(arch, sizeof arch, "%.*s", (int)as.len, as.ptr);
    hf_map *m;
    if (hf_map_load(arch, NULL, &m, err, err_len)) return -1;
    FILE *f = fopen(path, "wb");
    if (!f) {
        hf_map_free(m);
        return fail(err, err_len, "%s: %s", path, strerror(errno));
    }
    gguf_writer w = {.f = f};
    uint64_t n = gguf_n_tensors(hf);
    gguf_w_header(&w, hf, n, drop_layout, arch, NULL, 0);
    uint64_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        const gguf_tensor *t = gguf_tensor_at(hf, i);
        gguf_w_tensor_info(&w, t->name, t->n_dims, t->ne, GGML_TYPE_F32, off);
        off = gguf_align_up(off + t->n_elems * 4, GGUF_DEFAULT_ALIGNMENT);
    }
    gguf_w_pad(&w, GGUF_DEFAULT_ALIGNMENT);
    int rc = 0;
    for (uint64_t i = 0; i < n && !rc; i++) {
        const gguf_tensor *t = gguf_tensor_at(hf, i);
        float *v = to_f32(t);
        if (!v) {
            rc = fail(err, err_len, "out of memory");
            break;
        }
        const char *dot = strrchr(t->name, '.');
        char base[200];
        snprintf(base, sizeof base, "%.*s", dot ? (int)(dot - t->name) : (int)strlen(t->name), t->name);
        for (size_t e = 0; e < m->n_tensors; e++) {
            int layer;
            if (!m->tensors[e].permute || !hf_match(m->tensors[e].gguf, base, &layer)) continue;
            int heads = gguf_int(hf, arch, m->tensors[e].permute, gguf_int(hf, arch, "attention.head_count", 1));
            float *p = malloc((size_t)t->n_elems * sizeof *p);
            int64_t rows = t->n_dims == 1 ? t->ne[0] : (int64_t)(t->n_elems / (uint64_t)t->ne[0]);
            size_t rb = t->n_dims == 1 ? 4 : (size_t)t->ne[0] * 4;
            if (!p || hf_permute_rows(v, p, rows, rb, heads, true)) rc = fail(err, err_len, "cannot permute %s", t->name);
            else memcpy(v, p, (size_t)t->n_elems * 4);
            free(p);
        }
        gguf_w_bytes(&w, v, (size_t)t->n_elems * 4);
        gguf_w_pad(&w, GGUF_DEFAULT_ALIGNMENT);
        free(v);
    }
    int werr = w.err;
    if (fclose(f) || werr) rc = rc ? rc : fail(err, err_len, "%s: write failed", path);
    hf_map_free(m);
    return rc;
}

/* ==== GPTQ / AWQ ==================================================================== */

const char *hfw_quant_config(const hfw_quant *q) {
    static char buf[512];
    if (q->format == HFW_AWQ)
        snprintf(buf, sizeof buf, "{\"quant_method\": \"awq\", \"bits\": %d, \"group_size\": %d, \"zero_point\": true, "
                 "\"version\": \"gemm\", \"modules_to_not_convert\": null}", q->bits, q->group_size);
    else
        snprintf(buf, sizeof buf, "{\"quant_method\": \"gptq\", \"bits\": %d, \"group_size\": %d, \"desc_act\": %s, "
                 "\"sym\": %s, \"static_groups\": false, \"true_sequential\": true, \"damp_percent\": 0.01, "
                 "\"checkpoint_format\": \"%s\"}", q->bits, q->group_size, q->act_order ? "true" : "false",
                 q->sym ? "true" : "false", q->format == HFW_GPTQ_V2 ? "gptq_v2" : "gptq");
    return buf;
}

/* Set value v (bits wide) at bit position bit of the little-endian stream of
 * 32-bit words word(k) = w[base + k * stride]. */
static void put_bits(uint32_t *w, uint64_t base, uint64_t stride, uint64_t bit, int bits, uint32_t v) {
    uint64_t k = bit / 32;
    unsigned sh = (unsigned)(bit % 32);
    w[base + k * stride] |= v << sh;
    if (sh + (unsigned)bits > 32) w[base + (k + 1) * stride] |= v >> (32 - sh);
}

static uint64_t rng(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static hfw_tensor *add_part(hfw_tensor **ts, size_t *n, const char *module, const char *part, uint32_t dtype,
                            int64_t d0, int64_t d1, size_t esize) {
    hfw_tensor *nt = realloc(*ts, (*n + 1) * sizeof *nt);
    if (!nt) return NULL;
    *ts = nt;
    hfw_tensor *t = &nt[(*n)++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s.%s", module, part);
    t->dtype = dtype;
    t->n_dims = d1 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->n_bytes = (size_t)d0 * (size_t)(d1 ? d1 : 1) * esize;
    t->data = calloc(1, t->n_bytes ? t->n_bytes : 1);
    return t->data ? t : NULL;
}

int hfw_quantize(const hfw_quant *q, const char *module, const float *W, int n_out, int n_in, hfw_tensor **ts,
                 size_t *n, float *deq, char *err, size_t err_len) {
    int b = q->bits, maxq = (1 << b) - 1;
    int64_t K = n_in, N = n_out, G = q->group_size < 0 ? K : q->group_size, ng = (K + G - 1) / G;
    bool awq = q->format == HFW_AWQ;
    if (awq && (b != 4 || K % G || N % 8)) return fail(err, err_len, "AWQ GEMM: 4 bits, K %% G == 0, N %% 8 == 0");
    if (!awq && ((N * b) % 32 || (K * b) % 32)) return fail(err, err_len, "GPTQ: rows and columns must pack whole words");
    /* groups: contiguous, or (act-order) by the position in a random permutation */
    int32_t *gidx = malloc((size_t)K * sizeof *gidx);
    int64_t *perm = malloc((size_t)K * sizeof *perm);
    for (int64_t k = 0; k < K; k++) perm[k] = k;
    if (q->act_order) {
        uint64_t s = q->seed ? q->seed : 1;
        for (int64_t k = K - 1; k > 0; k--) {
            int64_t j = (int64_t)(rng(&s) % (uint64_t)(k + 1)), t = perm[k];
            perm[k] = perm[j];
            perm[j] = t;
        }
    }
    for (int64_t pos = 0; pos < K; pos++) gidx[perm[pos]] = (int32_t)(pos / G);
    uint16_t *scale = malloc((size_t)(ng * N) * sizeof *scale);
    int *zero = malloc((size_t)(ng * N) * sizeof *zero);
    int *qv = malloc((size_t)(K * N) * sizeof *qv);
    for (int64_t g = 0; g < ng; g++)
        for (int64_t o = 0; o < N; o++) {
            float lo = 0, hi = 0; /* the range includes 0, as AutoGPTQ's quantizer does */
            for (int64_t k = 0; k < K; k++)
                if (gidx[k] == g) {
                    float w = W[o * K + k];
                    if (w < lo) lo = w;
                    if (w > hi) hi = w;
                }
            float s;
            int z;
            if (q->sym && !awq) {
                float amax = fabsf(lo) > hi ? fabsf(lo) : hi;
                s = 2 * amax / (float)maxq;
                z = (maxq + 1) / 2;
            } else {
                s = (hi - lo) / (float)maxq;
                z = s > 0 ? (int)lrintf(-lo / s) : 0;
            }
            if (!(s > 0)) s = 1;
            uint16_t sh = f32_to_f16(s);
            if (!(f16_to_f32(sh) > 0)) sh = f32_to_f16(6.1e-5f);
            /* the stored zero: GPTQ v1 keeps z - 1 (a zero of 0 would wrap, so 1..maxq here) */
            if (q->format == HFW_GPTQ && z < 1) z = 1;
            if (z > maxq) z = maxq;
            scale[g * N + o] = sh;
            zero[g * N + o] = z;
        }
    for (int64_t o = 0; o < N; o++)
        for (int64_t k = 0; k < K; k++) {
            int64_t g = gidx[k];
            float s = f16_to_f32(scale[g * N + o]);
            int z = zero[g * N + o], v = (int)lrintf(W[o * K + k] / s) + z;
            if (v < 0) v = 0;
            if (v > maxq) v = maxq;
            qv[k * N + o] = v;
            deq[o * K + k] = s * (float)(v - z);
        }
    int rc = 0;
    static const int awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    hfw_tensor *tw, *tz, *tsc, *tg = NULL;
    if (awq) {
        tw = add_part(ts, n, module, "qweight", ST_I32, K, N / 8, 4);
        tz = tw ? add_part(ts, n, module, "qzeros", ST_I32, ng, N / 8, 4) : NULL;
        tsc = tz ? add_part(ts, n, module, "scales", ST_F16, ng, N, 2) : NULL;
        if (!tsc) rc = fail(err, err_len, "out of memory");
        else {
            tw = &(*ts)[*n - 3], tz = &(*ts)[*n - 2], tsc = &(*ts)[*n - 1];
            uint32_t *w = tw->data, *zw = tz->data;
            for (int64_t k = 0; k < K; k++)
                for (int64_t c = 0; c < N / 8; c++)
                    for (int i = 0; i < 8; i++) w[k * (N / 8) + c] |= (uint32_t)qv[k * N + c * 8 + awq_order[i]] << (4 * i);
            for (int64_t g = 0; g < ng; g++)
                for (int64_t c = 0; c < N / 8; c++)
                    for (int i = 0; i < 8; i++) zw[g * (N / 8) + c] |= (uint32_t)zero[g * N + c * 8 + awq_order[i]] << (4 * i);
            memcpy(tsc->data, scale, (size_t)(ng * N) * 2);
        }
    } else {
        tw = add_part(ts, n, module, "qweight", ST_I32, K * b / 32, N, 4);
        tz = tw ? add_part(ts, n, module, "qzeros", ST_I32, ng, N * b / 32, 4) : NULL;
        tsc = tz ? add_part(ts, n, module, "scales", ST_F16, ng, N, 2) : NULL;
        tg = tsc ? add_part(ts, n, module, "g_idx", ST_I32, K, 0, 4) : NULL;
        if (!tg) rc = fail(err, err_len, "out of memory");
        else {
            tw = &(*ts)[*n - 4], tz = &(*ts)[*n - 3], tsc = &(*ts)[*n - 2], tg = &(*ts)[*n - 1];
            uint32_t *w = tw->data, *zw = tz->data;
            for (int64_t o = 0; o < N; o++)
                for (int64_t k = 0; k < K; k++) put_bits(w, (uint64_t)o, (uint64_t)N, (uint64_t)(k * b), b, (uint32_t)qv[k * N + o]);
            int off = q->format == HFW_GPTQ ? 1 : 0;
            for (int64_t g = 0; g < ng; g++)
                for (int64_t o = 0; o < N; o++)
                    put_bits(zw, (uint64_t)(g * (N * b / 32)), 1, (uint64_t)(o * b), b,
                             (uint32_t)(zero[g * N + o] - off) & (uint32_t)maxq);
            memcpy(tsc->data, scale, (size_t)(ng * N) * 2);
            memcpy(tg->data, gidx, (size_t)K * 4);
        }
    }
    free(gidx);
    free(perm);
    free(scale);
    free(zero);
    free(qv);
    return rc;
}
