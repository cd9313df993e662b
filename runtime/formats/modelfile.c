/*
 * modelfile.c — content-based model format detection (see modelfile.h).
 */
#include "modelfile.h"

#include "hf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEAD_BYTES 16

static void seterr(char *err, size_t err_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t err_len, const char *fmt, ...) {
    if (!err || !err_len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
    for (char *p = err; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
}

const char *modelfile_format_name(model_format f) {
    switch (f) {
    case MODEL_FORMAT_GGUF: return "gguf";
    case MODEL_FORMAT_SAFETENSORS: return "safetensors";
    case MODEL_FORMAT_PICKLE: return "pytorch-pickle";
    case MODEL_FORMAT_HF_FOLDER: return "hf-folder";
    default: return "unknown";
    }
}

static const char refuse[] =
    "refusing to load it: unpickling executes arbitrary code from the file; "
    "convert it to GGUF (llama.cpp convert_hf_to_gguf.py) or safetensors first";

model_format modelfile_detect_mem(const void *head, size_t n, unsigned long long file_size, char *err,
                                  size_t err_len) {
    const uint8_t *b = head;
    if (n >= 4 && !memcmp(b, "GGUF", 4)) return MODEL_FORMAT_GGUF;
    /* Before the pickle test: a safetensors header length can begin with 0x80. */
    if (n >= 9 && file_size >= 9) {
        uint64_t hl = 0;
        for (int i = 7; i >= 0; i--) hl = hl << 8 | b[i];
        if (hl >= 2 && hl <= file_size - 8 && b[8] == '{') return MODEL_FORMAT_SAFETENSORS;
    }
    if (n >= 4 && !memcmp(b, "PK\x03\x04", 4)) {
        seterr(err, err_len, "model: a zip archive (PyTorch checkpoint, torch.save format); %s", refuse);
        return MODEL_FORMAT_PICKLE;
    }
    if (n >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5) {
        seterr(err, err_len, "model: a Python pickle (protocol %u, legacy PyTorch checkpoint); %s", b[1], refuse);
        return MODEL_FORMAT_PICKLE;
    }
    char hex[3 * HEAD_BYTES + 1] = "";
    for (size_t i = 0; i < n && i < 8; i++) snprintf(hex + 3 * i, 4, "%02x ", b[i]);
    if (n) hex[3 * (n < 8 ? n : 8) - 1] = 0;
    seterr(err, err_len, "model: unrecognised format (first bytes %s%s): expected GGUF or safetensors",
           n ? hex : "none", n ? "" : ", empty file");
    return MODEL_FORMAT_UNKNOWN;
}

model_format modelfile_detect(const char *path, char *err, size_t err_len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        seterr(err, err_len, "model: cannot open '%s': %s", path, strerror(errno));
        return MODEL_FORMAT_UNKNOWN;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        if (hf_is_folder(path)) return MODEL_FORMAT_HF_FOLDER;
        seterr(err, err_len, "model: '%s' is a directory without config.json (a Hugging Face checkpoint folder has "
               "config.json and *.safetensors)", path);
        return MODEL_FORMAT_UNKNOWN;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        seterr(err, err_len, "model: '%s' is not a regular file", path);
        return MODEL_FORMAT_UNKNOWN;
    }
    uint8_t head[HEAD_BYTES];
    size_t n = 0;
    while (n < sizeof head) {
        ssize_t r = read(fd, head + n, sizeof head - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    close(fd);
    char e[512];
    model_format f = modelfile_detect_mem(head, n, (unsigned long long)st.st_size, e, sizeof e);
    if (f == MODEL_FORMAT_UNKNOWN || f == MODEL_FORMAT_PICKLE) /* e begins "model: " */
        seterr(err, err_len, "model: %s: %s", path, e + strlen("model: "));
    return f;
}

/* The folder of file path ("." when it has no slash). */
static void dir_of(const char *path, char *buf, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(buf, cap, ".");
    else if (slash == path) snprintf(buf, cap, "/");
    else snprintf(buf, cap, "%.*s", (int)(slash - path), path);
}

int modelfile_open(const char *path, gguf_file **out, char *err, size_t err_len) {
    *out = NULL;
    char e[1024] = "";
    switch (modelfile_detect(path, e, sizeof e)) {
    case MODEL_FORMAT_HF_FOLDER: return hf_open(path, out, err, err_len);
    case MODEL_FORMAT_SAFETENSORS: {
        char dir[4096];
        dir_of(path, dir, sizeof dir);
        if (hf_is_folder(dir)) return hf_open(dir, out, err, err_len);
        seterr(err, err_len, "model: %s is a safetensors file without a config.json next to it: give the Hugging "
               "Face checkpoint folder (config.json, tokenizer.json, *.safetensors)", path);
        return GGUF_EFORMAT;
    }
    case MODEL_FORMAT_PICKLE:
        seterr(err, err_len, "%s", e);
        return GGUF_EFORMAT;
    case MODEL_FORMAT_UNKNOWN:
        if (strstr(e, "is a directory")) {
            seterr(err, err_len, "%s", e);
            return GGUF_EFORMAT;
        }
        return gguf_open(path, out, err, err_len); /* it says what is wrong: missing file, bad magic */
    default: return gguf_open(path, out, err, err_len);
    }
}
