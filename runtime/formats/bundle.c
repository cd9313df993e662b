/*
 * bundle.c — reading, checking, writing and signing bundle executables
 * (format: bundle.h).  Hashing and signatures are libsodium's (sha256,
 * Ed25519), linked statically into bundles so they need nothing installed.
 *
 * Files are read with pread in 1 MiB chunks, one pass for both digests: a
 * payload of a few hundred MB hashes at the speed of libsodium's sha256
 * (docs/bundle.md has the numbers); a caller that has checked a file once
 * need not do it again while the file is unchanged (cli/bundled.c keeps a
 * stamp).
 */
#include "bundle.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char sig_context[16] = {'c', 'i', 'n', 'f', 'e', 'r', '-', 'b',
                                     'u', 'n', 'd', 'l', 'e', '-', 'v', '1'};

static int fail(char *err, size_t err_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t err_len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
    return -1;
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i);
}
static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> 8 * i);
}
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
/* a fixed-width NUL-padded text field, always terminated when read back */
static void put_str(uint8_t *p, size_t cap, const char *s) {
    size_t n = strlen(s);
    memcpy(p, s, n < cap - 1 ? n : cap - 1);
}
static void get_str(char *dst, const uint8_t *p, size_t cap) {
    memcpy(dst, p, cap - 1);
    dst[cap - 1] = 0;
}

void bundle_hex(const uint8_t *b, size_t n, char *out) {
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[b[i] >> 4];
        out[2 * i + 1] = d[b[i] & 15];
    }
    out[2 * n] = 0;
}

static void encode_trailer(const bundle_info *bi, uint8_t t[BUNDLE_TRAILER_BYTES]) {
    memset(t, 0, BUNDLE_TRAILER_BYTES);
    memcpy(t, BUNDLE_MAGIC, 8);
    put_u32(t + 8, BUNDLE_TRAILER_BYTES);
    put_u32(t + 12, bi->flags);
    put_u64(t + 16, bi->payload_offset);
    put_u64(t + 24, bi->payload_bytes);
    memcpy(t + 32, bi->payload_sha256, 32);
    memcpy(t + 64, bi->pubkey, 32);
    put_str(t + 96, 128, bi->model);
    put_str(t + 224, 16, bi->precision);
    put_str(t + 240, 16, bi->target);
    put_str(t + 256, 32, bi->version);
    put_str(t + 288, 96, bi->build);
    memcpy(t + BUNDLE_SIG_OFFSET, bi->sig, 64);
    memcpy(t + BUNDLE_TRAILER_BYTES - 8, BUNDLE_MAGIC, 8);
}

int bundle_read(const char *path, bundle_info *bi, char *err, size_t err_len) {
    memset(bi, 0, sizeof *bi);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(err, err_len, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    uint8_t t[BUNDLE_TRAILER_BYTES];
    int rc = -1;
    if (fstat(fd, &st)) {
        fail(err, err_len, "cannot stat %s: %s", path, strerror(errno));
        goto done;
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size < BUNDLE_TRAILER_BYTES ||
        pread(fd, t, sizeof t, (off_t)(size - sizeof t)) != (ssize_t)sizeof t ||
        memcmp(t, BUNDLE_MAGIC, 8) || memcmp(t + sizeof t - 8, BUNDLE_MAGIC, 8)) {
        fail(err, err_len, "%s: %llu bytes, no bundle trailer at the end: the file is truncated or "
             "not a cinfer bundle", path, (unsigned long long)size);
        goto done;
    }
    if (get_u32(t + 8) != BUNDLE_TRAILER_BYTES) {
        fail(err, err_len, "%s: bundle trailer of %u bytes, this cinfer reads %d-byte trailers", path,
             get_u32(t + 8), BUNDLE_TRAILER_BYTES);
        goto done;
    }
    bi->flags = get_u32(t + 12);
    bi->payload_offset = get_u64(t + 16);
    bi->payload_bytes = get_u64(t + 24);
    bi->file_bytes = size;
    memcpy(bi->payload_sha256, t + 32, 32);
    memcpy(bi->pubkey, t + 64, 32);
    get_str(bi->model, t + 96, sizeof bi->model);
    get_str(bi->precision, t + 224, sizeof bi->precision);
    get_str(bi->target, t + 240, sizeof bi->target);
    get_str(bi->version, t + 256, sizeof bi->version);
    get_str(bi->build, t + 288, sizeof bi->build);
    memcpy(bi->sig, t + BUNDLE_SIG_OFFSET, 64);
    uint64_t end = size - BUNDLE_TRAILER_BYTES;
    if (bi->payload_offset % BUNDLE_ALIGN || bi->payload_offset > end ||
        bi->payload_bytes > end - bi->payload_offset || bi->payload_bytes == 0) {
        fail(err, err_len, "%s: bundle trailer names a payload of %llu bytes at %llu, outside the "
             "%llu bytes before the trailer (or unaligned): the file is damaged", path,
             (unsigned long long)bi->payload_bytes, (unsigned long long)bi->payload_offset,
             (unsigned long long)end);
        goto done;
    }
    rc = 0;
done:
    close(fd);
    return rc;
}

int bundle_check(const char *path, const bundle_info *bi, int check_sig, const uint8_t *pubkey,
                 char *err, size_t err_len) {
    if (sodium_init() < 0) return fail(err, err_len, "libsodium failed to initialise");
    if (check_sig && !(bi->flags & BUNDLE_SIGNED))
        return fail(err, err_len, "%s: not signed (build it with cinfer bundle --sign KEY)", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(err, err_len, "cannot open %s: %s", path, strerror(errno));
    const size_t chunk = 1 << 20;
    uint8_t *buf = malloc(chunk);
    if (!buf) {
        close(fd);
        return fail(err, err_len, "out of memory");
    }
    crypto_hash_sha256_state hp, hf;
    crypto_hash_sha256_init(&hp);
    crypto_hash_sha256_init(&hf);
    /* the file digest covers [0, sig_at), the payload digest [p0, p1) */
    const uint64_t sig_at = bi->file_bytes - BUNDLE_TRAILER_BYTES + BUNDLE_SIG_OFFSET;
    const uint64_t p0 = bi->payload_offset, p1 = p0 + bi->payload_bytes;
    const uint64_t stop = check_sig ? sig_at : p1;
    int rc = -1;
    for (uint64_t off = check_sig ? 0 : p0; off < stop;) {
        size_t n = stop - off < chunk ? (size_t)(stop - off) : chunk;
        ssize_t r = pread(fd, buf, n, (off_t)off);
        if (r <= 0) {
            fail(err, err_len, "%s: read failed at byte %llu: %s", path, (unsigned long long)off,
                 r < 0 ? strerror(errno) : "unexpected end of file (truncated while reading?)");
            goto done;
        }
        if (check_sig) crypto_hash_sha256_update(&hf, buf, (size_t)r);
        uint64_t lo = off > p0 ? off : p0, hi = off + (uint64_t)r < p1 ? off + (uint64_t)r : p1;
        if (lo < hi) crypto_hash_sha256_update(&hp, buf + (lo - off), (size_t)(hi - lo));
        off += (uint64_t)r;
    }
    uint8_t dp[32], df[32];
    crypto_hash_sha256_final(&hp, dp);
    if (sodium_memcmp(dp, bi->payload_sha256, 32)) {
        char want[65], got[65];
        bundle_hex(bi->payload_sha256, 32, want);
        bundle_hex(dp, 32, got);
        fail(err, err_len, "%s: the weights (payload, %llu bytes at %llu) do not match their sha256 "
             "(recorded %.16s..., computed %.16s...): the file was modified or damaged", path,
             (unsigned long long)bi->payload_bytes, (unsigned long long)p0, want, got);
        goto done;
    }
    if (check_sig) {
        crypto_hash_sha256_final(&hf, df);
        uint8_t msg[48];
        memcpy(msg, sig_context, 16);
        memcpy(msg + 16, df, 32);
        const uint8_t *pk = pubkey ? pubkey : bi->pubkey;
        if (crypto_sign_verify_detached(bi->sig, msg, sizeof msg, pk)) {
            char hx[65];
            bundle_hex(pk, 32, hx);
            fail(err, err_len, "%s: the Ed25519 signature does not verify with key %.16s...: the file "
                 "was modified after signing, or signed with another key", path, hx);
            goto done;
        }
    }
    rc = 0;
done:
    free(buf);
    close(fd);
    return rc;
}

/* Copy src's bytes to the end of fd, hashing them into h. */
static int append_file(int fd, const char *exe_path, const char *src, crypto_hash_sha256_state *h,
                       uint64_t *n_out, char *err, size_t err_len) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) return fail(err, err_len, "cannot open %s: %s", src, strerror(errno));
    const size_t chunk = 1 << 20;
    uint8_t *buf = malloc(chunk);
    int rc = buf ? 0 : fail(err, err_len, "out of memory");
    uint64_t n = 0;
    ssize_t r = 0;
    while (!rc && (r = read(in, buf, chunk)) > 0) {
        crypto_hash_sha256_update(h, buf, (size_t)r);
        for (ssize_t w = 0; w < r;) {
            ssize_t k = write(fd, buf + w, (size_t)(r - w));
            if (k < 0) {
                rc = fail(err, err_len, "%s: write failed: %s", exe_path, strerror(errno));
                break;
            }
            w += k;
        }
        n += (uint64_t)r;
    }
    if (!rc && r < 0) rc = fail(err, err_len, "%s: read failed: %s", src, strerror(errno));
    free(buf);
    close(in);
    *n_out = n;
    return rc;
}

static int write_all(int fd, const void *p, size_t n, const char *path, char *err, size_t err_len) {
    for (size_t w = 0; w < n;) {
        ssize_t k = write(fd, (const uint8_t *)p + w, n - w);
        if (k < 0) return fail(err, err_len, "%s: write failed: %s", path, strerror(errno));
        w += (size_t)k;
    }
    return 0;
}

/* sha256 of the first n bytes of fd */
static int hash_prefix(int fd, uint64_t n, uint8_t out[32], const char *path, char *err, size_t err_len) {
    const size_t chunk = 1 << 20;
    uint8_t *buf = malloc(chunk);
    if (!buf) return fail(err, err_len, "out of memory");
    crypto_hash_sha256_state h;
    crypto_hash_sha256_init(&h);
    int rc = 0;
    for (uint64_t off = 0; off < n;) {
        size_t k = n - off < chunk ? (size_t)(n - off) : chunk;
        ssize_t r = pread(fd, buf, k, (off_t)off);
        if (r <= 0) {
            rc = fail(err, err_len, "%s: read failed at byte %llu", path, (unsigned long long)off);
            break;
        }
        crypto_hash_sha256_update(&h, buf, (size_t)r);
        off += (uint64_t)r;
    }
    crypto_hash_sha256_final(&h, out);
    free(buf);
    return rc;
}

int bundle_append(const char *exe_path, const char *payload_path, bundle_info *bi,
                  const uint8_t *secret_key, char *err, size_t err_len) {
    if (sodium_init() < 0) return fail(err, err_len, "libsodium failed to initialise");
    int fd = open(exe_path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return fail(err, err_len, "cannot open %s: %s", exe_path, strerror(errno));
    int rc = -1;
    off_t end = lseek(fd, 0, SEEK_END);
    if (end < 0) {
        fail(err, err_len, "%s: %s", exe_path, strerror(errno));
        goto done;
    }
    static const uint8_t zeros[4096];
    uint64_t off = (uint64_t)end, aligned = (off + BUNDLE_ALIGN - 1) / BUNDLE_ALIGN * BUNDLE_ALIGN;
    while (off < aligned) {
        size_t k = aligned - off < sizeof zeros ? (size_t)(aligned - off) : sizeof zeros;
        if (write_all(fd, zeros, k, exe_path, err, err_len)) goto done;
        off += k;
    }
    crypto_hash_sha256_state h;
    crypto_hash_sha256_init(&h);
    bi->payload_offset = aligned;
    if (append_file(fd, exe_path, payload_path, &h, &bi->payload_bytes, err, err_len)) goto done;
    crypto_hash_sha256_final(&h, bi->payload_sha256);
    off = aligned + bi->payload_bytes;
    if (off % 8 && write_all(fd, zeros, 8 - off % 8, exe_path, err, err_len)) goto done;
    off = (off + 7) / 8 * 8;
    bi->file_bytes = off + BUNDLE_TRAILER_BYTES;
    memset(bi->sig, 0, sizeof bi->sig);
    memset(bi->pubkey, 0, sizeof bi->pubkey);
    bi->flags &= ~(uint32_t)BUNDLE_SIGNED;
    if (secret_key) {
        bi->flags |= BUNDLE_SIGNED;
        crypto_sign_ed25519_sk_to_pk(bi->pubkey, secret_key);
    }
    uint8_t t[BUNDLE_TRAILER_BYTES];
    encode_trailer(bi, t);
    if (write_all(fd, t, sizeof t, exe_path, err, err_len)) goto done;
    if (secret_key) {
        /* sign everything before the signature field, now that it is on disk */
        uint8_t msg[48];
        memcpy(msg, sig_context, 16);
        if (hash_prefix(fd, off + BUNDLE_SIG_OFFSET, msg + 16, exe_path, err, err_len)) goto done;
        crypto_sign_detached(bi->sig, NULL, msg, sizeof msg, secret_key);
        if (pwrite(fd, bi->sig, 64, (off_t)(off + BUNDLE_SIG_OFFSET)) != 64) {
            fail(err, err_len, "%s: write failed: %s", exe_path, strerror(errno));
            goto done;
        }
    }
    if (fsync(fd)) {
        fail(err, err_len, "%s: fsync failed: %s", exe_path, strerror(errno));
        goto done;
    }
    rc = 0;
done:
    if (close(fd) && !rc) rc = fail(err, err_len, "%s: close failed: %s", exe_path, strerror(errno));
    return rc;
}

/* ---- keys ------------------------------------------------------------------------ */

int bundle_key_read(const char *path, uint8_t *out, size_t n, char *err, size_t err_len) {
    FILE *f = fopen(path, "r");
    if (!f) return fail(err, err_len, "cannot open %s: %s", path, strerror(errno));
    char line[300] = "";
    if (!fgets(line, sizeof line, f)) line[0] = 0;
    fclose(f);
    size_t len = strcspn(line, "\r\n");
    line[len] = 0;
    const char *what = n == 64 ? "a 64-byte Ed25519 secret key" : "a 32-byte Ed25519 public key";
    if (len != 2 * n)
        return fail(err, err_len, "%s: expected %zu hex digits (%s), got %zu characters", path, 2 * n,
                    what, len);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(line + 2 * i, "%2x", &v) != 1 || !strchr("0123456789abcdefABCDEF", line[2 * i]) ||
            !strchr("0123456789abcdefABCDEF", line[2 * i + 1]))
            return fail(err, err_len, "%s: not hex at character %zu (%s)", path, 2 * i + 1, what);
        out[i] = (uint8_t)v;
    }
    return 0;
}

static int write_key(const char *path, const uint8_t *k, size_t n, int mode, char *err, size_t err_len) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) return fail(err, err_len, "cannot create %s: %s", path, strerror(errno));
    char hx[130];
    bundle_hex(k, n, hx);
    hx[2 * n] = '\n';
    int rc = write_all(fd, hx, 2 * n + 1, path, err, err_len);
    if (close(fd) && !rc) rc = fail(err, err_len, "%s: close failed", path);
    return rc;
}

int bundle_keygen(const char *path, char *err, size_t err_len) {
    if (sodium_init() < 0) return fail(err, err_len, "libsodium failed to initialise");
    uint8_t pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
    crypto_sign_keypair(pk, sk);
    char pub[4096];
    snprintf(pub, sizeof pub, "%s.pub", path);
    int rc = write_key(path, sk, sizeof sk, 0600, err, err_len);
    if (!rc && (rc = write_key(pub, pk, sizeof pk, 0644, err, err_len))) unlink(path);
    sodium_memzero(sk, sizeof sk);
    return rc;
}
