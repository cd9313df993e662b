/*
 * srv_webui.h — the web UI page `cinfer serve` answers at GET /: one static
 * HTML file (runtime/server/webui/index.html: HTML, CSS and vanilla JS, no external
 * resources) embedded in the binary by tools/embed.c.  Internal to the server.
 */
#ifndef CINFER_SRV_WEBUI_H
#define CINFER_SRV_WEBUI_H

#include <stddef.h>

/* The page's bytes and length; NULL when this build did not embed it. */
const char *srv_webui_html(size_t *len);
/* The page's Content-Security-Policy, malloc'd: nothing may load from
 * elsewhere (default-src 'none'), fetch only to this origin, and the inline
 * <script> and <style> run by their SHA-256 hashes (CSP Level 2 hash
 * sources, base64 of the digest of the element's text).  NULL when the page
 * is missing or out of memory. */
char *srv_webui_csp(void);

#endif
