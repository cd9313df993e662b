/*
 * hf_map.c — the per-family mapping tables of Hugging Face folders
 * (archspecs/<arch>.hf.lua, vocabulary in hf.h): loaded in a sandboxed Lua
 * state, their static parts read into hf_map, and evaluated against a
 * config.json (hparams, constants, expect) into GGUF metadata.  Its own
 * module, apart from the loader (hf.c), so that programs that never open a
 * folder (bundles) neither link Lua nor need its headers.
 */
#include "hf_impl.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/specfile.h"

#define seterr hf_seterr

int hf_seterr(char *err, size_t err_len, int code, const char *fmt, ...) {
    if (err && err_len) {
        int k = snprintf(err, err_len, "hf: ");
        if (k < 0 || (size_t)k >= err_len) return code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + k, err_len - (size_t)k, fmt, ap);
        va_end(ap);
        for (char *p = err; *p; p++)
            if (*p == '\n' || *p == '\r') *p = ' ';
    }
    return code;
}

/* A short printable rendering of a JSON value for messages. */
static void json_brief(const cJSON *v, char *buf, size_t cap) {
    char *s = v ? cJSON_PrintUnformatted(v) : NULL;
    if (!s) {
        snprintf(buf, cap, "%s", v ? "(value)" : "(absent)");
        return;
    }
    if (strlen(s) > 60) snprintf(buf, cap, "%.57s...", s);
    else snprintf(buf, cap, "%s", s);
    free(s);
}

/* ==== the mapping (Lua) ======================================================= */

/* Loaded before every mapping file: the helpers of the vocabulary (hf.h). */
static const char map_prelude[] =
    "null = setmetatable({}, {__tostring = function() return 'null' end, __name = 'null'})\n"
    "function opt(k) return {k, optional = true} end\n"
    "function float(e) if type(e) == 'string' then e = {e} end e.float = true return e end\n";

static int map_msgh(lua_State *L) {
    const char *m = lua_tostring(L, 1);
    lua_pushstring(L, m ? m : "(error object is not a string)");
    return 1;
}

static lua_State *new_sandbox(void) {
    lua_State *L = luaL_newstate();
    if (!L) return NULL;
    luaL_requiref(L, "_G", luaopen_base, 1);
    luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
    luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
    luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
    lua_pop(L, 4);
    static const char *const unsafe[] = {"dofile", "loadfile", "load", "require", "collectgarbage"};
    for (size_t i = 0; i < sizeof unsafe / sizeof *unsafe; i++) {
        lua_pushnil(L);
        lua_setglobal(L, unsafe[i]);
    }
    return L;
}

/* Run chunk src (named name); leave its one result on the stack.  0 or -1 with err. */
static int run_chunk(lua_State *L, const char *src, size_t len, const char *name, int nres, char *err, size_t err_len) {
    char chunk[256];
    snprintf(chunk, sizeof chunk, "@%s", name);
    lua_pushcfunction(L, map_msgh);
    int base = lua_gettop(L);
    int rc = luaL_loadbufferx(L, src, len, chunk, "t");
    if (rc == LUA_OK) rc = lua_pcall(L, 0, nres, base);
    if (rc != LUA_OK) {
        seterr(err, err_len, GGUF_EFORMAT, "mapping %s", lua_tostring(L, -1));
        lua_settop(L, base - 1);
        return -1;
    }
    lua_remove(L, base);
    return 0;
}

static char *lua_strdup_field(lua_State *L, int idx, const char *k) {
    lua_getfield(L, idx, k);
    const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    char *c = s ? strdup(s) : NULL;
    lua_pop(L, 1);
    return c;
}

/* A list of strings at field k of the table at idx. */
static int read_str_list(lua_State *L, int idx, const char *k, char ***out, size_t *n, const char *file, char *err,
                         size_t err_len) {
    *out = NULL;
    *n = 0;
    lua_getfield(L, idx, k);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return 0;
    }
    if (!lua_istable(L, -1)) {
        lua_pop(L, 1);
        return seterr(err, err_len, GGUF_EFORMAT, "mapping %s: '%s' must be a list of strings", file, k);
    }
    size_t len = (size_t)lua_rawlen(L, -1);
    *out = calloc(len ? len : 1, sizeof **out);
    if (!*out) {
        lua_pop(L, 1);
        return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < len; i++) {
        lua_rawgeti(L, -1, (lua_Integer)i + 1);
        if (lua_type(L, -1) != LUA_TSTRING) {
            lua_pop(L, 2);
            return seterr(err, err_len, GGUF_EFORMAT, "mapping %s: '%s'[%zu] is not a string", file, k, i + 1);
        }
        (*out)[i] = strdup(lua_tostring(L, -1));
        lua_pop(L, 1);
        if (!(*out)[i]) {
            lua_pop(L, 1);
            return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
        }
        (*n)++;
    }
    lua_pop(L, 1);
    return 0;
}

static void free_list(char **l, size_t n) {
    for (size_t i = 0; l && i < n; i++) free(l[i]);
    free(l);
}

void hf_map_free(hf_map *m) {
    if (!m) return;
    free_list(m->architectures, m->n_architectures);
    for (size_t i = 0; i < m->n_tensors; i++) {
        free(m->tensors[i].hf);
        free(m->tensors[i].gguf);
        free(m->tensors[i].permute);
    }
    free(m->tensors);
    for (size_t i = 0; i < m->n_hparams; i++) {
        free(m->hparams[i].key);
        free(m->hparams[i].config_key);
    }
    free(m->hparams);
    free_list(m->constant_keys, m->n_constants);
    free_list(m->ignore, m->n_ignore);
    free_list(m->strip_prefix, m->n_strip_prefix);
    if (m->lua) lua_close(m->lua);
    free(m);
}

/* Count of "%d" in s, or -1 when s has any other '%'. */
static int n_layer_slots(const char *s) {
    int n = 0;
    for (const char *p = s; *p; p++)
        if (*p == '%') {
            if (p[1] != 'd') return -1;
            n++;
            p++;
        }
    return n;
}

static int cmp_cstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int cmp_hparam(const void *a, const void *b) {
    return strcmp(((const hf_map_hparam *)a)->key, ((const hf_map_hparam *)b)->key);
}

/* The config.json key of hparam entry at idx (string or table), or NULL. */
static const char *entry_key(lua_State *L, int idx) {
    if (lua_type(L, idx) == LUA_TSTRING) return lua_tostring(L, idx);
    if (!lua_istable(L, idx)) return NULL;
    lua_rawgeti(L, idx, 1);
    const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    lua_pop(L, 1); /* the string stays alive: the entry table holds it */
    return k;
}

/* Read the static description of the mapping table on top of L. */
static int read_map(lua_State *L, hf_map *m, char *err, size_t err_len) {
    const char *f = m->file;
    int t = lua_gettop(L);
    if (!lua_istable(L, t)) return seterr(err, err_len, GGUF_EFORMAT, "mapping %s: must return a table", f);
    int rc;
    if ((rc = read_str_list(L, t, "architectures", &m->architectures, &m->n_architectures, f, err, err_len)) ||
        (rc = read_str_list(L, t, "ignore", &m->ignore, &m->n_ignore, f, err, err_len)) ||
        (rc = read_str_list(L, t, "strip_prefix", &m->strip_prefix, &m->n_strip_prefix, f, err, err_len)))
        return rc;
    if (!m->n_architectures) return seterr(err, err_len, GGUF_EFORMAT, "mapping %s: 'architectures' is empty", f);
    for (size_t i = 0; i < m->n_ignore; i++)
        if (n_layer_slots(m->ignore[i]) < 0 || n_layer_slots(m->ignore[i]) > 1)
            return seterr(err, err_len, GGUF_EFORMAT, "mapping %s: ignore '%s': at most one %%d, no other %%", f,
                          m->ignore[i]);
    lua_getfield(L, t, "tie_word_embeddings");
    m->tie_default = lua_toboolean(L, -1);
    lua_pop(L, 1);
    char *to = lua_strdup_field(L, t, "tied_output");
    m->output_alias = to && !strcmp(to, "alias");
    bool bad_to = to && strcmp(to, "alias") && strcmp(to, "omit");
    free(to);
    if (bad_to) return seterr(err, err_len, GGUF_EFORMAT, "mapping %s: tied_output must be \"alias\" or \"omit\"", f);

    /* tensors */
    lua_getfield(L, t, "tensors");
    if (!lua_istable(L, -1)) return seterr(err, err_len, GGUF_EFORMAT, "mapping %s: 'tensors' must be a list", f);
    size_t n = (size_t)lua_rawlen(L, -1);
    m->tensors = calloc(n ? n : 1, sizeof *m->tensors);
    if (!m->tensors) return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, -1, (lua_Integer)i + 1);
        int e = lua_gettop(L);
        hf_map_tensor *mt = &m->tensors[m->n_tensors];
        if (!lua_istable(L, e))
            return seterr(err, err_len, GGUF_EFORMAT, "mapping %s: tensors[%zu] must be {HF, GGUF, ...}", f, i + 1);
        lua_rawgeti(L, e, 1);
        lua_rawgeti(L, e, 2);
        if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
            return seterr(err, err_len, GGUF_EFORMAT, "mapping %s: tensors[%zu] must start with two names", f, i + 1);
        mt->hf = strdup(lua_tostring(L, -2));
        mt->gguf = strdup(lua_tostring(L, -1));
        lua_pop(L, 2);
        m->n_tensors++;
        if (!mt->hf || !mt->gguf) return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
        int a = n_layer_slots(mt->hf), b = n_layer_slots(mt->gguf);
        if (a < 0 || a > 1 || a != b)
            return seterr(err, err_len, GGUF_EFORMAT,
                          "mapping %s: tensors[%zu] '%s' -> '%s': both names need the same single %%d (or none)", f,
                          i + 1, mt->hf, mt->gguf);
        mt->permute = lua_strdup_field(L, e, "permute");
        lua_getfield(L, e, "add");
        mt->add = (float)lua_tonumber(L, -1);
        lua_pop(L, 1);
        lua_getfield(L, e, "transpose");
        mt->transpose = lua_toboolean(L, -1);
        lua_pop(L, 2);
    }
    lua_pop(L, 1);

    /* hparams: keys, config keys, float flags (values come in map_eval) */
    lua_getfield(L, t, "hparams");
    if (!lua_istable(L, -1)) return seterr(err, err_len, GGUF_EFORMAT, "mapping %s: 'hparams' must be a table", f);
    size_t cap = 0;
    for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1)) {
        if (lua_type(L, -2) != LUA_TSTRING) {
            lua_pop(L, 3);
            return seterr(err, err_len, GGUF_EFORMAT, "mapping %s: hparams keys must be strings", f);
        }
        const char *ck = entry_key(L, -1);
        if (!ck) {
            const char *k = lua_tostring(L, -2);
            char kb[128];
            snprintf(kb, sizeof kb, "%s", k);
            lua_pop(L, 3);
            return seterr(err, err_len, GGUF_EFORMAT, "mapping %s: hparams.%s: expected \"key\" or {\"key\", ...}", f, kb);
        }
        if (m->n_hparams == cap) {
            cap = cap ? cap * 2 : 16;
            hf_map_hparam *nh = realloc(m->hparams, cap * sizeof *nh);
            if (!nh) return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
            m->hparams = nh;
        }
        hf_map_hparam *h = &m->hparams[m->n_hparams++];
        h->key = strdup(lua_tostring(L, -2));
        h->config_key = strdup(ck);
        h->is_float = false;
        if (lua_istable(L, -1)) {
            lua_getfield(L, -1, "float");
            h->is_float = lua_toboolean(L, -1);
            lua_pop(L, 1);
        }
        if (!h->key || !h->config_key) return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
    }
    lua_pop(L, 1);
    if (m->n_hparams) qsort(m->hparams, m->n_hparams, sizeof *m->hparams, cmp_hparam);

    lua_getfield(L, t, "constants");
    if (lua_istable(L, -1)) {
        size_t ccap = 0;
        for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1)) {
            if (lua_type(L, -2) != LUA_TSTRING) continue;
            if (m->n_constants == ccap) {
                ccap = ccap ? ccap * 2 : 4;
                char **nk = realloc(m->constant_keys, ccap * sizeof *nk);
                if (!nk) return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
                m->constant_keys = nk;
            }
            if (!(m->constant_keys[m->n_constants++] = strdup(lua_tostring(L, -2))))
                return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
        }
    }
    lua_pop(L, 1);
    if (m->n_constants) qsort(m->constant_keys, m->n_constants, sizeof *m->constant_keys, cmp_cstr);
    return 0;
}

/* Load archspecs/NAME.hf.lua (file) into a fresh map; the table stays at
 * registry slot "map" of its Lua state for map_eval. */
static int map_open_file(const char *file, hf_map **out, char *err, size_t err_len) {
    *out = NULL;
    hf_map *m = calloc(1, sizeof *m);
    if (!m) return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
    snprintf(m->file, sizeof m->file, "%s", file);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    const char *dot = strstr(base, ".hf.lua");
    snprintf(m->arch, sizeof m->arch, "%.*s", dot ? (int)(dot - base) : (int)strlen(base), base);
    char *src = NULL;
    size_t len = 0;
    char e[512];
    if (spec_file_read(file, &src, &len, e, sizeof e)) {
        free(m);
        return seterr(err, err_len, GGUF_ENOTFOUND, "mapping %s", e);
    }
    lua_State *L = new_sandbox();
    m->lua = L;
    int rc = 0;
    if (!L) rc = seterr(err, err_len, GGUF_ENOMEM, "cannot create a Lua state");
    else if (run_chunk(L, map_prelude, sizeof map_prelude - 1, "hf-prelude", 0, err, err_len) ||
             run_chunk(L, src, len, file, 1, err, err_len))
        rc = GGUF_EFORMAT;
    else if (!(rc = read_map(L, m, err, err_len))) {
        lua_setfield(L, LUA_REGISTRYINDEX, "map");
    }
    free(src);
    if (rc) {
        hf_map_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int hf_map_load(const char *arch, const char *hf_arch, hf_map **out, char *err, size_t err_len) {
    *out = NULL;
    if (arch) {
        if (!*arch || strchr(arch, '/') || strchr(arch, '.'))
            return seterr(err, err_len, GGUF_ENOTFOUND, "no mapping for architecture '%.64s'", arch);
        char file[160];
        snprintf(file, sizeof file, "archspecs/%s.hf.lua", arch);
        return map_open_file(file, out, err, err_len);
    }
    char **names;
    size_t n;
    char e[512];
    if (spec_file_list("archspecs", ".hf.lua", &names, &n, e, sizeof e))
        return seterr(err, err_len, GGUF_EIO, "%s", e);
    char known[1024] = "";
    size_t kl = 0;
    int rc = GGUF_ENOTFOUND;
    for (size_t i = 0; i < n && rc == GGUF_ENOTFOUND; i++) {
        hf_map *m;
        int r = map_open_file(names[i], &m, err, err_len);
        if (r) {
            rc = r;
            break;
        }
        for (size_t k = 0; k < m->n_architectures; k++) {
            if (hf_arch && !strcmp(m->architectures[k], hf_arch)) {
                *out = m;
                rc = 0;
                break;
            }
            int w = snprintf(known + kl, sizeof known - kl, "%s%s", kl ? ", " : "", m->architectures[k]);
            if (w > 0 && (size_t)w < sizeof known - kl) kl += (size_t)w;
        }
        if (rc) hf_map_free(m);
    }
    spec_file_names_free(names, n);
    if (rc == GGUF_ENOTFOUND)
        seterr(err, err_len, rc, "architecture '%.80s' has no mapping (supported: %s)", hf_arch ? hf_arch : "?", known);
    return rc;
}

/* ==== config.json in Lua ======================================================= */

static void push_json(lua_State *L, const cJSON *j, int depth) {
    luaL_checkstack(L, 4, "config.json nesting");
    if (!j || cJSON_IsNull(j) || depth > 64) {
        lua_getglobal(L, "null");
    } else if (cJSON_IsBool(j)) {
        lua_pushboolean(L, cJSON_IsTrue(j));
    } else if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (isfinite(d) && floor(d) == d && fabs(d) < 9007199254740992.0) lua_pushinteger(L, (lua_Integer)d);
        else lua_pushnumber(L, d);
    } else if (cJSON_IsString(j)) {
        lua_pushstring(L, j->valuestring);
    } else if (cJSON_IsArray(j)) {
        lua_createtable(L, cJSON_GetArraySize(j), 0);
        int i = 1;
        for (const cJSON *c = j->child; c; c = c->next) {
            push_json(L, c, depth + 1);
            lua_rawseti(L, -2, i++);
        }
    } else if (cJSON_IsObject(j)) {
        lua_createtable(L, 0, cJSON_GetArraySize(j));
        for (const cJSON *c = j->child; c; c = c->next) {
            if (!c->string) continue;
            push_json(L, c, depth + 1);
            lua_setfield(L, -2, c->string);
        }
    } else {
        lua_getglobal(L, "null");
    }
}

static bool is_null(lua_State *L, int idx) {
    lua_getglobal(L, "null");
    bool r = lua_rawequal(L, idx < 0 ? idx - 1 : idx, -1);
    lua_pop(L, 1);
    return r;
}

/* ---- metadata being assembled -------------------------------------------------- */

void hf_kv_free(hf_kv_list *l) {
    for (size_t i = 0; i < l->n; i++) {
        free(l->kv[i].key);
        free(l->kv[i].owned);
    }
    free(l->kv);
}

/* Append key = v; the key replaces an earlier entry of the same key. */
int hf_kv_add(hf_kv_list *l, const char *key, gguf_value v, char *owned) {
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->kv[i].key, key)) {
            free(l->kv[i].owned);
            l->kv[i].v = v;
            l->kv[i].owned = owned;
            return 0;
        }
    if (l->n == l->cap) {
        size_t c = l->cap ? l->cap * 2 : 32;
        hf_kv *n = realloc(l->kv, c * sizeof *n);
        if (!n) return free(owned), -1;
        l->kv = n;
        l->cap = c;
    }
    char *k = strdup(key);
    if (!k) return free(owned), -1;
    l->kv[l->n++] = (hf_kv){k, v, owned};
    return 0;
}

/* A string value owning a copy of s[0..n). */
int hf_kv_add_str(hf_kv_list *l, const char *key, const char *s, size_t n) {
    char *c = malloc(n + 1);
    if (!c) return -1;
    memcpy(c, s, n);
    c[n] = 0;
    gguf_value v = {.type = GGUF_VT_STRING};
    v.v.str = (gguf_str){n, c};
    return hf_kv_add(l, key, v, c);
}

/* The Lua value at idx as a GGUF value under key; -1 with err for other types. */
static int kv_add_lua(hf_kv_list *l, lua_State *L, int idx, const char *key, bool as_float, const char *what, char *err,
                      size_t err_len) {
    gguf_value v = {0};
    int t = lua_type(L, idx);
    if (t == LUA_TBOOLEAN) {
        v.type = GGUF_VT_BOOL;
        v.v.b = lua_toboolean(L, idx);
    } else if (t == LUA_TNUMBER && (as_float || !lua_isinteger(L, idx))) {
        v.type = GGUF_VT_FLOAT32;
        v.v.f64 = (float)lua_tonumber(L, idx);
    } else if (t == LUA_TNUMBER) {
        lua_Integer x = lua_tointeger(L, idx);
        if (x >= 0 && x <= (lua_Integer)UINT32_MAX) {
            v.type = GGUF_VT_UINT32;
            v.v.u64 = (uint64_t)x;
        } else {
            v.type = GGUF_VT_INT64;
            v.v.i64 = x;
        }
    } else if (t == LUA_TSTRING) {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        if (hf_kv_add_str(l, key, s, n)) return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
        return 0;
    } else {
        return seterr(err, err_len, GGUF_EFORMAT, "%s: expected a number, boolean or string, got a %s", what,
                      is_null(L, idx) ? "null" : luaL_typename(L, idx));
    }
    if (hf_kv_add(l, key, v, NULL)) return seterr(err, err_len, GGUF_ENOMEM, "out of memory");
    return 0;
}

/* Evaluate the mapping against config: hparams and constants into kvs, the
 * expect checks.  cfg_json is the parsed config.json (for messages). */
int hf_map_eval(hf_map *m, const cJSON *cfg_json, hf_kv_list *kvs, const char *dir, char *err, size_t err_len) {
    lua_State *L = m->lua;
    int top = lua_gettop(L);
    lua_pushcfunction(L, map_msgh);
    int msgh = lua_gettop(L);
    push_json(L, cfg_json, 0);
    int cfg = lua_gettop(L);
    lua_getfield(L, LUA_REGISTRYINDEX, "map");
    int map = lua_gettop(L);
    int rc = 0;
    char key[192], what[256];

    /* expect */
    lua_getfield(L, map, "expect");
    if (lua_istable(L, -1)) {
        int ex = lua_gettop(L);
        for (lua_pushnil(L); !rc && lua_next(L, ex); lua_pop(L, 1)) {
            if (lua_type(L, -2) != LUA_TSTRING) continue;
            const char *name = lua_tostring(L, -2);
            int spec = lua_gettop(L);
            lua_getfield(L, cfg, name);
            int val = lua_gettop(L);
            bool absent = lua_isnil(L, val), null = !absent && is_null(L, val), ok = false;
            const cJSON *jv = cJSON_GetObjectItemCaseSensitive(cfg_json, name);
            if (absent) ok = true;
            else if (lua_isfunction(L, spec)) {
                lua_pushvalue(L, spec);
                lua_pushvalue(L, val);
                lua_pushvalue(L, cfg);
                if (lua_pcall(L, 2, 1, msgh) != LUA_OK) {
                    rc = seterr(err, err_len, GGUF_EFORMAT, "%s: config.json \"%s\": mapping %s: %s", dir, name, m->file,
                                lua_tostring(L, -1));
                    lua_settop(L, val);
                    break;
                }
                ok = lua_toboolean(L, -1);
                lua_pop(L, 1);
            } else if (lua_istable(L, spec) && !is_null(L, spec)) {
                size_t n = (size_t)lua_rawlen(L, spec);
                for (size_t i = 1; i <= n && !ok; i++) {
                    lua_rawgeti(L, spec, (lua_Integer)i);
                    ok = is_null(L, -1) ? null : lua_compare(L, -1, val, LUA_OPEQ);
                    lua_pop(L, 1);
                }
            } else if (is_null(L, spec)) {
                ok = null;
            } else {
                ok = lua_compare(L, spec, val, LUA_OPEQ);
            }
            if (!ok) {
                char vb[96];
                json_brief(jv, vb, sizeof vb);
                rc = seterr(err, err_len, GGUF_EFORMAT,
                            "%s: config.json \"%s\" is %s: archspecs/%s.lua does not compute that variant (%s)", dir,
                            name, vb, m->arch, m->file);
            }
            lua_settop(L, spec);
        }
    }
    lua_settop(L, map);

    /* hparams */
    lua_getfield(L, map, "hparams");
    int hp = lua_gettop(L);
    for (size_t i = 0; !rc && i < m->n_hparams; i++) {
        hf_map_hparam *h = &m->hparams[i];
        snprintf(key, sizeof key, "%s.%s", m->arch, h->key);
        snprintf(what, sizeof what, "%s: config.json \"%s\" (for %s)", dir, h->config_key, key);
        lua_getfield(L, hp, h->key);
        int e = lua_gettop(L);
        bool optional = false;
        int has_default = 0, has_null = 0;
        if (lua_istable(L, e)) {
            lua_getfield(L, e, "optional");
            optional = lua_toboolean(L, -1);
            lua_pop(L, 1);
            lua_rawgeti(L, e, 2);
            has_default = !lua_isnil(L, -1);
            lua_pop(L, 1);
            lua_getfield(L, e, "null");
            has_null = !lua_isnil(L, -1);
            lua_pop(L, 1);
        }
        lua_getfield(L, cfg, h->config_key);
        int v = lua_gettop(L);
        bool absent = lua_isnil(L, v), null = !absent && is_null(L, v);
        if (null && has_null) {
            lua_getfield(L, e, "null");
        } else if (absent || null) {
            if (has_default) {
                lua_rawgeti(L, e, 2);
                if (lua_isfunction(L, -1)) {
                    lua_pushvalue(L, cfg);
                    if (lua_pcall(L, 1, 1, msgh) != LUA_OK) {
                        rc = seterr(err, err_len, GGUF_EFORMAT, "%s: mapping %s: %s", what, m->file, lua_tostring(L, -1));
                        break;
                    }
                }
                if (lua_isnil(L, -1)) { /* a default function may decline */
                    lua_settop(L, hp);
                    continue;
                }
            } else if (optional) {
                lua_settop(L, hp);
                continue;
            } else {
                rc = seterr(err, err_len, GGUF_EFORMAT, "%s: is %s, %s needs it (%s)", what, null ? "null" : "missing",
                            m->arch, m->file);
                break;
            }
        } else {
            lua_pushvalue(L, v);
        }
        if (lua_type(L, -1) == LUA_TSTRING) { /* hyperparameters are numbers or booleans */
            rc = seterr(err, err_len, GGUF_EFORMAT, "%s: expected a number, got the string \"%.40s\"", what,
                        lua_tostring(L, -1));
            break;
        }
        rc = kv_add_lua(kvs, L, -1, key, h->is_float, what, err, err_len);
        lua_settop(L, hp);
    }
    lua_settop(L, map);

    /* constants */
    lua_getfield(L, map, "constants");
    if (!rc && lua_istable(L, -1)) {
        int ct = lua_gettop(L);
        for (size_t i = 0; !rc && i < m->n_constants; i++) {
            snprintf(key, sizeof key, "%s.%s", m->arch, m->constant_keys[i]);
            lua_getfield(L, ct, m->constant_keys[i]);
            snprintf(what, sizeof what, "mapping %s: constants.%s", m->file, m->constant_keys[i]);
            rc = kv_add_lua(kvs, L, -1, key, false, what, err, err_len);
            lua_pop(L, 1);
        }
    }
    lua_settop(L, top);
    return rc;
}

