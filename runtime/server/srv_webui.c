/*
 * srv_webui.c — see srv_webui.h.
 */
#include "srv_webui.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/embedded.h"

#define WEBUI_NAME "runtime/server/webui/index.html"

const char *srv_webui_html(size_t *len) {
    for (const embedded_file *f = embedded_files; f->name; f++)
        if (!strcmp(f->name, WEBUI_NAME)) {
            *len = f->len;
            return f->data;
        }
    *len = 0;
    return NULL;
}

/* "'sha256-BASE64'" of the text between the first <tag> and </tag> of html,
 * into out (cap >= 64); "" when the element is absent. */
static void hash_source(const char *html, const char *tag, char *out, size_t cap) {
    char open[16], close[16];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    out[0] = 0;
    const char *a = strstr(html, open);
    const char *b = a ? strstr(a, close) : NULL;
    if (!b) return;
    a += strlen(open);
    unsigned char md[crypto_hash_sha256_BYTES];
    char b64[64];
    /* libsodium (as bundles link it statically): sha256, standard base64 with padding */
    if (crypto_hash_sha256(md, (const unsigned char *)a, (unsigned long long)(b - a))) return;
    sodium_bin2base64(b64, sizeof b64, md, sizeof md, sodium_base64_VARIANT_ORIGINAL);
    snprintf(out, cap, "'sha256-%s'", b64);
}

char *srv_webui_csp(void) {
    size_t len;
    const char *html = srv_webui_html(&len);
    if (!html) return NULL;
    char script[80], style[80];
    hash_source(html, "script", script, sizeof script);
    hash_source(html, "style", style, sizeof style);
    char *csp = malloc(512);
    if (!csp) return NULL;
    snprintf(csp, 512,
             "default-src 'none'; script-src %s; style-src %s; connect-src 'self'; img-src data:; "
             "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
             script[0] ? script : "'none'", style[0] ? style : "'none'");
    return csp;
}
