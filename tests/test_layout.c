/*
 * test_layout.c — the source tree stays layered (tools/check_layout.py,
 * docs/architecture.md "Layers"): the real tree is clean, and the checker
 * does catch an upward include, a sideways one and a call cycle when they
 * are planted in a scratch tree.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

static const char *build_dir(void) {
    const char *b = getenv("CINFER_BUILD");
    return b && *b ? b : "build";
}

TEST(layout, repo_is_layered) {
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof cmd, "python3 tools/check_layout.py --objects %s", build_dir());
    int rc = run_cmd(cmd, true, &out);
    EXPECT_MSG(rc == 0, "check_layout.py exit %d:\n%s", rc, out ? out : "");
    EXPECT(out && strstr(out, "check-layout: ok"));
    free(out);
}

/* Write text to root/rel, creating the folders. */
static void put(const char *root, const char *rel, const char *text) {
    char path[512], cmd[600];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
    EXPECT_EQ_I(system(cmd), 0);
    FILE *f = fopen(path, "w");
    EXPECT(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static char *check_tree(const char *root, int *rc) {
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof cmd, "python3 tools/check_layout.py %s", root);
    *rc = run_cmd(cmd, true, &out);
    return out;
}

TEST(layout, catches_upward_and_sideways_includes) {
    char root[] = "/tmp/cinfer-layout-XXXXXX";
    if (!mkdtemp(root)) SKIP("mkdtemp failed");
    put(root, "runtime/engine/engine.h", "int eng(void);\n");
    put(root, "runtime/kernels/kern.h", "int kern(void);\n");
    put(root, "runtime/kernels/kern.c", "#include \"kern.h\"\nint kern(void) { return 0; }\n");
    int rc;
    char *out = check_tree(root, &rc);
    EXPECT_MSG(rc == 0, "clean scratch tree: exit %d\n%s", rc, out ? out : "");
    free(out);

    /* kernels (layer 2) including the engine (layer 6) */
    put(root, "runtime/kernels/kern.c",
        "#include \"kern.h\"\n#include \"engine/engine.h\"\nint kern(void) { return eng(); }\n");
    out = check_tree(root, &rc);
    EXPECT_EQ_I(rc, 1);
    EXPECT_MSG(out && strstr(out, "runtime/kernels/kern.c:2: includes runtime/engine/engine.h") &&
                   strstr(out, "upward"),
               "expected the upward include named, got:\n%s", out ? out : "");
    free(out);

    /* the compiler and the engine share a layer: neither may include the other */
    put(root, "runtime/kernels/kern.c", "#include \"kern.h\"\nint kern(void) { return 0; }\n");
    put(root, "compiler/compile.c", "#include \"engine/engine.h\"\n");
    out = check_tree(root, &rc);
    EXPECT_EQ_I(rc, 1);
    EXPECT_MSG(out && strstr(out, "compiler/compile.c:1") && strstr(out, "sideways"),
               "expected the sideways include named, got:\n%s", out ? out : "");
    free(out);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    EXPECT_EQ_I(system(cmd), 0);
}

TEST(layout, catches_call_cycles) {
    char root[] = "/tmp/cinfer-layout-XXXXXX";
    if (!mkdtemp(root)) SKIP("mkdtemp failed");
    /* two modules of one folder that call each other, and one calling up */
    put(root, "runtime/text/a.c", "int b(void);\nint a(void) { return b(); }\n");
    put(root, "runtime/text/b.c", "int a(void);\nint b(void) { return a(); }\n");
    put(root, "runtime/text/c.c", "int api(void);\nint c(void) { return api(); }\n");
    put(root, "runtime/api/api.c", "int api(void) { return 0; }\n");
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && mkdir -p b/runtime/text b/runtime/api && "
             "cc -c runtime/text/a.c -o b/runtime/text/a.o && cc -c runtime/text/b.c -o b/runtime/text/b.o && "
             "cc -c runtime/text/c.c -o b/runtime/text/c.o && cc -c runtime/api/api.c -o b/runtime/api/api.o",
             root);
    EXPECT_EQ_I(system(cmd), 0);
    char *cwd = getcwd(NULL, 0);
    snprintf(cmd, sizeof cmd, "python3 %s/tools/check_layout.py %s --objects %s/b", cwd, root, root);
    free(cwd);
    int rc = run_cmd(cmd, true, &out);
    EXPECT_EQ_I(rc, 1);
    EXPECT_MSG(out && strstr(out, "cycle in runtime/text: a.c -(b)-> b.c, b.c -(a)-> a.c"),
               "expected the a/b cycle, got:\n%s", out ? out : "");
    EXPECT_MSG(out && strstr(out, "runtime/text/c.c calls api (runtime/api/api.c) in runtime/api: upward"),
               "expected the upward call, got:\n%s", out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    EXPECT_EQ_I(system(cmd), 0);
}
