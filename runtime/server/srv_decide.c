/*
 * srv_decide.c — see srv_decide.h.  Parsing builds, once per request, the
 * prompt (state and numbered questions with their keys and allowed
 * answers), each allowed value's JSON text and the reply's key texts;
 * srvd_record turns the log-likelihoods the server scored for one
 * question's values into the answer's probabilities; srvd_body writes them
 * out.
 */
#include "srv_decide.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { Q_CHOICE, Q_NOUL, Q_SCORE } q_type;

typedef struct {
    char *key;
    q_type type;
    int n;          /* allowed values: options (choice), 2 (noul), scores (score) */
    char **option;  /* (n) choice: option keys; score: descriptions, lowest first */
    char **desc;    /* (n) choice: descriptions (the key when null); noul: [false, true] texts or NULL */
    char **value;   /* (n) each allowed value as JSON text: "\"billing\"", "true", "3" */
    char *prefix;   /* the reply text before the value: {"KEY": or ,"KEY": */
    /* the answer (srvd_record) */
    double p[SRVD_MAX_OPTIONS];
    int chosen;
} question;

struct srvd {
    char *model;
    question q[SRVD_MAX_QUESTIONS];
    int n_q;
    char *messages, *plain;
};

static cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

void srvd_free(srvd *d) {
    if (!d) return;
    for (int i = 0; i < d->n_q; i++) {
        for (int k = 0; k < d->q[i].n; k++) {
            if (d->q[i].option) free(d->q[i].option[k]);
            if (d->q[i].desc) free(d->q[i].desc[k]);
            if (d->q[i].value) free(d->q[i].value[k]);
        }
        free(d->q[i].value);
        free(d->q[i].option);
        free(d->q[i].desc);
        free(d->q[i].key);
        free(d->q[i].prefix);
    }
    free(d->model);
    free(d->messages);
    free(d->plain);
    free(d);
}

/* Text of a content value (a string, or JSON shown as indented JSON). */
static char *content_text(const cJSON *v) {
    if (cJSON_IsString(v)) return strdup(v->valuestring);
    return cJSON_Print(v);
}

static int is_content(const cJSON *v) {
    return (cJSON_IsString(v) && v->valuestring[strspn(v->valuestring, " \t\r\n")]) || cJSON_IsObject(v) ||
           cJSON_IsArray(v);
}

/* A growable text. */
typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} text;

static void put(text *t, const char *s) {
    size_t n = strlen(s);
    if (t->oom) return;
    if (t->len + n + 1 > t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 1024;
        while (nc < t->len + n + 1) nc *= 2;
        char *np = realloc(t->p, nc);
        if (!np) {
            t->oom = 1;
            return;
        }
        t->p = np;
        t->cap = nc;
    }
    memcpy(t->p + t->len, s, n + 1);
    t->len += n;
}

static int parse_question(question *q, const char *key, const cJSON *v, bad_req *b) {
    char p[200];
    snprintf(p, sizeof p, "questions.%.100s", key);
    if (!cJSON_IsObject(v)) return srv_bad(b, 400, p, "'%s' must be an object {type, instructions, criteria}", p);
    const cJSON *ty = get(v, "type"), *in = get(v, "instructions"), *cr = get(v, "criteria");
    if (!(q->key = strdup(key))) return srv_bad(b, 500, NULL, "out of memory");
    char f[240];
    snprintf(f, sizeof f, "%s.instructions", p);
    if (!is_content(in)) return srv_bad(b, 400, f, "'%s' must be a non-empty text, object or array", f);
    snprintf(f, sizeof f, "%s.criteria", p);
    if (!cJSON_IsString(ty)) return srv_bad(b, 400, p, "'%s.type' must be \"choice\", \"noul\" or \"score\"", p);
    if (!strcmp(ty->valuestring, "choice")) {
        q->type = Q_CHOICE;
        int n = cJSON_IsObject(cr) ? cJSON_GetArraySize(cr) : 0;
        if (n < 2 || n > SRVD_MAX_OPTIONS)
            return srv_bad(b, 400, f, "'%s' must be an object of 2 to %d options (option: description or null)", f,
                           SRVD_MAX_OPTIONS);
        q->option = calloc((size_t)n, sizeof *q->option);
        q->desc = calloc((size_t)n, sizeof *q->desc);
        if (!q->option || !q->desc) return srv_bad(b, 500, NULL, "out of memory");
        const cJSON *o;
        cJSON_ArrayForEach(o, cr) {
            if (!o->string[0]) return srv_bad(b, 400, f, "'%s': an option name is empty", f);
            if (!cJSON_IsString(o) && !cJSON_IsNull(o))
                return srv_bad(b, 400, f, "'%s.%.60s' must be a description or null", f, o->string);
            q->option[q->n] = strdup(o->string);
            q->desc[q->n] = strdup(cJSON_IsString(o) ? o->valuestring : o->string);
            if (!q->option[q->n] || !q->desc[q->n]) return srv_bad(b, 500, NULL, "out of memory");
            q->n++;
        }
        for (int i = 0; i < q->n; i++)
            for (int k = 0; k < i; k++)
                if (!strcmp(q->option[i], q->option[k]))
                    return srv_bad(b, 400, f, "'%s': option '%.60s' appears twice", f, q->option[i]);
    } else if (!strcmp(ty->valuestring, "noul")) {
        q->type = Q_NOUL;
        q->n = 2;
        if (cr && !cJSON_IsNull(cr) && !cJSON_IsObject(cr))
            return srv_bad(b, 400, f, "'%s' must be {\"false\": text, \"true\": text} (both optional)", f);
        q->desc = calloc(2, sizeof *q->desc);
        if (!q->desc) return srv_bad(b, 500, NULL, "out of memory");
        for (int k = 0; k < 2; k++) {
            const cJSON *t = get(cr, k ? "true" : "false");
            if (t && !cJSON_IsString(t) && !cJSON_IsNull(t))
                return srv_bad(b, 400, f, "'%s.%s' must be a string", f, k ? "true" : "false");
            if (cJSON_IsString(t) && !(q->desc[k] = strdup(t->valuestring))) return srv_bad(b, 500, NULL, "out of memory");
        }
    } else if (!strcmp(ty->valuestring, "score")) {
        q->type = Q_SCORE;
        int n = cJSON_IsArray(cr) ? cJSON_GetArraySize(cr) : 0;
        if (n < 2 || n > SRVD_MAX_OPTIONS)
            return srv_bad(b, 400, f, "'%s' must be an array of 2 to %d descriptions, lowest score first", f,
                           SRVD_MAX_OPTIONS);
        q->option = calloc((size_t)n, sizeof *q->option);
        if (!q->option) return srv_bad(b, 500, NULL, "out of memory");
        const cJSON *o;
        cJSON_ArrayForEach(o, cr) {
            if (!cJSON_IsString(o)) return srv_bad(b, 400, f, "'%s[%d]' must be a string", f, q->n);
            if (!(q->option[q->n++] = strdup(o->valuestring))) return srv_bad(b, 500, NULL, "out of memory");
        }
    } else {
        return srv_bad(b, 400, p, "'%s.type' must be \"choice\", \"noul\" or \"score\", got '%.40s'", p,
                       ty->valuestring);
    }
    return 0;
}

/* The user message: the state, then each question with what it allows. */
static void build_prompt(srvd *d, const cJSON *r, text *u) {
    char *st = content_text(get(r, "state"));
    put(u, "State:\n");
    put(u, st ? st : "");
    free(st);
    put(u, "\n\nQuestions:\n");
    int i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, get(r, "questions")) {
        const question *q = &d->q[i];
        char num[16];
        snprintf(num, sizeof num, "%d. ", i + 1);
        put(u, num);
        put(u, q->key);
        put(u, ": ");
        char *in = content_text(get(v, "instructions"));
        put(u, in ? in : "");
        free(in);
        if (q->type == Q_CHOICE) {
            put(u, "\n   Answer with one of:");
            for (int k = 0; k < q->n; k++) {
                put(u, k ? ", \"" : " \"");
                put(u, q->option[k]);
                put(u, "\"");
                if (strcmp(q->desc[k], q->option[k])) {
                    put(u, " (");
                    put(u, q->desc[k]);
                    put(u, ")");
                }
            }
            put(u, ".\n");
        } else if (q->type == Q_NOUL) {
            for (int k = 1; k >= 0; k--) {
                put(u, k ? "\n   Answer true" : " or false");
                if (q->desc[k]) {
                    put(u, " (");
                    put(u, q->desc[k]);
                    put(u, ")");
                }
            }
            put(u, ".\n");
        } else {
            char hi[16];
            snprintf(hi, sizeof hi, "%d", q->n - 1);
            put(u, "\n   Answer with a score from 0 to ");
            put(u, hi);
            put(u, ":");
            for (int k = 0; k < q->n; k++) {
                snprintf(num, sizeof num, " %d = ", k);
                put(u, k ? ";" : "");
                put(u, num);
                put(u, q->option[k]);
            }
            put(u, ".\n");
        }
        i++;
    }
}

static const char SYSTEM[] =
    "You judge a situation. Read the state, then answer every question, in order, with one of the answers it "
    "allows. Reply with one JSON object that maps each question's key to its answer, and nothing else.";

srvd *srvd_parse(const cJSON *r, bad_req *b) {
    srvd *d = calloc(1, sizeof *d);
    if (!d) {
        srv_bad(b, 500, NULL, "out of memory");
        return NULL;
    }
    if (!cJSON_IsObject(r)) {
        srv_bad(b, 400, NULL, "the request body must be a JSON object");
        goto fail;
    }
    const cJSON *model = get(r, "model"), *state = get(r, "state"), *qs = get(r, "questions"), *st = get(r, "stream");
    if (!cJSON_IsString(model) || !model->valuestring[0]) {
        srv_bad(b, 400, "model", "model is required");
        goto fail;
    }
    if (cJSON_IsTrue(st)) {
        srv_bad(b, 400, "stream", "streaming is not supported: the decision is one JSON response");
        goto fail;
    }
    if (!is_content(state)) {
        srv_bad(b, 400, "state", "'state' must be a non-empty text, JSON object or array");
        goto fail;
    }
    int n = cJSON_IsObject(qs) ? cJSON_GetArraySize(qs) : 0;
    if (n < 1 || n > SRVD_MAX_QUESTIONS) {
        srv_bad(b, 400, "questions", "'questions' must be an object of 1 to %d questions {KEY: question}",
                SRVD_MAX_QUESTIONS);
        goto fail;
    }
    d->model = strdup(model->valuestring);
    const cJSON *v;
    cJSON_ArrayForEach(v, qs) {
        if (!v->string[0]) {
            srv_bad(b, 400, "questions", "'questions': a question key is empty");
            goto fail;
        }
        for (int k = 0; k < d->n_q; k++) /* cJSON keeps duplicate keys */
            if (!strcmp(d->q[k].key, v->string)) {
                srv_bad(b, 400, "questions", "'questions': key '%.60s' appears twice", v->string);
                goto fail;
            }
        if (parse_question(&d->q[d->n_q++], v->string, v, b)) goto fail;
    }
    /* each allowed value's text, and the reply text before it */
    for (int i = 0; i < d->n_q; i++) {
        question *q = &d->q[i];
        int oom = !(q->value = calloc((size_t)q->n, sizeof *q->value));
        for (int k = 0; k < q->n && !oom; k++) {
            cJSON *v = q->type == Q_NOUL     ? cJSON_CreateBool(k)
                       : q->type == Q_SCORE ? cJSON_CreateNumber(k)
                                            : cJSON_CreateString(q->option[k]);
            oom = !(q->value[k] = cJSON_PrintUnformatted(v));
            cJSON_Delete(v);
        }
        cJSON *kj = cJSON_CreateString(q->key);
        char *ks = cJSON_PrintUnformatted(kj);
        cJSON_Delete(kj);
        size_t n = ks ? strlen(ks) + 3 : 0;
        if (ks && (q->prefix = malloc(n))) snprintf(q->prefix, n, "%c%s:", i ? ',' : '{', ks);
        free(ks);
        q->chosen = -1;
        if (oom || !q->prefix) {
            srv_bad(b, 500, NULL, "out of memory");
            goto fail;
        }
    }
    text u = {0};
    build_prompt(d, r, &u);
    cJSON *ms = cJSON_CreateArray(), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "system");
    cJSON_AddStringToObject(m, "content", SYSTEM);
    cJSON_AddItemToArray(ms, m);
    m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "user");
    cJSON_AddStringToObject(m, "content", u.p ? u.p : "");
    cJSON_AddItemToArray(ms, m);
    d->messages = cJSON_PrintUnformatted(ms);
    cJSON_Delete(ms);
    text plain = {0};
    put(&plain, SYSTEM);
    put(&plain, "\n\n");
    put(&plain, u.p ? u.p : "");
    put(&plain, "\nAnswers: ");
    free(u.p);
    d->plain = plain.p;
    if (u.oom || plain.oom || !d->model || !d->messages || !d->plain) {
        srv_bad(b, 500, NULL, "out of memory");
        goto fail;
    }
    return d;
fail:
    srvd_free(d);
    return NULL;
}

const char *srvd_messages_json(const srvd *d) { return d->messages; }
const char *srvd_plain_prompt(const srvd *d) { return d->plain; }
const char *srvd_model(const srvd *d) { return d->model; }
int srvd_count(const srvd *d) { return d->n_q; }
int srvd_n_values(const srvd *d, int i) { return d->q[i].n; }
const char *srvd_value(const srvd *d, int i, int k) { return d->q[i].value[k]; }
const char *srvd_prefix(const srvd *d, int i) { return d->q[i].prefix; }
const char *srvd_closing(const srvd *d) {
    (void)d;
    return "}";
}

const char *srvd_record(srvd *d, int i, const double *logp) {
    question *q = &d->q[i];
    double top = -INFINITY, total = 0;
    for (int k = 0; k < q->n; k++)
        if (logp[k] > top) top = logp[k];
    for (int k = 0; k < q->n; k++) total += q->p[k] = isfinite(top) ? exp(logp[k] - top) : 1;
    q->chosen = 0;
    for (int k = 0; k < q->n; k++) {
        q->p[k] /= total;
        if (q->p[k] > q->p[q->chosen]) q->chosen = k;
    }
    return q->value[q->chosen];
}

cJSON *srvd_body(const srvd *d, int n_input, int n_output) {
    cJSON *o = cJSON_CreateObject(), *answers;
    cJSON_AddStringToObject(o, "model", d->model);
    answers = cJSON_AddObjectToObject(o, "answers");
    for (int i = 0; i < d->n_q; i++) {
        const question *q = &d->q[i];
        const double *p = q->p;
        double h = 0;
        for (int k = 0; k < q->n; k++)
            if (p[k] > 0) h -= p[k] * log(p[k]);
        double conf = 1 - h / log((double)q->n);
        conf = conf < 0 ? 0 : conf > 1 ? 1 : conf;
        cJSON *a = cJSON_CreateObject();
        if (q->type == Q_NOUL) {
            cJSON_AddStringToObject(a, "type", "noul");
            cJSON_AddNumberToObject(a, "noul", p[1]);
        } else if (q->type == Q_CHOICE) {
            cJSON_AddStringToObject(a, "type", "choice");
            cJSON_AddStringToObject(a, "choice", q->chosen >= 0 ? q->option[q->chosen] : "");
            cJSON *pr = cJSON_AddObjectToObject(a, "probabilities");
            for (int k = 0; k < q->n; k++) cJSON_AddNumberToObject(pr, q->option[k], p[k]);
            cJSON_AddNumberToObject(a, "confidence", conf);
        } else {
            double e = 0;
            for (int k = 0; k < q->n; k++) e += k * p[k];
            cJSON_AddStringToObject(a, "type", "score");
            cJSON_AddNumberToObject(a, "score", e);
            cJSON *lg = cJSON_AddObjectToObject(a, "legend"), *pr;
            char key[16];
            for (int k = 0; k < q->n; k++) {
                snprintf(key, sizeof key, "%d", k);
                cJSON_AddStringToObject(lg, key, q->option[k]);
            }
            pr = cJSON_AddObjectToObject(a, "probabilities");
            for (int k = 0; k < q->n; k++) {
                snprintf(key, sizeof key, "%d", k);
                cJSON_AddNumberToObject(pr, key, p[k]);
            }
            cJSON_AddNumberToObject(a, "confidence", conf);
        }
        cJSON_AddItemToObject(answers, q->key, a);
    }
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "input_tokens", n_input);
    cJSON_AddNumberToObject(u, "output_tokens", n_output);
    return o;
}
