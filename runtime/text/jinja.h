/*
 * jinja.h — a Jinja2 interpreter for chat templates.
 *
 * It renders the `tokenizer.chat_template` strings that models ship byte for
 * byte as Hugging Face transformers renders them: jinja2 3.1 with
 * ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
 * extensions=[loopcontrols]), `tojson` replaced by
 * json.dumps(x, ensure_ascii=False, indent=None, separators=None,
 * sort_keys=False), and the globals raise_exception(msg) and
 * strftime_now(fmt) (transformers/utils/chat_template_utils.py,
 * _compile_jinja_template).  Values follow Python semantics (str(), repr(),
 * ==, truthiness, int/float arithmetic, slicing, str/dict/list methods) and
 * jinja2's default Undefined (prints as "", is falsy and iterable as empty;
 * attribute access, arithmetic and calls on it are errors).
 *
 * Covered: {{ }}, {% %}, {# #} with -/+ whitespace control, raw; if/elif/
 * else, for (loop.*, else, `if` filter, tuple targets, break/continue), set
 * (names, tuples, namespace attributes, block set), macro/call/caller,
 * filter blocks, with, the `generation` tag of transformers (renders its
 * body); literals, attribute/subscript/slice, calls with *args and **kwargs,
 * arithmetic, ~, comparisons, in, and/or/not, a if b else c, the jinja2
 * filters and tests except those listed under "not covered".
 *
 * Not covered, each a clear error naming the template line, never a silently
 * different output: extends/include/import/block, recursive loops, filters
 * filesizeformat/groupby/pprint/random/striptags/urlencode/urlize/wordwrap/
 * xmlattr, globals cycler/joiner/lipsum/self, str.format with format specs,
 * integers beyond 64 bits, printing values whose Python text holds a memory
 * address (generators, methods).
 *
 * Known differences (none reachable by the templates in ../shared):
 *  - case mapping (upper/lower/title/...) knows ASCII, Latin-1, Latin
 *    Extended-A, basic Greek and Cyrillic only (no final-sigma rule), and
 *    repr() escapes the non-printable characters of those tables and of the
 *    C0/C1/format/separator ranges only;
 *  - given a parsed cJSON (jinja_render), numbers arrive as doubles: an
 *    integral value within ±2^53 becomes a Python int, any other a float (so
 *    JSON `1.0` renders as `1`); jinja_render_json reads them exactly.  JSON
 *    strings end at an escaped NUL (a cJSON limit).
 * Where jinja2's compiler rather than Python decides a result, that is
 * reproduced too: its scope analysis (a name a scope assigns before reading
 * is undefined there until assigned, even to macros), constant folding (a
 * folded slice goes through Environment.getitem: undefined, not TypeError),
 * the for-else flag (cleared at the end of the body, so continue and break
 * leave the else block to run), lazy generator filters, and "".join() of a
 * filter block's non-string value (TypeError).
 *
 * Limits: every render is bounded in steps, output bytes, working memory and
 * nesting depth (jinja_limits), so a hostile template cannot hang or exhaust
 * memory; a template is parsed with bounded expression/statement nesting.
 *
 * Thread safety: a parsed jinja_template is immutable and may be rendered
 * from several threads at once; all render state lives in the call.
 */
#ifndef CINFER_JINJA_H
#define CINFER_JINJA_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cJSON.h>

/* Error codes (negative). */
enum {
    JINJA_OK = 0,
    JINJA_ERR_SYNTAX = -1,      /* template does not parse (TemplateSyntaxError, unknown filter/test) */
    JINJA_ERR_RUNTIME = -2,     /* render failed as Python would (TypeError, UndefinedError, ...) */
    JINJA_ERR_RAISED = -3,      /* the template called raise_exception(msg) */
    JINJA_ERR_LIMIT = -4,       /* a jinja_limits bound was hit */
    JINJA_ERR_UNSUPPORTED = -5, /* valid jinja2 this interpreter does not implement */
    JINJA_ERR_NOMEM = -6,
};

typedef struct jinja_template jinja_template;

/* Bounds on one render; 0 selects the default in brackets. */
typedef struct jinja_limits {
    size_t max_output_bytes; /* rendered text, including macro/set captures [16 MiB] */
    size_t max_mem_bytes;    /* working memory of values and scopes [256 MiB] */
    uint64_t max_steps;      /* statements + expressions + loop iterations [20M] */
    int max_depth;           /* evaluation nesting (a macro call takes ~4) [500]; ~400 B of stack each */
} jinja_limits;

typedef struct jinja_render_opts {
    jinja_limits limits;
    /* Clock of strftime_now(): NULL means the local time at the call.  A
     * fixed time makes output reproducible (like transformers with a frozen
     * datetime.now(); %z and %Z render empty for this naive time). */
    const struct tm *now;
} jinja_render_opts;

/* Parse a template (len bytes; need not be NUL-terminated).  On success
 * *out owns a compiled template (free with jinja_free).  On error returns a
 * JINJA_ERR_* code and writes "jinja: line N: what" into err. */
int jinja_parse(const char *src, size_t len, jinja_template **out, char *err, size_t err_len);
void jinja_free(jinja_template *t); /* NULL is a no-op */

/* Render with the variables of `vars` (a cJSON object, may be NULL; keys are
 * template variable names, e.g. messages, tools, add_generation_prompt,
 * bos_token).  On success *out is a malloc'd NUL-terminated UTF-8 string the
 * caller frees, *out_len its length (may be NULL).  On error returns a
 * JINJA_ERR_* code, *out is NULL, and err holds "jinja: line N: what"; for
 * JINJA_ERR_RAISED it is "jinja: line N: raise_exception: MESSAGE". */
int jinja_render(const jinja_template *t, const cJSON *vars, const jinja_render_opts *opts, char **out,
                 size_t *out_len, char *err, size_t err_len);

/* The same with the variables as JSON text (len bytes): numbers keep their
 * JSON spelling's type exactly as json.loads gives them ("1.0" a float, "1"
 * an int), which a parsed cJSON cannot tell. */
int jinja_render_json(const jinja_template *t, const char *vars_json, size_t len, const jinja_render_opts *opts,
                      char **out, size_t *out_len, char *err, size_t err_len);

#endif
