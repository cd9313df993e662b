/*
 * test_gguf_formats.c — the other model-file readers next to the GGUF loader:
 * safetensors (runtime/safetensors) on the shared HF model and on hand-made
 * broken headers, and content-based format detection (runtime/modelfile).
 * Suites: safetensors/, modelfile/.
 */
#include "formats/gguf.h"
#include "formats/modelfile.h"
#include "formats/safetensors.h"
#include "test.h"

#include <stdlib.h>
#include <sys/stat.h>

/* ==== safetensors =========================================================== */

/* 8-byte length + header + data bytes; data is n_data bytes of a pattern. */
static uint8_t *st_image(const char *header, size_t n_data, size_t *n) {
    size_t h = strlen(header);
    *n = 8 + h + n_data;
    uint8_t *p = malloc(*n ? *n : 1);
    uint64_t hl = h;
    memcpy(p, &hl, 8);
    memcpy(p + 8, header, h);
    for (size_t i = 0; i < n_data; i++) p[8 + h + i] = (uint8_t)(i * 13 + 5);
    return p;
}

#define ST_VALID                                                                                       \
    "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"x\\ny\"},"                                        \
    "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"                               \
    "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]},"                               \
    "\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[32,40]},"                                 \
    "\"e\":{\"dtype\":\"U8\",\"shape\":[0,5],\"data_offsets\":[40,40]},"                               \
    "\"f8\":{\"dtype\":\"F8_E4M3\",\"shape\":[3],\"data_offsets\":[40,43]}}    "

TEST(safetensors, valid_header_parsed) {
    size_t n;
    uint8_t *img = st_image(ST_VALID, 43, &n);
    st_file *f = NULL;
    char err[512] = "";
    EXPECT_MSG(st_open_mem(img, n, &f, err, sizeof err) == 0, "%s", err);
    if (f) {
        EXPECT_EQ_I(st_n_tensors(f), 5);
        EXPECT_EQ_I(st_n_meta(f), 2);
        EXPECT_STR_EQ(st_meta_get(f, "format"), "pt");
        EXPECT_STR_EQ(st_meta_get(f, "note"), "x\ny");
        EXPECT(st_meta_get(f, "nope") == NULL);
        EXPECT_EQ_I(st_data_offset(f), 8 + strlen(ST_VALID));
        const st_tensor *w = st_find_tensor(f, "w");
        EXPECT(w && w == st_tensor_at(f, 0));
        if (w) {
            EXPECT_EQ_I(w->dtype, ST_F32);
            EXPECT_EQ_I(w->n_dims, 2);
            EXPECT_EQ_I(w->shape[0], 2);
            EXPECT_EQ_I(w->shape[1], 3);
            EXPECT_EQ_I(w->n_elems, 6);
            EXPECT_EQ_I(w->n_bytes, 24);
            EXPECT(w->data == img + st_data_offset(f));
        }
        const st_tensor *s = st_find_tensor(f, "s");
        EXPECT(s && s->n_dims == 0 && s->n_elems == 1 && s->n_bytes == 8);
        const st_tensor *e = st_find_tensor(f, "e");
        EXPECT(e && e->n_elems == 0 && e->n_bytes == 0);
        const st_tensor *f8 = st_find_tensor(f, "f8");
        EXPECT(f8 && f8->dtype == ST_F8_E4M3 && f8->n_bytes == 3);
        EXPECT(st_find_tensor(f, "x") == NULL);
        EXPECT_STR_EQ(st_dtype_name(ST_BF16), "BF16");
        EXPECT_EQ_I(st_dtype_size(ST_BF16), 2);
    }
    st_close(f);
    st_close(NULL);
    free(img);
}

static const struct {
    const char *header;
    size_t n_data;
    const char *want;
} st_broken[] = {
    {"[1,2]", 0, "does not start with '{'"},
    {"{\"a\":", 0, "malformed"},
    {"{} x", 0, "trailing bytes"},
    {" {}", 0, "does not start with '{'"},
    {"{\"w\":3}", 0, "tensor 'w': expected an object"},
    {"{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'w': missing or non-string \"dtype\""},
    {"{\"w\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'w': unknown dtype \"F33\""},
    {"{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "tensor 'w': missing or non-array \"shape\""},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "shape[0] is not a non-negative integer"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, "shape[0] is not a non-negative integer"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1,2,3,4,5,6,7,8,9],\"data_offsets\":[0,4]}}", 4, "9 dimensions"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4, "overflow"},
    {"{\"w\":{\"dtype\":\"F64\",\"shape\":[2147483648,2147483648],\"data_offsets\":[0,4]}}", 4, "overflows 64 bits"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "[BEGIN, END]"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8, "END < BEGIN"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 4,
     "tensor 'w': data_offsets [4, 8) past end of the data section (4 bytes"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8, "hold 4 bytes, expected 8 (2 elements of F32)"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "tensor 'b': data_offsets [4, 12) overlap tensor 'a' [0, 8)"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "tensor 'a': duplicate name"},
    {"{\"__metadata__\":{\"k\":1}}", 0, "\"__metadata__\" key 'k': expected a string value"},
    {"{\"__metadata__\":[]}", 0, "\"__metadata__\" must appear once"},
};

TEST(safetensors, broken_headers_rejected) {
    for (size_t i = 0; i < sizeof st_broken / sizeof st_broken[0]; i++) {
        size_t n;
        uint8_t *img = st_image(st_broken[i].header, st_broken[i].n_data, &n);
        st_file *f = (st_file *)img;
        char err[512] = "";
        int rc = st_open_mem(img, n, &f, err, sizeof err);
        EXPECT_MSG(rc == ST_EFORMAT, "case %zu: rc %d (%s)", i, rc, err);
        EXPECT(f == NULL);
        EXPECT_MSG(!strncmp(err, "safetensors: ", 13) && !strchr(err, '\n'), "case %zu: %s", i, err);
        EXPECT_MSG(strstr(err, st_broken[i].want), "case %zu: message lacks \"%s\": %s", i, st_broken[i].want, err);
        if (rc == 0) st_close(f);
        free(img);
    }
    /* header length field itself */
    uint8_t tiny[4] = {1, 0, 0, 0};
    st_file *f = NULL;
    char err[256];
    EXPECT_EQ_I(st_open_mem(tiny, 4, &f, err, sizeof err), ST_EFORMAT);
    EXPECT_MSG(strstr(err, "need at least 8"), "%s", err);
    uint8_t big[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
    EXPECT_EQ_I(st_open_mem(big, 16, &f, err, sizeof err), ST_EFORMAT);
    EXPECT_MSG(strstr(err, "header length 9223372036854775807 at offset 0 exceeds the 8 bytes after it"), "%s", err);
}

TEST(safetensors, truncated_at_every_offset) {
    size_t n;
    uint8_t *img = st_image(ST_VALID, 43, &n);
    int bad = 0;
    for (size_t k = 0; k < n; k++) {
        uint8_t *c = malloc(k ? k : 1);
        memcpy(c, img, k);
        st_file *f = NULL;
        char err[512] = "";
        int rc = st_open_mem(c, k, &f, err, sizeof err);
        if (rc != ST_EFORMAT || f || strncmp(err, "safetensors: ", 13) || strchr(err, '\n'))
            if (bad++ < 5) test_fail(__FILE__, __LINE__, "prefix %zu: rc %d, %s", k, rc, err);
        st_close(f);
        free(c);
    }
    EXPECT_EQ_I(bad, 0);
    free(img);
}

/* The shared HF model: config says hidden 128, 2 layers, vocab 2048, ffn 384;
 * SOURCES.md: F32 x20, 656,000 parameters, 2,626,168 bytes. */
TEST(safetensors, tinystories_hf_model) {
    NEED_SHARED(path, "models/tinystories-656k/hf/model.safetensors");
    st_file *f = NULL;
    char err[512] = "";
    EXPECT_MSG(st_open(path, &f, err, sizeof err) == 0, "%s", err);
    if (!f) return;
    EXPECT_EQ_I(st_size(f), 2626168);
    EXPECT_EQ_I(st_n_tensors(f), 20);
    EXPECT_STR_EQ(st_meta_get(f, "format"), "pt");
    uint64_t params = 0, bytes = 0;
    for (uint64_t i = 0; i < st_n_tensors(f); i++) {
        const st_tensor *t = st_tensor_at(f, i);
        EXPECT_EQ_I(t->dtype, ST_F32);
        params += t->n_elems;
        bytes += t->n_bytes;
    }
    EXPECT_EQ_I(params, 656000);
    EXPECT_EQ_I(st_data_offset(f) + bytes, st_size(f)); /* no holes, nothing after */
    const st_tensor *t = st_find_tensor(f, "model.embed_tokens.weight");
    if (!t) t = st_find_tensor(f, "lm_head.weight");
    EXPECT(t && t->n_dims == 2 && t->shape[0] == 2048 && t->shape[1] == 128);
    t = st_find_tensor(f, "model.layers.1.mlp.down_proj.weight");
    EXPECT(t && t->shape[0] == 128 && t->shape[1] == 384);
    t = st_find_tensor(f, "model.norm.weight");
    EXPECT(t && t->n_dims == 1 && t->shape[0] == 128);
    st_close(f);

    EXPECT_EQ_I(st_open("/nonexistent.safetensors", &f, err, sizeof err), ST_EIO);
    EXPECT_MSG(strstr(err, "cannot open '/nonexistent.safetensors'"), "%s", err);
}

/* ==== format detection ====================================================== */

TEST(modelfile, detect_by_content) {
    char err[512];
    EXPECT_EQ_I(modelfile_detect_mem("GGUF\3\0\0\0", 8, 100, err, sizeof err), MODEL_FORMAT_GGUF);
    /* safetensors: header length 0x180 begins with byte 0x80, like a pickle */
    uint8_t st[16] = {0x80, 0x01, 0, 0, 0, 0, 0, 0, '{', '"'};
    EXPECT_EQ_I(modelfile_detect_mem(st, 16, 0x180 + 8 + 100, err, sizeof err), MODEL_FORMAT_SAFETENSORS);
    /* the same bytes in a file too short for that header are not safetensors; 0x80 0x01 is no pickle either */
    EXPECT_EQ_I(modelfile_detect_mem(st, 16, 100, err, sizeof err), MODEL_FORMAT_UNKNOWN);
    EXPECT_EQ_I(modelfile_detect_mem("PK\3\4xxxx", 8, 100, err, sizeof err), MODEL_FORMAT_PICKLE);
    EXPECT_MSG(strstr(err, "zip") && strstr(err, "arbitrary code") && strstr(err, "GGUF") && strstr(err, "safetensors"),
               "%s", err);
    for (uint8_t proto = 2; proto <= 5; proto++) {
        uint8_t pk[4] = {0x80, proto, 'c', 'x'};
        err[0] = 0;
        EXPECT_EQ_I(modelfile_detect_mem(pk, 4, 100, err, sizeof err), MODEL_FORMAT_PICKLE);
        EXPECT_MSG(strstr(err, "pickle") && strstr(err, "arbitrary code") && !strchr(err, '\n'), "%s", err);
    }
    EXPECT_EQ_I(modelfile_detect_mem("\x80\x09", 2, 2, err, sizeof err), MODEL_FORMAT_UNKNOWN);
    EXPECT_EQ_I(modelfile_detect_mem("hello world", 11, 11, err, sizeof err), MODEL_FORMAT_UNKNOWN);
    EXPECT_MSG(strstr(err, "unrecognised format (first bytes 68 65 6c 6c 6f 20 77 6f)"), "%s", err);
    EXPECT_EQ_I(modelfile_detect_mem("", 0, 0, err, sizeof err), MODEL_FORMAT_UNKNOWN);
    EXPECT_MSG(strstr(err, "empty file"), "%s", err);
    EXPECT_STR_EQ(modelfile_format_name(MODEL_FORMAT_PICKLE), "pytorch-pickle");
}

TEST(modelfile, detect_files) {
    char err[512] = "", path[512];
    EXPECT_EQ_I(modelfile_detect("/nonexistent/m.bin", err, sizeof err), MODEL_FORMAT_UNKNOWN);
    EXPECT_MSG(strstr(err, "cannot open '/nonexistent/m.bin'"), "%s", err);
    /* a GGUF named .safetensors is still a GGUF: content, not name */
    snprintf(path, sizeof path, "%s/model.safetensors", test_tmpdir());
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite("GGUF\3\0\0\0", 1, 8, f);
        fclose(f);
    }
    EXPECT_EQ_I(modelfile_detect(path, err, sizeof err), MODEL_FORMAT_GGUF);
    snprintf(path, sizeof path, "%s/pytorch_model.bin", test_tmpdir());
    f = fopen(path, "wb");
    if (f) {
        fwrite("\x80\x02}q\0", 1, 5, f);
        fclose(f);
    }
    EXPECT_EQ_I(modelfile_detect(path, err, sizeof err), MODEL_FORMAT_PICKLE);
    EXPECT_MSG(strstr(err, path) && strstr(err, "arbitrary code"), "%s", err);
    const char *st = shared_path("models/tinystories-656k/hf/model.safetensors");
    if (st) EXPECT_EQ_I(modelfile_detect(st, err, sizeof err), MODEL_FORMAT_SAFETENSORS);
    const char *gg = shared_path("models/stories260K/stories260K.gguf");
    if (gg) EXPECT_EQ_I(modelfile_detect(gg, err, sizeof err), MODEL_FORMAT_GGUF);
}

/* Directories: a Hugging Face folder is one by its config.json; modelfile_open
 * takes GGUF files, folders and a safetensors file inside a folder, and says
 * what to give instead of anything else. */
TEST(modelfile, folders_and_modelfile_open) {
    char err[1024] = "", dir[600], path[700];
    snprintf(dir, sizeof dir, "%s/not-a-checkpoint", test_tmpdir());
    mkdir(dir, 0755);
    EXPECT_EQ_I(modelfile_detect(dir, err, sizeof err), MODEL_FORMAT_UNKNOWN);
    EXPECT_MSG(strstr(err, "is a directory without config.json") && !strchr(err, '\n'), "%s", err);
    gguf_file *g = (gguf_file *)1;
    EXPECT(modelfile_open(dir, &g, err, sizeof err) != 0 && g == NULL);
    EXPECT_MSG(strstr(err, "directory without config.json"), "%s", err);
    /* a safetensors file alone */
    snprintf(path, sizeof path, "%s/w.safetensors", dir);
    size_t n;
    uint8_t *img = st_image("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, &n);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(img, 1, n, f);
        fclose(f);
    }
    free(img);
    EXPECT(modelfile_open(path, &g, err, sizeof err) != 0 && g == NULL);
    EXPECT_MSG(strstr(err, "safetensors file without a config.json next to it"), "%s", err);
    /* with a config.json the directory is a folder (what it holds is hf/'s business) */
    snprintf(path, sizeof path, "%s/config.json", dir);
    f = fopen(path, "wb");
    if (f) {
        fputs("{}", f);
        fclose(f);
    }
    EXPECT_EQ_I(modelfile_detect(dir, err, sizeof err), MODEL_FORMAT_HF_FOLDER);
    EXPECT_STR_EQ(modelfile_format_name(MODEL_FORMAT_HF_FOLDER), "hf-folder");
    EXPECT(modelfile_open(dir, &g, err, sizeof err) != 0 && g == NULL);
    EXPECT_MSG(!strncmp(err, "hf: ", 4) && strstr(err, "\"architectures\""), "%s", err);
    const char *gg = shared_path("models/stories260K/stories260K.gguf");
    if (gg) {
        EXPECT_MSG(modelfile_open(gg, &g, err, sizeof err) == 0, "%s", err);
        gguf_close(g);
    }
}

/* ==== GGUF files assembled from parts ========================================== */

static int released;
static void count_release(void *p) { released += p == (void *)&released; }

/* A header image with two F32 tensors, offsets 0 and 32 of a virtual data section. */
static size_t parts_image(uint8_t *b, int64_t ne1, uint64_t off1, bool pad) {
    size_t n = 0;
#define PUT(p, k) (memcpy(b + n, (p), (k)), n += (k))
    uint32_t u32;
    uint64_t u64;
    PUT("GGUF", 4);
    u32 = 3, PUT(&u32, 4);
    u64 = 2, PUT(&u64, 8);
    u64 = 0, PUT(&u64, 8);
    const char *names[2] = {"a", "b"};
    int64_t ne[2] = {4, ne1};
    uint64_t offs[2] = {0, off1};
    for (int i = 0; i < 2; i++) {
        u64 = 1, PUT(&u64, 8);
        PUT(names[i], 1);
        u32 = 1, PUT(&u32, 4);
        u64 = (uint64_t)ne[i], PUT(&u64, 8);
        u32 = 0, PUT(&u32, 4); /* F32 */
        PUT(&offs[i], 8);
    }
    while (pad && n % 32) b[n++] = 0;
#undef PUT
    return n;
}

TEST(gguf_parts, data_elsewhere_validated_like_a_file) {
    uint8_t img[256];
    float a[4] = {1, 2, 3, 4}, bdat[8] = {5, 6, 7, 8, 9, 10, 11, 12};
    const void *data[2] = {a, bdat};
    char err[512];
    gguf_file *g = NULL;
    size_t n = parts_image(img, 8, 32, true);
    released = 0;
    gguf_parts p = {.data = data, .n_data = 2, .data_bytes = 64, .release = count_release, .owner = &released};
    EXPECT_MSG(gguf_open_parts(img, n, &p, &g, err, sizeof err) == 0, "%s", err);
    if (g) {
        EXPECT(gguf_find_tensor(g, "a")->data == a && gguf_find_tensor(g, "b")->data == bdat);
        EXPECT_EQ_I(gguf_size(g), n + 64);
        EXPECT_EQ_I(gguf_data_offset(g), n);
        uint64_t dev, ino;
        EXPECT(gguf_file_id(g, &dev, &ino) != 0);
        /* no region given: the data is not a file mapping, advice is refused */
        EXPECT(gguf_populate(g, a, sizeof a) != 0 && gguf_release_pages(g, a, sizeof a) != 0);
    }
    gguf_close(g);
    EXPECT_EQ_I(released, 1);
    static const struct {
        int64_t ne1;
        uint64_t off1, data_bytes, n_data;
        bool pad;
        const char *want;
    } bad[] = {
        {8, 32, 60, 2, true, "bytes past end of file"},
        {8, 0, 64, 2, true, "data [0, 32) overlaps tensor 'a' [0, 16)"},
        {8, 33, 96, 2, true, "not a multiple of the alignment"},
        {8, 32, 64, 1, true, "2 tensors in the image, 1 data pointers"},
        {8, 32, 64, 2, false, "inside the padding to the data section"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        n = parts_image(img, bad[i].ne1, bad[i].off1, bad[i].pad);
        released = 0;
        p = (gguf_parts){.data = data, .n_data = bad[i].n_data, .data_bytes = bad[i].data_bytes,
                         .release = count_release, .owner = &released};
        g = (gguf_file *)img;
        int rc = gguf_open_parts(img, n, &p, &g, err, sizeof err);
        EXPECT_MSG(rc == GGUF_EFORMAT && g == NULL, "case %zu: rc %d", i, rc);
        EXPECT_MSG(strstr(err, bad[i].want) && !strncmp(err, "gguf: ", 6), "case %zu: %s", i, err);
        EXPECT_MSG(released == 1, "case %zu: owner released %d times", i, released);
    }
    /* data not aligned for its type */
    n = parts_image(img, 8, 32, true);
    const void *mis[2] = {(const char *)a + 1, bdat};
    released = 0;
    p = (gguf_parts){.data = mis, .n_data = 2, .data_bytes = 64, .release = count_release, .owner = &released};
    EXPECT(gguf_open_parts(img, n, &p, &g, err, sizeof err) == GGUF_EFORMAT && released == 1);
    EXPECT_MSG(strstr(err, "tensor 'a': data at address") && strstr(err, "not aligned to 4 bytes"), "%s", err);
}
