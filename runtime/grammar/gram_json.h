/*
 * gram_json.h — JSON text for the grammar modules: the canonical form every
 * grammar accepts and generates (gram_fa.h says what it is), a strict parser
 * for schemas that keeps each number's exact decimal text, and the printer
 * that turns a parsed value back into canonical text.
 *
 * Layer: above gram_fa (numbers), below the schema compiler; it knows
 * nothing of grammars.
 */
#ifndef CINFER_GRAM_JSON_H
#define CINFER_GRAM_JSON_H

#include <stddef.h>

/* Nesting the parser and the canonicaliser accept (arrays and objects). */
#define GRAM_JSON_DEPTH 512
/* Longest canonical number text (a literal like 1e9999 expands to this many digits). */
#define GRAM_JSON_NUMBER_MAX 4096

struct cJSON;

/* Rewrite JSON text json[0..len) into canonical form: no whitespace,
 * strings with the one escaping, numbers in canonical decimal.  Returns 0
 * and a malloc'd *out (*out_len bytes, NUL-terminated), or -1 with a
 * message naming the byte offset (malformed JSON, invalid UTF-8, lone
 * surrogate, nesting deeper than GRAM_JSON_DEPTH, a number longer than
 * GRAM_JSON_NUMBER_MAX digits, trailing bytes).  Duplicate keys are kept:
 * whether a value may repeat a key is the grammar's business. */
int gram_canon(const char *json, size_t len, char **out, size_t *out_len, char *err, size_t err_len);

/* Parse text[0..len) strictly: one JSON value, only whitespace after it,
 * nesting at most GRAM_JSON_DEPTH, no object with a repeated key (a schema
 * with one means different things to different parsers).  Each number node
 * gets its literal's canonical decimal text in valuestring (cJSON frees it
 * with the node), so bounds like 9223372036854775807 stay exact.  Returns
 * the document (cJSON_Delete) or NULL with a one-line message in err
 * ("not valid JSON near byte 12", "duplicate key \"type\" at /properties/a",
 * "out of memory"). */
struct cJSON *gram_json_parse(const char *text, size_t len, char *err, size_t err_len);

/* Canonical JSON text of a parsed value (numbers from valuestring when
 * gram_json_parse set it).  malloc'd; NULL when out of memory, nested
 * deeper than GRAM_JSON_DEPTH, or a string is not valid UTF-8. */
char *gram_json_print(const struct cJSON *v);

/* The same with every object's members sorted by key: equal texts exactly
 * when the values are equal under JSON Schema's rules (numbers by value,
 * object member order ignored, true distinct from 1). */
char *gram_json_value_key(const struct cJSON *v);

/* Canonical JSON string literal (with quotes) for UTF-8 text s[0..len).
 * malloc'd, *out_len bytes; NULL when out of memory or s is not UTF-8. */
char *gram_json_string(const char *s, size_t len, size_t *out_len);

#endif
