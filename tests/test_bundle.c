/*
 * test_bundle.c — bundle executables (cinfer bundle, docs/bundle.md) as a
 * user ships them: copied alone into an empty directory, run with an empty
 * environment, compared with `cinfer run`; the dynamic libraries they need
 * (only the C library family); a truncated or edited copy; signatures; a
 * memory limit; the server; and the same bundle for aarch64 under qemu-user.
 *
 * Bundles need the static archives of make bundle-deps (build/deps) and, for
 * aarch64, make aarch64 (build/aarch64/libcinfer.a) and qemu-aarch64: the
 * tests skip with that reason when those are absent.
 */
#include <cJSON.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "http_client.h"
#include "test.h"

const char *test_tmpdir(void);

#define STORIES "models/stories260K/stories260K.gguf"
#define PROMPT "Once upon a time"

static const char *build_dir(void) {
    const char *b = getenv("CINFER_BUILD");
    return b && *b ? b : "build";
}

static int have_deps(const char *target) {
    char p[512];
    snprintf(p, sizeof p, "%s/deps/%s/libcjson.a", build_dir(), target);
    return access(p, R_OK) == 0;
}

/* cinfer_bin() as an absolute path, for commands that cd first. */
static const char *cinfer_abs(void) {
    static char buf[4096];
    if (!realpath(cinfer_bin(), buf)) snprintf(buf, sizeof buf, "%s", cinfer_bin());
    return buf;
}

/* A fresh empty directory under the test tmpdir. */
static const char *empty_dir(const char *name) {
    static char buf[4][512];
    static int k;
    char *d = buf[k++ % 4];
    snprintf(d, 512, "%s/%s", test_tmpdir(), name);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", d, d);
    if (system(cmd) != 0) return NULL;
    return d;
}

/* cinfer bundle MODEL -o OUT EXTRA; 0 ok (prints the log on failure). */
static int make_bundle(const char *model, const char *out, const char *extra) {
    char cmd[2048], *log = NULL;
    snprintf(cmd, sizeof cmd, "%s bundle '%s' -o '%s' %s", cinfer_bin(), model, out, extra);
    int rc = run_cmd(cmd, true, &log);
    if (rc) test_fail(__FILE__, __LINE__, "%s: exit %d: %s", cmd, rc, log ? log : "");
    free(log);
    return rc;
}

/* Greedy text of `cinfer run` (stdout). */
static char *cinfer_run_text(const char *model, int n) {
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s run '%s' -p '" PROMPT "' -n %d --temp 0 -t 1 2>/dev/null", cinfer_bin(),
             model, n);
    if (run_cmd(cmd, false, &out)) {
        free(out);
        return NULL;
    }
    return out;
}

/* Every library ldd names must be of the C library family. */
static void expect_libc_only(const char *exe) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "ldd '%s'", exe);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 0);
    static const char *ok[] = {"linux-vdso.so", "libc.so", "libm.so", "ld-linux", "libpthread.so",
                               "libdl.so", "librt.so", NULL};
    int n_libs = 0;
    for (char *line = out ? strtok(out, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        while (*line == ' ' || *line == '\t') line++;
        int good = 0;
        for (int i = 0; ok[i]; i++) good |= strstr(line, ok[i]) != NULL;
        EXPECT_MSG(good, "ldd %s: '%s' is not part of the C library", exe, line);
        n_libs++;
    }
    EXPECT(n_libs >= 2);
    free(out);
}

TEST(bundle, alone_env_empty_same_text) {
    NEED_SHARED(model, STORIES);
    if (!have_deps("x86_64")) SKIP("no %s/deps/x86_64/libcjson.a: run make bundle-deps", build_dir());
    const char *dir = empty_dir("alone");
    char built[600], exe[600], cmd[2048];
    snprintf(built, sizeof built, "%s/../story.bundle", dir);
    if (make_bundle(model, built, "")) return;
    snprintf(exe, sizeof exe, "%s/story", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", built, exe);
    EXPECT_EQ_I(system(cmd), 0);
    expect_libc_only(exe);
    char *want = cinfer_run_text(model, 32), *got = NULL;
    snprintf(cmd, sizeof cmd, "cd '%s' && env -i ./story -p '" PROMPT "' -n 32 --temp 0 -t 1 2>/dev/null", dir);
    EXPECT_EQ_I(run_cmd(cmd, false, &got), 0);
    EXPECT(want && strlen(want) > strlen(PROMPT) + 20);
    EXPECT_STR_EQ(got, want);
    free(got);
    got = NULL;
    /* the prompt on standard input and from -f FILE: the same text */
    snprintf(cmd, sizeof cmd, "cd '%s' && printf '" PROMPT "' > p.txt && env -i ./story -f p.txt -n 32 --temp 0 -t 1 2>/dev/null", dir);
    EXPECT_EQ_I(run_cmd(cmd, false, &got), 0);
    EXPECT_STR_EQ(got, want);
    free(got);
    got = NULL;
    snprintf(cmd, sizeof cmd, "cd '%s' && printf '" PROMPT "' | env -i ./story -n 32 --temp 0 -t 1 2>/dev/null", dir);
    EXPECT_EQ_I(run_cmd(cmd, false, &got), 0);
    EXPECT_STR_EQ(got, want);
    free(got);
    free(want);
    /* --info: the sha256 it reports is that of the bytes at the offset it names */
    char *info = NULL;
    snprintf(cmd, sizeof cmd, "env -i '%s' --info", exe);
    EXPECT_EQ_I(run_cmd(cmd, false, &info), 0);
    unsigned long long n = 0, off = 0;
    char sha[65] = "";
    const char *w = info ? strstr(info, "weights:") : NULL, *h = info ? strstr(info, "sha256:") : NULL;
    EXPECT(w && sscanf(w, "weights: %llu bytes at offset %llu", &n, &off) == 2);
    EXPECT(h && sscanf(h, "sha256: %64s", sha) == 1);
    EXPECT(info && strstr(info, "precision:  auto") && strstr(info, "target:     x86_64"));
    EXPECT_EQ_I(off % 65536, 0);
    char *sum = NULL;
    snprintf(cmd, sizeof cmd, "tail -c +%llu '%s' | head -c %llu | sha256sum", off + 1, exe, n);
    EXPECT_EQ_I(run_cmd(cmd, false, &sum), 0);
    EXPECT_MSG(sum && !strncmp(sum, sha, 64), "sha256sum of the payload: %s, --info: %s", sum ? sum : "", sha);
    free(sum);
    free(info);
    /* the help lists the interface */
    char *help = NULL;
    snprintf(cmd, sizeof cmd, "env -i '%s' -h", exe);
    EXPECT_EQ_I(run_cmd(cmd, false, &help), 0);
    EXPECT(help && strstr(help, " chat ") && strstr(help, "--json-schema") && strstr(help, "--info") &&
           strstr(help, "--check"));
    free(help);
}

/* An installed cinfer (make install's layout: bin/cinfer, lib/cinfer/
 * libcinfer.a and deps/<target>/) bundles without a build tree next to it:
 * the same text as the build's cinfer run. */
TEST(bundle, from_installed_prefix) {
    NEED_SHARED(model, STORIES);
    if (!have_deps("x86_64")) SKIP("no %s/deps/x86_64/libcjson.a: run make bundle-deps", build_dir());
    const char *dir = empty_dir("installed");
    char cmd[4096], *log = NULL;
    const char *b = build_dir();
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/pfx/bin' '%s/pfx/lib/cinfer/deps' && cp '%s' '%s/pfx/bin/cinfer' && "
             "cp '%s/libcinfer.a' '%s/pfx/lib/cinfer/' && cp -r '%s/deps/x86_64' '%s/pfx/lib/cinfer/deps/' && "
             "env -u CINFER_LIBDIR '%s/pfx/bin/cinfer' bundle '%s' -o '%s/story'",
             dir, dir, cinfer_abs(), dir, b, dir, b, dir, dir, model, dir);
    int rc = run_cmd(cmd, true, &log);
    EXPECT_MSG(rc == 0, "%s: %s", cmd, log ? log : "");
    free(log);
    if (rc) return;
    char *want = cinfer_run_text(model, 16), *got = NULL;
    snprintf(cmd, sizeof cmd, "env -i '%s/story' -p '" PROMPT "' -n 16 --temp 0 -t 1 2>/dev/null", dir);
    EXPECT_EQ_I(run_cmd(cmd, false, &got), 0);
    EXPECT_STR_EQ(got, want);
    free(got);
    free(want);
}

TEST(bundle, chat_and_json_schema) {
    NEED_SHARED(model, "models/chat/qwen3-chat.gguf");
    if (!have_deps("x86_64")) SKIP("no %s/deps/x86_64/libcjson.a: run make bundle-deps", build_dir());
    const char *dir = empty_dir("chat");
    char exe[600], cmd[2048], *a = NULL, *b = NULL;
    snprintf(exe, sizeof exe, "%s/qwen3", dir);
    if (make_bundle(model, exe, "")) return;
    /* chat through the template inside the bundle = cinfer chat on the file */
    snprintf(cmd, sizeof cmd, "printf 'Hi there\\n' | env -i '%s' chat -n 8 --temp 0 -t 1 2>/dev/null", exe);
    EXPECT_EQ_I(run_cmd(cmd, false, &a), 0);
    snprintf(cmd, sizeof cmd, "printf 'Hi there\\n' | %s chat '%s' -n 8 --temp 0 -t 1 2>/dev/null", cinfer_bin(), model);
    EXPECT_EQ_I(run_cmd(cmd, false, &b), 0);
    EXPECT(a && strlen(a) > 1);
    EXPECT_STR_EQ(a, b);
    free(a);
    free(b);
    a = NULL;
    /* --json-schema: one value valid under the schema */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && printf '{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"}},"
             "\"required\":[\"ok\"],\"additionalProperties\":false}' > s.json && "
             "env -i ./qwen3 --json-schema s.json -p 'Answer:' --temp 0 -t 1 2>/dev/null", dir);
    EXPECT_EQ_I(run_cmd(cmd, false, &a), 0);
    cJSON *j = a ? cJSON_Parse(a) : NULL;
    EXPECT_MSG(j && cJSON_IsBool(cJSON_GetObjectItem(j, "ok")), "not {\"ok\": bool}: %s", a ? a : "");
    cJSON_Delete(j);
    free(a);
}

TEST(bundle, truncated_and_edited_copies_fail_clearly) {
    NEED_SHARED(model, STORIES);
    if (!have_deps("x86_64")) SKIP("no %s/deps/x86_64/libcjson.a: run make bundle-deps", build_dir());
    const char *dir = empty_dir("damaged");
    char exe[600], cmd[2048], *out = NULL;
    snprintf(exe, sizeof exe, "%s/story", dir);
    if (make_bundle(model, exe, "")) return;
    struct stat st;
    EXPECT_EQ_I(stat(exe, &st), 0);
    /* truncated: cut inside the weights */
    snprintf(cmd, sizeof cmd, "cd '%s' && head -c %lld story > cut && chmod +x cut && env -i ./cut -p hi -n 4",
             dir, (long long)st.st_size - 300000);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
    EXPECT_MSG(out && strstr(out, "truncated") && !strstr(out, "Sanitizer"), "%s", out ? out : "");
    free(out);
    out = NULL;
    /* cut inside the program: it cannot start at all (the kernel's loader), but
     * cinfer verify on the receiving side says what happened */
    snprintf(cmd, sizeof cmd, "cd '%s' && head -c 100000 story > cut2 && %s verify cut2", dir, cinfer_abs());
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
    EXPECT_MSG(out && strstr(out, "truncated"), "%s", out ? out : "");
    free(out);
    out = NULL;
    /* one weight byte changed: the sha256 check stops it, --check too */
    snprintf(cmd, sizeof cmd, "cd '%s' && cp story edited && printf 'Z' | dd of=edited bs=1 seek=%lld conv=notrunc "
             "2>/dev/null && env -i ./edited -p hi -n 4", dir, (long long)st.st_size - 200000);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
    EXPECT_MSG(out && strstr(out, "do not match their sha256") && strstr(out, "modified or damaged"), "%s",
               out ? out : "");
    free(out);
    out = NULL;
    /* a stamp lets an unchanged file skip the hash; editing it after the stamp is still caught */
    snprintf(cmd, sizeof cmd, "cd '%s' && cp story s2 && env -i HOME=%s/home ./s2 -p hi -n 2 >/dev/null 2>&1 && "
             "ls %s/home/.cache/cinfer/bundles | wc -l && printf 'Z' | dd of=s2 bs=1 seek=%lld conv=notrunc "
             "2>/dev/null && env -i HOME=%s/home ./s2 -p hi -n 2", dir, dir, dir, (long long)st.st_size - 200000, dir);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
    EXPECT_MSG(out && out[0] == '1' && strstr(out, "do not match their sha256"), "%s", out ? out : "");
    free(out);
    out = NULL;
    snprintf(cmd, sizeof cmd, "env -i '%s' --check", exe);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 0);
    EXPECT(out && strstr(out, "ok"));
    free(out);
}

TEST(bundle, signed_verifies_flipped_byte_does_not) {
    NEED_SHARED(model, STORIES);
    if (!have_deps("x86_64")) SKIP("no %s/deps/x86_64/libcjson.a: run make bundle-deps", build_dir());
    const char *dir = empty_dir("signed");
    char exe[600], cmd[3000], extra[700], *out = NULL;
    snprintf(cmd, sizeof cmd, "cd '%s' && %s keygen k >/dev/null 2>&1 && %s keygen other >/dev/null 2>&1", dir,
             cinfer_abs(), cinfer_abs());
    EXPECT_EQ_I(system(cmd), 0);
    snprintf(exe, sizeof exe, "%s/story", dir);
    snprintf(extra, sizeof extra, "--sign '%s/k' --require-signature", dir);
    if (make_bundle(model, exe, extra)) return;
    snprintf(cmd, sizeof cmd, "%s verify '%s' --key '%s/k.pub'", cinfer_bin(), exe, dir);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 0);
    EXPECT(out && strstr(out, "signature verifies"));
    free(out);
    out = NULL;
    snprintf(cmd, sizeof cmd, "%s verify '%s' --key '%s/other.pub'", cinfer_bin(), exe, dir);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
    EXPECT(out && strstr(out, "does not verify"));
    free(out);
    out = NULL;
    snprintf(cmd, sizeof cmd, "cd '%s' && env -i ./story -p hi -n 2 2>/dev/null", dir);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    free(out);
    out = NULL;
    /* flip one byte of the program code (well before the weights) */
    snprintf(cmd, sizeof cmd, "cd '%s' && cp story flipped && printf '\\377' | dd of=flipped bs=1 seek=4096 "
             "conv=notrunc 2>/dev/null && %s verify flipped --key k.pub", dir, cinfer_abs());
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
    EXPECT(out && strstr(out, "does not verify"));
    free(out);
    out = NULL;
    /* the weights: verify and the program itself refuse it */
    struct stat st;
    EXPECT_EQ_I(stat(exe, &st), 0);
    snprintf(cmd, sizeof cmd, "cd '%s' && cp story w && printf '\\377' | dd of=w bs=1 seek=%lld conv=notrunc "
             "2>/dev/null && (%s verify w --key k.pub; env -i ./w -p hi -n 2)", dir,
             (long long)st.st_size - 100000, cinfer_abs());
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
    EXPECT(out && strstr(out, "cinfer verify: w: the weights"));
    free(out);
    out = NULL;
    /* a byte of the trailer (a reserved field, under the signature): a require-signature bundle refuses to start */
    snprintf(cmd, sizeof cmd, "cd '%s' && cp story t && printf '\\001' | dd of=t bs=1 seek=%lld conv=notrunc "
             "2>/dev/null && env -i ./t -p hi -n 2", dir, (long long)st.st_size - 80);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
    EXPECT(out && strstr(out, "signature does not verify"));
    free(out);
}

TEST(bundle, memory_limit) {
    NEED_SHARED(model, STORIES);
    if (!have_deps("x86_64")) SKIP("no %s/deps/x86_64/libcjson.a: run make bundle-deps", build_dir());
    if (system("command -v prlimit >/dev/null 2>&1")) SKIP("no prlimit (util-linux)");
    const char *dir = empty_dir("mem");
    char exe[600], cmd[2048], *out = NULL;
    snprintf(exe, sizeof exe, "%s/story", dir);
    if (make_bundle(model, exe, "")) return;
    /* a 512 MB board: fits and runs */
    snprintf(cmd, sizeof cmd, "env -i prlimit --as=%d '%s' -p hi -n 8 --temp 0 -t 2", 512 << 20, exe);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 0);
    free(out);
    out = NULL;
    /* less than weights + runtime: a clear refusal, before mapping anything */
    snprintf(cmd, sizeof cmd, "env -i prlimit --as=%d '%s' -p hi -n 8", 40 << 20, exe);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
    EXPECT_MSG(out && strstr(out, "the model cannot fit") && strstr(out, "RLIMIT_AS"), "%s", out ? out : "");
    free(out);
}

TEST(bundle, server) {
    NEED_SHARED(model, STORIES);
    if (!have_deps("x86_64")) SKIP("no %s/deps/x86_64/libcjson.a: run make bundle-deps", build_dir());
    const char *dir = empty_dir("srv");
    char exe[600], plain[600], cmd[2048], log[700], *out = NULL;
    snprintf(exe, sizeof exe, "%s/story", dir);
    snprintf(plain, sizeof plain, "%s/plain", dir);
    if (make_bundle(model, exe, "--server") || make_bundle(model, plain, "")) return;
    expect_libc_only(exe);
    snprintf(cmd, sizeof cmd, "env -i '%s' serve", plain);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 2);
    EXPECT(out && strstr(out, "built without the HTTP server"));
    free(out);
    snprintf(log, sizeof log, "%s/serve.log", dir);
    pid_t pid = fork();
    if (pid == 0) {
        freopen(log, "w", stderr);
        char *argv[] = {exe, "serve", "--port", "0", "-t", "1", NULL}, *envp[] = {NULL};
        execve(exe, argv, envp);
        _exit(127);
    }
    int port = 0;
    for (int i = 0; i < 200 && !port; i++) {
        usleep(20000);
        char *l = read_file(log, NULL);
        const char *p = l ? strstr(l, "http://127.0.0.1:") : NULL;
        if (p) port = atoi(p + strlen("http://127.0.0.1:"));
        free(l);
    }
    EXPECT_MSG(port > 0, "the bundle's server did not start (%s)", log);
    if (port > 0) {
        char base[64];
        snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
        long status = 0;
        cJSON *j = http_post_json(base, "/v1/completions", "{\"prompt\":\"" PROMPT "\",\"max_tokens\":8,\"temperature\":0}",
                                  NULL, &status);
        EXPECT_EQ_I(status, 200);
        cJSON *ch = j ? cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0) : NULL;
        const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(ch, "text"));
        char *want = cinfer_run_text(model, 8);
        EXPECT(text && want && strstr(want, text) && strlen(text) > 3);
        free(want);
        cJSON_Delete(j);
    }
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* ---- aarch64 bundles under qemu-user (make test-aarch64) ------------------------ */

static const char *qemu_a64(void) {
    const char *q = getenv("QEMU_A64");
    return q && *q ? q : "qemu-aarch64";
}

/* Skips unless make aarch64 and make bundle-deps have run and qemu-aarch64 exists. */
static int a64_ready(char *why, size_t cap) {
    char p[512];
    snprintf(p, sizeof p, "%s/aarch64/libcinfer.a", build_dir());
    if (access(p, R_OK)) return snprintf(why, cap, "no %s: run make aarch64 (or make test-aarch64)", p), 0;
    if (!have_deps("aarch64")) return snprintf(why, cap, "no %s/deps/aarch64: run make bundle-deps", build_dir()), 0;
    if (system("command -v qemu-aarch64 >/dev/null 2>&1"))
        return snprintf(why, cap, "no qemu-aarch64 (Debian qemu-user)"), 0;
    return 1;
}

/* logits of `cinfer run --dump-logits` (x86) and of the aarch64 bundle under qemu */
static double a64_logits_cosine(const char *model, const char *exe, const char *dir, const char *prompt) {
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "%s run '%s' -p '%s' -n 0 -t 1 --dump-logits '%s/x86.json' >/dev/null 2>&1 && "
             "cd '%s' && env -i %s '%s' -p '%s' -n 0 -t 1 --dump-logits a64.json >/dev/null 2>&1",
             cinfer_bin(), model, prompt, dir, dir, qemu_a64(), exe, prompt);
    if (system(cmd)) return test_fail(__FILE__, __LINE__, "%s failed", cmd), -1;
    char pa[700], pb[700];
    snprintf(pa, sizeof pa, "%s/x86.json", dir);
    snprintf(pb, sizeof pb, "%s/a64.json", dir);
    cJSON *a = read_json(pa), *b = read_json(pb);
    cJSON *la = cJSON_GetObjectItem(a, "logits"), *lb = cJSON_GetObjectItem(b, "logits");
    double ab = 0, aa = 0, bb = 0;
    int n = cJSON_GetArraySize(la);
    EXPECT_EQ_I(cJSON_GetArraySize(lb), n);
    for (int i = 0; i < n && n == cJSON_GetArraySize(lb); i++) {
        double x = cJSON_GetArrayItem(la, i)->valuedouble, y = cJSON_GetArrayItem(lb, i)->valuedouble;
        ab += x * y, aa += x * x, bb += y * y;
    }
    cJSON_Delete(a);
    cJSON_Delete(b);
    return n > 0 && aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : -1;
}

TEST(bundle_aarch64, stories_alone_same_text) {
    NEED_SHARED(model, STORIES);
    char why[512];
    if (!a64_ready(why, sizeof why)) SKIP("%s", why);
    const char *dir = empty_dir("a64");
    char built[600], cmd[3000], *got = NULL, *out = NULL;
    snprintf(built, sizeof built, "%s/../story-a64", dir);
    if (make_bundle(model, built, "--target aarch64 --server")) return;
    snprintf(cmd, sizeof cmd, "cp '%s' '%s/story'", built, dir);
    EXPECT_EQ_I(system(cmd), 0);
    /* the C library family only: the NEEDED entries of the dynamic section */
    snprintf(cmd, sizeof cmd, "readelf -h -d '%s/story'", dir);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    EXPECT(out && strstr(out, "AArch64"));
    for (char *p = out ? strstr(out, "Shared library: [") : NULL; p; p = strstr(p + 1, "Shared library: [")) {
        char lib[128] = "";
        sscanf(p, "Shared library: [%127[^]]", lib);
        EXPECT_MSG(!strcmp(lib, "libc.so.6") || !strcmp(lib, "libm.so.6") || !strncmp(lib, "ld-linux-aarch64", 16),
                   "aarch64 bundle needs %s", lib);
    }
    free(out);
    char *want = cinfer_run_text(model, 32);
    snprintf(cmd, sizeof cmd, "cd '%s' && env -i %s ./story -p '" PROMPT "' -n 32 --temp 0 -t 1 2>/dev/null", dir,
             qemu_a64());
    EXPECT_EQ_I(run_cmd(cmd, false, &got), 0);
    EXPECT(want && strlen(want) > strlen(PROMPT) + 20);
    EXPECT_STR_EQ(got, want);
    free(got);
    free(want);
    double cos = a64_logits_cosine(model, "./story", dir, PROMPT);
    EXPECT_MSG(cos >= 0.9999, "logits cosine aarch64 vs x86: %.9f", cos);
    /* its integrity checks are the same code: a copy cut inside the weights fails clearly */
    struct stat st;
    EXPECT_EQ_I(stat(built, &st), 0);
    snprintf(cmd, sizeof cmd, "cd '%s' && head -c %lld story > cut && chmod +x cut && env -i %s ./cut -p hi",
             dir, (long long)st.st_size - 300000, qemu_a64());
    out = NULL;
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
    EXPECT_MSG(out && strstr(out, "truncated"), "%s", out ? out : "");
    free(out);
}

TEST(bundle_aarch64, signed_verifies_flipped_byte_does_not) {
    NEED_SHARED(model, STORIES);
    char why[512];
    if (!a64_ready(why, sizeof why)) SKIP("%s", why);
    const char *dir = empty_dir("a64sig");
    char exe[600], cmd[3000], extra[700], *out = NULL;
    snprintf(cmd, sizeof cmd, "cd '%s' && %s keygen k >/dev/null 2>&1", dir, cinfer_abs());
    EXPECT_EQ_I(system(cmd), 0);
    snprintf(exe, sizeof exe, "%s/story", dir);
    snprintf(extra, sizeof extra, "--target aarch64 --sign '%s/k' --require-signature", dir);
    if (make_bundle(model, exe, extra)) return;
    snprintf(cmd, sizeof cmd, "cd '%s' && %s verify story --key k.pub && env -i %s ./story --check", dir,
             cinfer_abs(), qemu_a64());
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 0);
    EXPECT(out && strstr(out, "signature verifies"));
    free(out);
    out = NULL;
    snprintf(cmd, sizeof cmd, "cd '%s' && cp story f && printf '\\377' | dd of=f bs=1 seek=5000 conv=notrunc "
             "2>/dev/null && (%s verify f --key k.pub; env -i %s ./f -p hi -n 2)", dir, cinfer_abs(), qemu_a64());
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
    EXPECT(out && strstr(out, "cinfer verify: f: the Ed25519 signature does not verify") &&
           strstr(out, "f: /"));
    free(out);
}

/* The NEON kernels end to end: a model per hot type (the integer R8 path
 * for Q4_0/Q8_0 under auto, Q4_K/Q6_K integer dots, F16), logits vs x86. */
TEST(bundle_aarch64, logits_match_x86_per_type) {
    char why[512];
    if (!a64_ready(why, sizeof why)) SKIP("%s", why);
    static const char *files[] = {"synth-d256-Q4_0.gguf", "synth-d256-Q8_0.gguf", "synth-d256-Q4_K_M.gguf",
                                  "synth-d256-Q6_K.gguf", "synth-d256-F16.gguf"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "models/synthetic/%s", files[i]);
        const char *p = shared_path(rel);
        if (!p) SKIP("../shared/%s absent", rel);
        char model[1024];
        snprintf(model, sizeof model, "%s", p);
        const char *dir = empty_dir("a64type");
        char exe[600];
        snprintf(exe, sizeof exe, "%s/m", dir);
        if (make_bundle(model, exe, "--target aarch64")) return;
        double cos = a64_logits_cosine(model, "./m", dir, PROMPT);
        EXPECT_MSG(cos >= 0.9999, "%s: logits cosine aarch64 vs x86: %.9f", files[i], cos);
    }
}
