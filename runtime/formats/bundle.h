/*
 * bundle.h — the file format of bundle executables (`cinfer bundle`,
 * docs/bundle.md): one file that is a program and its model.
 *
 *   [ ELF program ][ zero pad ][ payload: a GGUF (.giw) image ][ zero pad ][ trailer ]
 *   0              ^ payload_offset (multiple of BUNDLE_ALIGN)              last 512 bytes
 *
 * The payload is the model saved in the compiled precision's layout (a .giw:
 * weights, tokenizer, chat template), so the program maps it from its own
 * file (/proc/self/exe) at payload_offset, zero copy; BUNDLE_ALIGN (64 KiB)
 * is a multiple of every page size Linux uses on x86-64 and arm64 (4, 16 and
 * 64 KiB).  The trailer (little-endian, fixed offsets, BUNDLE_TRAILER_BYTES):
 *
 *     0  magic "CFBUNDL1"          8  u32 trailer bytes (512)   12  u32 flags
 *    16  u64 payload_offset       24  u64 payload_bytes
 *    32  sha256 of the payload (32 bytes)
 *    64  Ed25519 public key of the signer (32; zero when unsigned)
 *    96  model name (128, NUL-padded)        224  precision (16)
 *   240  target "x86_64"/"aarch64" (16)      256  cinfer version (32)
 *   288  build: compiler and flags (96)      384  reserved, zero (56)
 *   440  Ed25519 signature (64; zero when unsigned)
 *   504  magic "CFBUNDL1" again
 *
 * Signature: Ed25519 (libsodium crypto_sign_detached) over the 16 bytes
 * "cinfer-bundle-v1" followed by the sha256 of every byte of the file before
 * the signature field (program, payload and trailer up to offset 440), so
 * any change to the code, the weights or the trailer's fields fails it.
 *
 * Keys are text files of lowercase hex: the secret key is libsodium's 64-byte
 * Ed25519 secret key (seed || public key, 128 hex digits), the public key 32
 * bytes (64 hex digits); bundle_keygen writes both.
 */
#ifndef CINFER_BUNDLE_H
#define CINFER_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

#define BUNDLE_MAGIC "CFBUNDL1"
#define BUNDLE_TRAILER_BYTES 512
#define BUNDLE_ALIGN 65536
#define BUNDLE_SIG_OFFSET 440 /* of the signature field in the trailer */

enum {
    BUNDLE_SIGNED = 1,            /* pubkey and sig are set */
    BUNDLE_REQUIRE_SIGNATURE = 2, /* the program refuses to start unless sig verifies */
};

typedef struct {
    uint32_t flags;            /* BUNDLE_* */
    uint64_t payload_offset;   /* file offset of the GGUF image, multiple of BUNDLE_ALIGN */
    uint64_t payload_bytes;
    uint64_t file_bytes;       /* size of the whole file (bundle_read) */
    uint8_t payload_sha256[32];
    uint8_t pubkey[32];
    uint8_t sig[64];
    char model[128];           /* general.name, or the source file's stem */
    char precision[16];        /* cinfer_precision_name */
    char target[16];           /* "x86_64" or "aarch64" */
    char version[32];          /* CINFER_VERSION that built it */
    char build[96];            /* compiler and flags */
} bundle_info;

/* Read and check the trailer of path: the magic at both ends, a payload
 * range that lies before the trailer at an aligned offset.  Errors (-1, err):
 * "x: 81920 bytes, no bundle trailer at the end: the file is truncated or
 * not a cinfer bundle". */
int bundle_read(const char *path, bundle_info *bi, char *err, size_t err_len);

/* Stream the file once: the payload's sha256 must equal bi->payload_sha256
 * ("x: the weights (payload, 1234 bytes at 65536) do not match their sha256
 * ...: the file was modified or damaged"); with check_sig, also the
 * signature against pubkey (NULL: the key in the trailer; a bundle without
 * BUNDLE_SIGNED fails "x: not signed").  0 ok, -1 with err. */
int bundle_check(const char *path, const bundle_info *bi, int check_sig, const uint8_t *pubkey,
                 char *err, size_t err_len);

/* Append payload_path to the program at exe_path (in place): zero pad to
 * BUNDLE_ALIGN, the payload, zero pad to 8, the trailer built from bi (its
 * model/precision/target/version/build and BUNDLE_REQUIRE_SIGNATURE;
 * offsets and the digest are computed here and written back into *bi).  With
 * secret_key (64 bytes) the trailer is signed (BUNDLE_SIGNED, pubkey =
 * its public half).  0, or -1 with "x: write failed: ..." in err. */
int bundle_append(const char *exe_path, const char *payload_path, bundle_info *bi,
                  const uint8_t *secret_key, char *err, size_t err_len);

/* Read a hex key file of exactly n bytes (64 secret, 32 public) into out.
 * Errors: "k.pub: expected 64 hex digits (a 32-byte Ed25519 public key), got 12". */
int bundle_key_read(const char *path, uint8_t *out, size_t n, char *err, size_t err_len);
/* A fresh key pair written to path (secret, mode 0600, refused if it exists)
 * and path.pub (public).  0, or -1 with err. */
int bundle_keygen(const char *path, char *err, size_t err_len);

/* Lowercase hex of n bytes into out (2n + 1 bytes). */
void bundle_hex(const uint8_t *b, size_t n, char *out);

#endif
