/*
 * gen_unicode.c — build tool: writes runtime/text/unicode_data.c, the Unicode
 * tables the tokenizers need, from the Unicode Character Database files that
 * Debian's `unicode-data` package installs under /usr/share/unicode:
 *
 *   UnicodeData.txt                 general category, simple lowercase,
 *                                   canonical decompositions, combining class
 *   PropList.txt                    White_Space
 *   DerivedNormalizationProps.txt   Full_Composition_Exclusion and NFC_QC (for NFC)
 *
 * The category flags are llama.cpp's (src/unicode.h unicode_cpt_flags, made by
 * its scripts/gen-unicode-data.py): one bit per major category (Cn undefined,
 * N, L, Z, M, P, S, C), plus whitespace from White_Space, plus "NFC_QC is
 * No or Maybe" for NFC's quick check.  Output is ranges,
 * so the file stays small (about 150 KB); the committed copy is what builds
 * use, and `make unicode` regenerates it:
 *
 *   gen_unicode [UCD_DIR] > runtime/text/unicode_data.c
 *
 * The output depends only on the input files (no dates), so regenerating from
 * the same UCD version gives the same bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_CPT 0x110000

/* Must match runtime/text/unicode.h. */
enum {
    UNI_UNDEFINED = 0x0001,
    UNI_NUMBER = 0x0002,
    UNI_LETTER = 0x0004,
    UNI_SEPARATOR = 0x0008,
    UNI_MARK = 0x0010,
    UNI_PUNCT = 0x0020,
    UNI_SYMBOL = 0x0040,
    UNI_CONTROL = 0x0080,
    UNI_WHITESPACE = 0x0100,
    UNI_NFC_MAYBE = 0x0200,
};

static uint16_t *flags;   /* (N_CPT) */
static uint32_t *lower;   /* (N_CPT) simple lowercase, 0 = none */
static uint8_t *ccc;      /* (N_CPT) canonical combining class */
static uint32_t (*decomp)[2]; /* (N_CPT) canonical decomposition, [0] == 0: none */
static uint8_t *excl;     /* (N_CPT) Full_Composition_Exclusion */

static FILE *open_ucd(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "gen_unicode: cannot open %s (install Debian's unicode-data package)\n", path);
        exit(1);
    }
    return f;
}

static uint16_t category_flag(const char *cat) {
    switch (cat[0]) {
    case 'L': return UNI_LETTER;
    case 'M': return UNI_MARK;
    case 'N': return UNI_NUMBER;
    case 'P': return UNI_PUNCT;
    case 'S': return UNI_SYMBOL;
    case 'Z': return UNI_SEPARATOR;
    case 'C': return cat[1] == 'n' ? UNI_UNDEFINED : UNI_CONTROL;
    default:
        fprintf(stderr, "gen_unicode: unknown category '%s'\n", cat);
        exit(1);
    }
}

/* Split a line at ';' into at most n fields (in place). */
static int split(char *line, char **field, int n) {
    int k = 0;
    field[k++] = line;
    for (char *p = line; *p && k < n; p++)
        if (*p == ';') {
            *p = 0;
            field[k++] = p + 1;
        }
    return k;
}

static void read_unicode_data(const char *dir) {
    FILE *f = open_ucd(dir, "UnicodeData.txt");
    char line[1024];
    uint32_t first = 0;
    int in_range = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        char *fd[15];
        if (split(line, fd, 15) != 15) continue;
        uint32_t cp = (uint32_t)strtoul(fd[0], NULL, 16);
        if (cp >= N_CPT) continue;
        uint16_t fl = category_flag(fd[2]);
        uint32_t lo = fd[13][0] ? (uint32_t)strtoul(fd[13], NULL, 16) : 0;
        uint8_t cc = (uint8_t)atoi(fd[3]);
        if (strstr(fd[1], ", First>")) {
            first = cp;
            in_range = 1;
            continue;
        }
        uint32_t start = in_range && strstr(fd[1], ", Last>") ? first : cp;
        in_range = 0;
        for (uint32_t c = start; c <= cp; c++) {
            flags[c] = fl;
            ccc[c] = cc;
        }
        if (lo && lo != cp) lower[cp] = lo;
        if (fd[5][0] && fd[5][0] != '<') { /* canonical decomposition: 1 or 2 code points */
            char *e;
            decomp[cp][0] = (uint32_t)strtoul(fd[5], &e, 16);
            decomp[cp][1] = (uint32_t)strtoul(e, &e, 16);
            while (*e == ' ') e++;
            if (*e) {
                fprintf(stderr, "gen_unicode: U+%04X: canonical decomposition longer than 2\n", cp);
                exit(1);
            }
        }
    }
    fclose(f);
}

/* "XXXX..YYYY ; Property [; Value] # comment" lines: mark(c) for Property ==
 * prop (and, when value is not NULL, a Value whose first letter is in it). */
static void read_prop(const char *dir, const char *file, const char *prop, const char *value, void (*mark)(uint32_t)) {
    FILE *f = open_ucd(dir, file);
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *semi = strchr(line, ';');
        if (!semi) continue;
        char name[128];
        if (sscanf(semi + 1, " %127[A-Za-z_]", name) != 1 || strcmp(name, prop) != 0) continue;
        if (value) { /* "code ; prop ; value" */
            char *semi2 = strchr(semi + 1, ';');
            char val[16];
            if (!semi2 || sscanf(semi2 + 1, " %15[A-Za-z]", val) != 1 || !strchr(value, val[0])) continue;
        }
        char *e;
        uint32_t a = (uint32_t)strtoul(line, &e, 16), b = a;
        if (e[0] == '.' && e[1] == '.') b = (uint32_t)strtoul(e + 2, NULL, 16);
        for (uint32_t c = a; c <= b && c < N_CPT; c++) mark(c);
    }
    fclose(f);
}

static void mark_ws(uint32_t c) { flags[c] |= UNI_WHITESPACE; }
static void mark_excl(uint32_t c) { excl[c] = 1; }
static void mark_nfc_maybe(uint32_t c) { flags[c] |= UNI_NFC_MAYBE; }

static const char *ucd_version(const char *dir) {
    static char v[64] = "unknown";
    FILE *f = open_ucd(dir, "PropList.txt");
    char line[256];
    if (fgets(line, sizeof line, f)) sscanf(line, "# PropList-%63[0-9.]", v);
    size_t n = strlen(v);
    if (n && v[n - 1] == '.') v[n - 1] = 0;
    fclose(f);
    return v;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/usr/share/unicode";
    flags = calloc(N_CPT, sizeof *flags);
    lower = calloc(N_CPT, sizeof *lower);
    ccc = calloc(N_CPT, 1);
    decomp = calloc(N_CPT, sizeof *decomp);
    excl = calloc(N_CPT, 1);
    if (!flags || !lower || !ccc || !decomp || !excl) return fprintf(stderr, "gen_unicode: out of memory\n"), 1;
    for (uint32_t c = 0; c < N_CPT; c++) flags[c] = UNI_UNDEFINED;
    read_unicode_data(dir);
    read_prop(dir, "PropList.txt", "White_Space", NULL, mark_ws);
    read_prop(dir, "DerivedNormalizationProps.txt", "Full_Composition_Exclusion", NULL, mark_excl);
    read_prop(dir, "DerivedNormalizationProps.txt", "NFC_QC", "NM", mark_nfc_maybe);

    printf("/* unicode_data.c — generated by tools/gen_unicode.c from the Unicode %s\n"
           " * Character Database (Debian unicode-data: UnicodeData.txt, PropList.txt,\n"
           " * DerivedNormalizationProps.txt).  Do not edit; run `make unicode`. */\n"
           "#include \"unicode.h\"\n\n",
           ucd_version(dir));
    printf("const char uni_version[] = \"%s\";\n\n", ucd_version(dir));

    /* flags: (start << 10 | flags), a run starts where the flags change */
    int n = 0;
    printf("/* (first code point << 10) | UNI_* flags of the run starting there */\n"
           "const uint32_t uni_flag_runs[] = {");
    for (uint32_t c = 0; c < N_CPT; c++) {
        if (c && flags[c] == flags[c - 1]) continue;
        printf("%s0x%08X,", n % 6 ? " " : "\n    ", c << 10 | flags[c]);
        n++;
    }
    printf("\n};\nconst size_t uni_n_flag_runs = %d;\n\n", n);

    printf("/* flags of U+0000..U+00FF, the fast path */\n"
           "const uint16_t uni_flags_latin1[256] = {");
    for (uint32_t c = 0; c < 256; c++) printf("%s0x%03X,", c % 12 ? " " : "\n    ", flags[c]);
    printf("\n};\n\n");

    n = 0;
    printf("/* simple lowercase mapping (UnicodeData field 13): {code point, lowercase} */\n"
           "const uint32_t uni_lower_map[][2] = {");
    for (uint32_t c = 0; c < N_CPT; c++) {
        if (!lower[c]) continue;
        printf("%s{0x%X, 0x%X},", n % 5 ? " " : "\n    ", c, lower[c]);
        n++;
    }
    printf("\n};\nconst size_t uni_n_lower_map = %d;\n\n", n);

    n = 0;
    printf("/* canonical decompositions (UnicodeData field 5 without a <tag>): {code point,\n"
           " * first, second or 0}; Hangul syllables are algorithmic and not listed */\n"
           "const uint32_t uni_decomp_map[][3] = {");
    for (uint32_t c = 0; c < N_CPT; c++) {
        if (!decomp[c][0]) continue;
        printf("%s{0x%X, 0x%X, 0x%X},", n % 4 ? " " : "\n    ", c, decomp[c][0], decomp[c][1]);
        n++;
    }
    printf("\n};\nconst size_t uni_n_decomp_map = %d;\n\n", n);

    n = 0;
    printf("/* canonical combining class runs (non-zero only): {first, last, class} */\n"
           "const uint32_t uni_ccc_runs[][3] = {");
    for (uint32_t c = 0; c < N_CPT; c++) {
        if (!ccc[c] || (c && ccc[c] == ccc[c - 1])) continue;
        uint32_t e = c;
        while (e + 1 < N_CPT && ccc[e + 1] == ccc[c]) e++;
        printf("%s{0x%X, 0x%X, %u},", n % 4 ? " " : "\n    ", c, e, ccc[c]);
        n++;
    }
    printf("\n};\nconst size_t uni_n_ccc_runs = %d;\n\n", n);

    /* primary composites: canonical pair decompositions that are not excluded,
     * sorted by (first, second) for binary search */
    typedef struct { uint32_t a, b, c; } comp;
    comp *cs = malloc(4096 * sizeof *cs);
    int nc = 0;
    for (uint32_t c = 0; c < N_CPT; c++)
        if (decomp[c][1] && !excl[c]) {
            if (nc == 4096) return fprintf(stderr, "gen_unicode: too many compositions\n"), 1;
            cs[nc++] = (comp){decomp[c][0], decomp[c][1], c};
        }
    for (int i = 1; i < nc; i++) /* insertion sort: deterministic, small */
        for (int j = i; j > 0 && (cs[j - 1].a > cs[j].a || (cs[j - 1].a == cs[j].a && cs[j - 1].b > cs[j].b)); j--) {
            comp t = cs[j];
            cs[j] = cs[j - 1];
            cs[j - 1] = t;
        }
    printf("/* canonical compositions (NFC): {first, second, composite}, sorted by (first, second);\n"
           " * Full_Composition_Exclusion removed, Hangul algorithmic and not listed */\n"
           "const uint32_t uni_comp_map[][3] = {");
    for (int i = 0; i < nc; i++) printf("%s{0x%X, 0x%X, 0x%X},", i % 4 ? " " : "\n    ", cs[i].a, cs[i].b, cs[i].c);
    printf("\n};\nconst size_t uni_n_comp_map = %d;\n", nc);
    free(cs);
    return 0;
}
