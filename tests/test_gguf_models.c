/*
 * test_gguf_models.c — the GGUF loader on every real file in ../shared,
 * cross-checked against sources that do not share its code:
 *   - a deliberately naive second GGUF reader written below (sequential,
 *     skips values, its own type-size table);
 *   - models/synthetic/synth-d256.manifest.json (per file: size,
 *     general.file_type, the type and shape of every tensor, as llama.cpp's
 *     gguf-py read them back);
 *   - models/arch/manifest.json (mkmodel's log: tensor and parameter counts,
 *     file size; metadata keys with types and values; tensor names/types/shapes);
 *   - models/chat/manifest.json (mkmodel's log);
 *   - models/SOURCES.md facts for the downloaded models (written out here).
 * Skips when ../shared is absent.
 */
#include "formats/gguf.h"
#include "test.h"

#include <cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>

/* ==== collect every .gguf under a directory ================================ */

typedef struct {
    char **v;
    size_t n, cap;
} strlist;

static void sl_push(strlist *l, const char *s) {
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        if (!l->v) abort();
    }
    l->v[l->n++] = strdup(s);
}

static void sl_free(strlist *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
}

static void find_gguf(const char *dir, strlist *out) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[2048];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(p, &st) != 0) continue;
        size_t n = strlen(e->d_name);
        if (S_ISDIR(st.st_mode)) find_gguf(p, out);
        else if (n > 5 && !strcmp(e->d_name + n - 5, ".gguf")) sl_push(out, p);
    }
    closedir(d);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* All .gguf files under models/ and vocab/llama.cpp/, sorted. */
static strlist all_shared_gguf(void) {
    strlist l = {0};
    const char *m = shared_path("models");
    if (m) find_gguf(m, &l);
    const char *v = shared_path("vocab/llama.cpp");
    if (v) find_gguf(v, &l);
    if (l.n) qsort(l.v, l.n, sizeof *l.v, cmp_str);
    return l;
}

/* ==== a naive second reader ================================================= */

typedef struct {
    char name[256];
    uint32_t type, n_dims;
    uint64_t ne[4];
    uint64_t offset;
} mini_tensor;

typedef struct {
    uint32_t version;
    uint64_t n_kv, n_tensors, alignment, data_offset, n_params;
    char arch[64];
    mini_tensor *t;
} mini_gguf;

typedef struct {
    const uint8_t *p;
    size_t n, o;
    bool bad;
} cur;

static uint64_t take(cur *c, size_t k) {
    uint64_t v = 0;
    if (c->o + k > c->n) {
        c->bad = true;
        c->o = c->n;
        return 0;
    }
    memcpy(&v, c->p + c->o, k); /* little-endian host */
    c->o += k;
    return v;
}

static void skip_value(cur *c, uint32_t t) {
    static const size_t sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (c->bad || t > 12) {
        c->bad = true;
        return;
    }
    if (t == 8) {
        uint64_t n = take(c, 8);
        if (n > c->n - c->o) c->bad = true;
        else c->o += n;
    } else if (t == 9) {
        uint32_t et = (uint32_t)take(c, 4);
        uint64_t n = take(c, 8);
        for (uint64_t i = 0; i < n && !c->bad; i++) skip_value(c, et);
    } else {
        take(c, sz[t]);
    }
}

static bool mini_read(const uint8_t *p, size_t n, mini_gguf *m) {
    memset(m, 0, sizeof *m);
    cur c = {p, n, 0, false};
    if (n < 24 || memcmp(p, "GGUF", 4)) return false;
    c.o = 4;
    m->version = (uint32_t)take(&c, 4);
    m->n_tensors = take(&c, 8);
    m->n_kv = take(&c, 8);
    m->alignment = 32;
    for (uint64_t i = 0; i < m->n_kv && !c.bad; i++) {
        uint64_t kl = take(&c, 8);
        if (kl > c.n - c.o) return false;
        const char *key = (const char *)p + c.o;
        c.o += kl;
        uint32_t t = (uint32_t)take(&c, 4);
        if (kl == 20 && !memcmp(key, "general.architecture", 20) && t == 8) {
            uint64_t sl = take(&c, 8);
            if (sl >= sizeof m->arch || sl > c.n - c.o) return false;
            memcpy(m->arch, p + c.o, sl);
            c.o += sl;
        } else if (kl == 17 && !memcmp(key, "general.alignment", 17) && t == 4) {
            m->alignment = take(&c, 4);
        } else {
            skip_value(&c, t);
        }
    }
    if (c.bad || m->n_tensors > 100000) return false;
    m->t = calloc(m->n_tensors + 1, sizeof *m->t);
    for (uint64_t i = 0; i < m->n_tensors && !c.bad; i++) {
        mini_tensor *t = &m->t[i];
        uint64_t nl = take(&c, 8);
        if (nl >= sizeof t->name || nl > c.n - c.o) return false;
        memcpy(t->name, p + c.o, nl);
        c.o += nl;
        t->n_dims = (uint32_t)take(&c, 4);
        if (t->n_dims > 4) return false;
        uint64_t ne = 1;
        for (uint32_t d = 0; d < 4; d++) t->ne[d] = d < t->n_dims ? take(&c, 8) : 1;
        for (uint32_t d = 0; d < 4; d++) ne *= t->ne[d];
        m->n_params += ne;
        t->type = (uint32_t)take(&c, 4);
        t->offset = take(&c, 8);
    }
    m->data_offset = (c.o + m->alignment - 1) / m->alignment * m->alignment;
    if (m->data_offset > n) m->data_offset = n;
    return !c.bad;
}

/* Bytes of a tensor from its own little table: {id, block, bytes per block}. */
static uint64_t mini_bytes(const mini_tensor *t) {
    static const uint32_t tab[][3] = {
        {0, 1, 4}, {1, 1, 2}, {2, 32, 18}, {3, 32, 20}, {6, 32, 22}, {7, 32, 24}, {8, 32, 34},
        {10, 256, 84}, {11, 256, 110}, {12, 256, 144}, {13, 256, 176}, {14, 256, 210},
        {16, 256, 66}, {17, 256, 74}, {18, 256, 98}, {19, 256, 50}, {20, 32, 18}, {21, 256, 110},
        {22, 256, 82}, {23, 256, 136}, {29, 256, 56}, {30, 1, 2}, {34, 256, 54}, {35, 256, 66},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (tab[i][0] == t->type) return t->ne[0] / tab[i][1] * tab[i][2] * t->ne[1] * t->ne[2] * t->ne[3];
    return 0;
}

/* ==== every file ============================================================ */

TEST(gguf_models, every_shared_gguf_matches_independent_reader) {
    NEED_SHARED(models, "models");
    (void)models;
    strlist files = all_shared_gguf();
    EXPECT_MSG(files.n >= 50, "found only %zu .gguf files under ../shared", files.n);
    for (size_t f = 0; f < files.n; f++) {
        const char *path = files.v[f];
        size_t n = 0;
        char *img = read_file(path, &n);
        mini_gguf m;
        bool ok = img && mini_read((const uint8_t *)img, n, &m);
        EXPECT_MSG(ok, "%s: the naive reader failed", path);
        gguf_file *g = NULL;
        char err[512] = "";
        int rc = gguf_open(path, &g, err, sizeof err);
        EXPECT_MSG(rc == 0, "%s: %s", path, err);
        if (ok && rc == 0) {
            EXPECT_EQ_I(gguf_version(g), m.version);
            EXPECT_EQ_I(gguf_n_kv(g), m.n_kv);
            EXPECT_EQ_I(gguf_n_tensors(g), m.n_tensors);
            EXPECT_EQ_I(gguf_alignment(g), m.alignment);
            EXPECT_EQ_I(gguf_data_offset(g), m.data_offset);
            EXPECT_EQ_I(gguf_size(g), n);
            gguf_str arch = {0, ""};
            if (m.arch[0]) {
                EXPECT_EQ_I(gguf_get_str(g, "general.architecture", &arch, err, sizeof err), 0);
                EXPECT_MSG(gguf_str_eq(arch, m.arch), "%s: architecture", path);
            }
            uint64_t params = 0, bytes = 0;
            for (uint64_t i = 0; i < m.n_tensors; i++) {
                const gguf_tensor *t = gguf_tensor_at(g, i);
                const mini_tensor *mt = &m.t[i];
                EXPECT_STR_EQ(t->name, mt->name);
                EXPECT_MSG(gguf_find_tensor(g, mt->name) == t, "%s: lookup of %s", path, mt->name);
                EXPECT_EQ_I(t->type, mt->type);
                EXPECT_EQ_I(t->n_dims, mt->n_dims);
                for (int d = 0; d < 4; d++) EXPECT_EQ_I(t->ne[d], mt->ne[d]);
                EXPECT_EQ_I(t->offset, mt->offset);
                EXPECT_EQ_I(t->n_bytes, mini_bytes(mt));
                EXPECT(t->data == (const uint8_t *)gguf_base(g) + m.data_offset + mt->offset);
                params += t->n_elems;
                bytes += t->n_bytes;
            }
            EXPECT_EQ_I(params, m.n_params);
            /* Files written by llama.cpp/mkmodel end exactly at the last tensor (+ padding). */
            if (m.n_tensors) EXPECT_MSG(m.data_offset + bytes <= n, "%s: %llu tensor bytes after %llu",
                                        path, (unsigned long long)bytes, (unsigned long long)m.data_offset);
        }
        gguf_close(g);
        free(m.t);
        free(img);
    }
    sl_free(&files);
}

/* ==== manifests ============================================================= */

static const char *json_str(const cJSON *o, const char *k) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(x) ? x->valuestring : NULL;
}

TEST(gguf_models, synthetic_manifest_types_and_shapes) {
    NEED_SHARED(mpath, "models/synthetic/synth-d256.manifest.json");
    cJSON *man = read_json(mpath);
    EXPECT(man != NULL);
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(man, "files");
    int n_files = 0;
    const cJSON *fe;
    cJSON_ArrayForEach(fe, files) {
        char rel[512];
        snprintf(rel, sizeof rel, "models/synthetic/%s", json_str(fe, "file"));
        const char *path = shared_path(rel);
        EXPECT_MSG(path, "%s missing", rel);
        if (!path) continue;
        n_files++;
        gguf_file *g = NULL;
        char err[512] = "";
        EXPECT_MSG(gguf_open(path, &g, err, sizeof err) == 0, "%s: %s", rel, err);
        if (!g) continue;
        EXPECT_EQ_I(gguf_size(g), cJSON_GetObjectItemCaseSensitive(fe, "size")->valuedouble);
        uint32_t ft = 0;
        EXPECT_EQ_I(gguf_get_u32(g, "general.file_type", &ft, err, sizeof err), 0);
        EXPECT_EQ_I(ft, cJSON_GetObjectItemCaseSensitive(fe, "general_file_type")->valuedouble);
        /* every tensor's type and shape */
        const cJSON *types = cJSON_GetObjectItemCaseSensitive(fe, "tensors");
        const cJSON *shapes = cJSON_GetObjectItemCaseSensitive(fe, "shapes");
        EXPECT_EQ_I(gguf_n_tensors(g), cJSON_GetArraySize(types));
        const cJSON *te;
        cJSON_ArrayForEach(te, types) {
            const gguf_tensor *t = gguf_find_tensor(g, te->string);
            EXPECT_MSG(t, "%s: tensor %s missing", rel, te->string);
            if (!t) continue;
            EXPECT_MSG(!strcmp(ggml_type_name(t->type), te->valuestring), "%s: %s is %s, manifest says %s", rel,
                       t->name, ggml_type_name(t->type), te->valuestring);
            const cJSON *sh = cJSON_GetObjectItemCaseSensitive(shapes, te->string);
            EXPECT_EQ_I(t->n_dims, cJSON_GetArraySize(sh));
            int d = 0;
            const cJSON *x;
            cJSON_ArrayForEach(x, sh) EXPECT_EQ_I(t->ne[d++], x->valuedouble);
        }
        /* the type histogram */
        const cJSON *counts = cJSON_GetObjectItemCaseSensitive(fe, "tensor_type_counts");
        const cJSON *ce;
        cJSON_ArrayForEach(ce, counts) {
            int k = 0;
            for (uint64_t i = 0; i < gguf_n_tensors(g); i++)
                k += !strcmp(ggml_type_name(gguf_tensor_at(g, i)->type), ce->string);
            EXPECT_MSG(k == ce->valueint, "%s: %d tensors of %s, manifest says %d", rel, k, ce->string, ce->valueint);
        }
        /* README: 3,279,104 parameters in every file */
        uint64_t params = 0;
        for (uint64_t i = 0; i < gguf_n_tensors(g); i++) params += gguf_tensor_at(g, i)->n_elems;
        EXPECT_EQ_I(params, 3279104);
        gguf_close(g);
    }
    EXPECT_EQ_I(n_files, 30);
    cJSON_Delete(man);
}

/* "..., 49 tensors, 644368 params, 2592896 bytes" from an mkmodel log line. */
static bool parse_log(const char *log, uint64_t *n_tensors, uint64_t *n_params, uint64_t *n_bytes) {
    const char *p = log ? strstr(log, " tensors, ") : NULL;
    if (!p) return false;
    while (p > log && p[-1] != ' ') p--;
    unsigned long long a, b, c;
    if (sscanf(p, "%llu tensors, %llu params, %llu bytes", &a, &b, &c) != 3) return false;
    *n_tensors = a, *n_params = b, *n_bytes = c;
    return true;
}

static void check_log(const char *rel, const char *log) {
    const char *path = shared_path(rel);
    EXPECT_MSG(path, "%s missing", rel);
    if (!path) return;
    uint64_t nt, np, nb;
    EXPECT_MSG(parse_log(log, &nt, &np, &nb), "%s: cannot parse mkmodel log", rel);
    gguf_file *g = NULL;
    char err[512] = "";
    EXPECT_MSG(gguf_open(path, &g, err, sizeof err) == 0, "%s: %s", rel, err);
    if (!g) return;
    uint64_t params = 0;
    for (uint64_t i = 0; i < gguf_n_tensors(g); i++) params += gguf_tensor_at(g, i)->n_elems;
    EXPECT_MSG(gguf_n_tensors(g) == nt, "%s: %llu tensors, log says %llu", rel,
               (unsigned long long)gguf_n_tensors(g), (unsigned long long)nt);
    EXPECT_MSG(params == np, "%s: %llu params, log says %llu", rel, (unsigned long long)params,
               (unsigned long long)np);
    EXPECT_EQ_I(gguf_size(g), nb);
    gguf_close(g);
}

TEST(gguf_models, arch_manifest_keys_tensors_counts) {
    NEED_SHARED(mpath, "models/arch/manifest.json");
    cJSON *man = read_json(mpath);
    EXPECT(man != NULL);
    int n = 0;
    const cJSON *ae;
    cJSON_ArrayForEach(ae, man) {
        n++;
        const char *model = json_str(ae, "model"); /* "shared/models/arch/x.gguf" */
        EXPECT(model && !strncmp(model, "shared/", 7));
        if (!model) continue;
        char rel[512];
        snprintf(rel, sizeof rel, "%s", model + 7);
        check_log(rel, json_str(ae, "mkmodel_log"));
        const char *path = shared_path(rel);
        gguf_file *g = NULL;
        char err[512] = "";
        if (!path || gguf_open(path, &g, err, sizeof err)) continue;
        const cJSON *gg = cJSON_GetObjectItemCaseSensitive(ae, "gguf");
        const cJSON *kv;
        cJSON_ArrayForEach(kv, cJSON_GetObjectItemCaseSensitive(gg, "keys")) {
            const char *key = cJSON_GetArrayItem(kv, 0)->valuestring;
            const char *ty = cJSON_GetArrayItem(kv, 1)->valuestring;
            const cJSON *val = cJSON_GetArrayItem(kv, 2);
            const gguf_value *v = gguf_get(g, key);
            EXPECT_MSG(v, "%s: key %s missing", rel, key);
            if (!v) continue;
            EXPECT_MSG(!strcmp(gguf_vtype_name(v->type), ty), "%s: %s is %s, manifest says %s", rel, key,
                       gguf_vtype_name(v->type), ty);
            if (v->type == GGUF_VT_STRING) EXPECT_MSG(gguf_str_eq(v->v.str, val->valuestring), "%s: %s", rel, key);
            else if (v->type == GGUF_VT_UINT32) EXPECT_EQ_I(v->v.u64, val->valuedouble);
            else if (v->type == GGUF_VT_FLOAT32) EXPECT_NEAR(v->v.f64, val->valuedouble, 1e-6 * (1 + val->valuedouble));
            else if (v->type == GGUF_VT_BOOL) EXPECT_EQ_I(v->v.b, cJSON_IsTrue(val));
        }
        const cJSON *te;
        cJSON_ArrayForEach(te, cJSON_GetObjectItemCaseSensitive(gg, "tensors")) {
            const char *name = cJSON_GetArrayItem(te, 0)->valuestring;
            const gguf_tensor *t = gguf_find_tensor(g, name);
            EXPECT_MSG(t, "%s: tensor %s missing", rel, name);
            if (!t) continue;
            EXPECT_STR_EQ(ggml_type_name(t->type), cJSON_GetArrayItem(te, 1)->valuestring);
            const cJSON *sh = cJSON_GetArrayItem(te, 2);
            EXPECT_EQ_I(t->n_dims, cJSON_GetArraySize(sh));
            int d = 0;
            const cJSON *x;
            cJSON_ArrayForEach(x, sh) EXPECT_EQ_I(t->ne[d++], x->valuedouble);
        }
        gguf_close(g);
    }
    EXPECT_EQ_I(n, 14);
    cJSON_Delete(man);
}

TEST(gguf_models, chat_manifest_counts) {
    NEED_SHARED(mpath, "models/chat/manifest.json");
    cJSON *man = read_json(mpath);
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(man, "qwen3-chat");
    EXPECT(q != NULL);
    check_log("models/chat/qwen3-chat.gguf", json_str(q, "mkmodel_log"));
    /* the real Qwen3 tokenizer: 151,936 tokens (mkmodel log "vocab=151936") */
    const char *path = shared_path("models/chat/qwen3-chat.gguf");
    gguf_file *g = NULL;
    char err[512] = "";
    if (path && gguf_open(path, &g, err, sizeof err) == 0) {
        const gguf_value *a;
        EXPECT_EQ_I(gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_VT_STRING, &a, err, sizeof err), 0);
        EXPECT_EQ_I(a->v.arr.n, 151936);
        EXPECT(strstr(json_str(q, "mkmodel_log"), "vocab=151936") != NULL);
    }
    gguf_close(g);
    cJSON_Delete(man);
}

/* models/SOURCES.md, section 1 (written out by hand). */
TEST(gguf_models, sources_md_facts) {
    static const struct {
        const char *rel, *arch;
        uint64_t n_tensors, n_kv, n_params, size;
        int file_type; /* -1: key absent */
        struct { const char *type; int n; } types[3];
    } facts[] = {
        {"models/stories260K/stories260K.gguf", "llama", 48, 19, 292800, 1185376, -1, {{"F32", 48}}},
        {"models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf", "llama", 20, 34, 656000, 749728, 7,
         {{"Q8_0", 15}, {"F32", 5}}},
        {"models/tinystories-656k/gguf/TinyStories-656K-Q2_K.gguf", "llama", 20, 34, 656000, 553120, 10,
         {{"IQ4_NL", 14}, {"Q8_0", 1}, {"F32", 5}}},
    };
    for (size_t i = 0; i < sizeof facts / sizeof facts[0]; i++) {
        const char *path = shared_path(facts[i].rel);
        if (!path) SKIP("%s/%s absent", shared_root(), facts[i].rel);
        gguf_file *g = NULL;
        char err[512] = "";
        EXPECT_MSG(gguf_open(path, &g, err, sizeof err) == 0, "%s", err);
        if (!g) continue;
        EXPECT_EQ_I(gguf_version(g), 3);
        EXPECT_EQ_I(gguf_n_tensors(g), facts[i].n_tensors);
        EXPECT_EQ_I(gguf_n_kv(g), facts[i].n_kv);
        EXPECT_EQ_I(gguf_size(g), facts[i].size);
        gguf_str a;
        EXPECT_EQ_I(gguf_get_str(g, "general.architecture", &a, err, sizeof err), 0);
        EXPECT(gguf_str_eq(a, facts[i].arch));
        uint32_t ft;
        int rc = gguf_get_u32(g, "general.file_type", &ft, err, sizeof err);
        if (facts[i].file_type < 0) EXPECT_EQ_I(rc, GGUF_ENOTFOUND);
        else EXPECT_EQ_I(ft, facts[i].file_type);
        uint64_t params = 0;
        for (uint64_t k = 0; k < gguf_n_tensors(g); k++) params += gguf_tensor_at(g, k)->n_elems;
        EXPECT_EQ_I(params, facts[i].n_params);
        for (int t = 0; t < 3 && facts[i].types[t].type; t++) {
            int k = 0;
            for (uint64_t j = 0; j < gguf_n_tensors(g); j++)
                k += !strcmp(ggml_type_name(gguf_tensor_at(g, j)->type), facts[i].types[t].type);
            EXPECT_MSG(k == facts[i].types[t].n, "%s: %d %s tensors, expected %d", facts[i].rel, k,
                       facts[i].types[t].type, facts[i].types[t].n);
        }
        /* stories260K: 512-token SentencePiece vocabulary, BOS 1, EOS 2 */
        if (i == 0) {
            const gguf_value *tok;
            uint32_t bos = 0, eos = 0;
            EXPECT_EQ_I(gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_VT_STRING, &tok, err, sizeof err), 0);
            EXPECT_EQ_I(tok->v.arr.n, 512);
            EXPECT(gguf_str_eq(tok->v.arr.strs[3], "<0x00>"));
            EXPECT_EQ_I(gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &bos, err, sizeof err), 0);
            EXPECT_EQ_I(gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &eos, err, sizeof err), 0);
            EXPECT_EQ_I(bos, 1);
            EXPECT_EQ_I(eos, 2);
        }
        gguf_close(g);
    }
}

/* Every file, mutated at a few hundred offsets (bytes flipped in the header,
 * metadata and tensor table): whatever the loader says, it must say it in one
 * line and never crash (ASan/UBSan run this). */
TEST(gguf_models, corrupted_real_headers_never_crash) {
    NEED_SHARED(p, "models/stories260K/stories260K.gguf");
    const char *files[] = {p, shared_path("models/tinystories-656k/gguf/TinyStories-656K-Q2_K.gguf"),
                           shared_path("vocab/llama.cpp/ggml-vocab-gpt-2.gguf")};
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        if (!files[f]) continue;
        size_t n = 0;
        uint8_t *img = (uint8_t *)read_file(files[f], &n);
        if (!img) continue;
        gguf_file *g0 = NULL;
        char err[512];
        gguf_open_mem(img, n, &g0, err, sizeof err);
        size_t hdr = g0 ? (size_t)gguf_data_offset(g0) : n;
        gguf_close(g0);
        uint8_t *copy = malloc(n);
        for (int it = 0; it < 300; it++) {
            memcpy(copy, img, n);
            for (int k = 0; k < 1 + it % 4; k++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                size_t at = (size_t)(seed >> 33) % hdr;
                copy[at] = (uint8_t)(seed >> 13);
            }
            gguf_file *g = NULL;
            err[0] = 0;
            int rc = gguf_open_mem(copy, n, &g, err, sizeof err);
            if (rc) EXPECT_MSG(!strncmp(err, "gguf: ", 6) && !strchr(err, '\n'), "%s", err);
            else EXPECT(g != NULL);
            gguf_close(g);
        }
        free(copy);
        free(img);
    }
}
