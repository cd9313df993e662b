/*
 * bench_tok.c — tokenizer throughput on 1 MB of mixed text (English prose,
 * code, CJK, Korean, emoji with ZWJ sequences, numbers), deterministic.
 *
 * Built two ways:
 *  - `make bench-tok` (gcc -O2, not sanitized): a program that times
 *    tok_encode and streaming decode for each vocabulary given (default: the
 *    ../shared Llama 3 tokenizer.json (128k), qwen3-chat.gguf (151k), the
 *    llama-spm vocab) and prints MB/s — best of 5 runs, after a warm-up.
 *  - inside the test runner (CINFER_TEST_BUILD): test tok/bench_text_roundtrip
 *    encodes 64 KB of the same text and checks the stream gives it back; no
 *    timing (sanitized builds are not benchmarks).
 *
 *   build/bench_tok [VOCAB.gguf|tokenizer.json]...
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "formats/gguf.h"
#include "text/tok.h"

static const char *const snippets[] = {
    "The quick brown fox jumps over the lazy dog. ",
    "It was the best of times, it was the worst of times; it was the age of wisdom. ",
    "Tokenizers split text into pieces, and merges glue the pieces back into tokens. ",
    "She said: \"I'll be there at 10:30, don't wait!\" — and he replied, \"We've got time.\" ",
    "\n\nIn 2024, the revenue grew by 13.7% to $4,182,000 (up from $3,678,512).\n",
    "int main(int argc, char **argv) {\n    for (int i = 0; i < argc; i++) printf(\"%s\\n\", argv[i]);\n    return 0;\n}\n",
    "def add(a, b):\n    \"\"\"Return a + b.\"\"\"\n    return a + b  # ✓\n\nprint(add(2, 3))\n",
    "    if (x->next != NULL && x->len >= 0x7fff) { x = x->next; } else { break; }\n",
    "const result = items.filter(i => i.score > 0.5).map(i => `${i.name}: ${i.score}`);\n",
    "日本語のテキストは、漢字とひらがなとカタカナで書かれています。",
    "我想在苹果公司工作，因为他们的产品设计非常出色。今天天气很好。",
    "한국어 문장도 토크나이저가 잘 처리해야 합니다. ",
    "🦙🚀👩‍💻 emoji 😶‍🌫️ and flags 🇫🇷🇯🇵 and skin tones 👍🏽 ",
    "Ünïcödé àccents, naïve café, Führer, Straße, œuvre, Ελληνικά, русский текст. ",
    "\t\tTabs\tand   multiple    spaces   \n   and trailing whitespace   \n",
    "<html><body class=\"main\"><p>Hello &amp; welcome</p></body></html>\n",
    "SELECT name, COUNT(*) FROM users WHERE age > 21 GROUP BY name ORDER BY 2 DESC;\n",
    "3.14159265358979323846264338327950288419716939937510582097494459230781640628\n",
};

/* Deterministic mixed text of exactly n bytes (cut at a snippet boundary, then padded with spaces). */
static char *make_text(size_t n) {
    char *t = malloc(n + 1);
    if (!t) return NULL;
    size_t o = 0;
    uint64_t r = 0x9E3779B97F4A7C15ull;
    size_t ns = sizeof snippets / sizeof snippets[0];
    for (;;) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        const char *s = snippets[(r >> 33) % ns];
        size_t l = strlen(s);
        if (o + l + 16 > n) break;
        memcpy(t + o, s, l);
        o += l;
        if ((r >> 20) % 4 == 0) o += (size_t)snprintf(t + o, n - o, "%u ", (unsigned)(r >> 40) % 100000);
    }
    while (o < n) t[o++] = ' ';
    t[n] = 0;
    return t;
}

static int load_any(const char *path, tok_vocab **v, gguf_file **g, char *err, size_t err_len) {
    *g = NULL;
    size_t l = strlen(path);
    if (l > 5 && !strcmp(path + l - 5, ".json")) return tok_load_hf_json(path, v, err, err_len);
    if (gguf_open(path, g, err, err_len)) return -1;
    return tok_load_gguf(*g, v, err, err_len);
}

#ifdef CINFER_TEST_BUILD
#include "test.h"

TEST(tok, bench_text_roundtrip) {
    NEED_SHARED(p, "models/chat/qwen3-chat.gguf");
    char err[512];
    tok_vocab *v;
    gguf_file *g;
    if (load_any(p, &v, &g, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s", err);
        gguf_close(g);
        return;
    }
    size_t n = 64 * 1024, cap = tok_encode_max(n), n_ids;
    char *text = make_text(n);
    int32_t *ids = malloc(cap * sizeof *ids);
    EXPECT_EQ_I(tok_encode(v, text, n, false, false, ids, cap, &n_ids), 0);
    EXPECT(n_ids > n / 8 && n_ids < n / 2);
    tok_stream *s;
    EXPECT_EQ_I(tok_stream_new(v, 0, &s), 0);
    char *back = malloc(n + 1);
    size_t nb = 0;
    for (size_t i = 0; i < n_ids; i++) {
        size_t l;
        const char *o = tok_stream_put(s, ids[i], &l);
        if (nb + l <= n) memcpy(back + nb, o, l);
        nb += l;
    }
    EXPECT_EQ_I(nb, n);
    EXPECT(nb == n && memcmp(back, text, n) == 0);
    tok_stream_free(s);
    free(back);
    free(ids);
    free(text);
    tok_free(v);
    gguf_close(g);
}

#else

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void bench(const char *path, const char *text, size_t n) {
    char err[512];
    tok_vocab *v = NULL;
    gguf_file *g = NULL;
    double t0 = now_s();
    if (load_any(path, &v, &g, err, sizeof err)) {
        printf("%-60s load failed: %s\n", path, err);
        gguf_close(g);
        return;
    }
    double t_load = now_s() - t0;
    size_t cap = tok_encode_max(n), n_ids = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    double best = 1e30;
    for (int r = 0; r < 6; r++) { /* run 0 warms up */
        t0 = now_s();
        if (tok_encode(v, text, n, false, false, ids, cap, &n_ids)) {
            printf("%s: encode failed\n", path);
            break;
        }
        double t = now_s() - t0;
        if (r && t < best) best = t;
    }
    tok_stream *s;
    double best_dec = 1e30;
    size_t out = 0;
    if (!tok_stream_new(v, TOK_TEXT_START, &s)) {
        for (int r = 0; r < 3; r++) {
            tok_stream_reset(s);
            out = 0;
            t0 = now_s();
            for (size_t i = 0; i < n_ids; i++) {
                size_t l;
                tok_stream_put(s, ids[i], &l);
                out += l;
            }
            double t = now_s() - t0;
            if (t < best_dec) best_dec = t;
        }
        tok_stream_free(s);
    }
    const char *type = tok_type(v) == TOK_TYPE_BPE ? "BPE" : tok_type(v) == TOK_TYPE_WPM ? "WPM" : "SPM";
    printf("%-48s %s %-10s n_vocab %6d  load %6.0f ms  encode %6.2f MB/s (%7.0f k tok/s, %.2f B/tok)  decode %6.0f MB/s%s\n",
           path, type, tok_pre_name(v), tok_n_vocab(v), 1e3 * t_load, (double)n / best / 1e6, (double)n_ids / best / 1e3,
           (double)n / (double)n_ids, (double)out / best_dec / 1e6, out == n ? "" : " (decode != input)");
    free(ids);
    tok_free(v);
    gguf_close(g);
}

int main(int argc, char **argv) {
    size_t n = 1 << 20;
    char *text = make_text(n);
    if (!text) return 1;
    const char *shared = getenv("CINFER_SHARED") ? getenv("CINFER_SHARED") : "../shared";
    if (argc > 1) {
        for (int i = 1; i < argc; i++) bench(argv[i], text, n);
    } else {
        static const char *const defaults[] = {
            "vocab/hf/llama3/tokenizer.json",
            "models/chat/qwen3-chat.gguf",
            "vocab/hf/qwen3/tokenizer.json",
            "vocab/llama.cpp/ggml-vocab-gpt-2.gguf",
            "vocab/llama.cpp/ggml-vocab-deepseek-llm.gguf",
            "vocab/llama.cpp/ggml-vocab-bert-bge.gguf",
            "vocab/llama.cpp/ggml-vocab-llama-spm.gguf",
        };
        printf("1 MiB of mixed text (English, code, CJK, Korean, emoji, numbers)\n");
        for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) {
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", shared, defaults[i]);
            bench(path, text, n);
        }
    }
    free(text);
    return 0;
}
#endif
