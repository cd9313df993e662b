/*
 * srv_reason.c — see srv_reason.h.  A byte-at-a-time state machine over the
 * generated text; decided bytes collect in a run per kind and go out when the
 * kind changes or the piece ends, so one token makes at most a few out()
 * calls.  Blank space at either end of the reasoning is dropped (llama.cpp
 * trims reasoning_content the same way): blanks before its first text are
 * skipped, blanks inside it wait until more text follows.
 */
#include "srv_reason.h"

#include <string.h>

static const char OPEN[] = "<think>", CLOSE[] = "</think>";
enum { ST_START = 0, ST_REASON = 1, ST_AFTER = 2, ST_CONTENT = 3 };

int srv_reason_prompt_opens(const char *prompt) {
    size_t n = prompt ? strlen(prompt) : 0;
    while (n && strchr(" \t\r\n", prompt[n - 1])) n--;
    return n >= sizeof OPEN - 1 && !memcmp(prompt + n - (sizeof OPEN - 1), OPEN, sizeof OPEN - 1);
}

void srv_reason_init(srv_reason *r, int in_reasoning) {
    memset(r, 0, sizeof *r);
    r->state = in_reasoning ? ST_REASON : ST_START;
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* The run of decided bytes of one kind, sent when the kind changes. */
typedef struct {
    char p[512];
    size_t len;
    int kind;
    srv_reason_out out;
    void *user;
} run;

static void run_flush(run *u) {
    if (u->len) u->out(u->user, u->kind, u->p, u->len);
    u->len = 0;
}

static void run_put(run *u, int kind, const char *s, size_t n) {
    if (!n) return;
    if (kind != u->kind || u->len + n > sizeof u->p) {
        run_flush(u);
        u->kind = kind;
    }
    if (n > sizeof u->p) {
        u->out(u->user, kind, s, n);
        return;
    }
    memcpy(u->p + u->len, s, n);
    u->len += n;
}

/* One byte of reasoning text (known not to begin </think>). */
static void reason_byte(srv_reason *r, run *u, char b) {
    if (!is_blank(b)) {
        if (r->started) run_put(u, SRV_TEXT_REASONING, r->blank, r->n_blank);
        r->n_blank = 0;
        r->started = 1;
        run_put(u, SRV_TEXT_REASONING, &b, 1);
    } else if (r->started) {
        if (r->n_blank == sizeof r->blank) {
            run_put(u, SRV_TEXT_REASONING, r->blank, r->n_blank);
            r->n_blank = 0;
        }
        r->blank[r->n_blank++] = b;
    }
}

void srv_reason_feed(srv_reason *r, const char *p, size_t n, srv_reason_out out, void *user) {
    run u = {.kind = -1, .out = out, .user = user};
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        switch (r->state) {
        case ST_START:
            if (!r->n_hold && is_blank(c) && r->n_blank < sizeof r->blank) {
                r->blank[r->n_blank++] = c;
                continue;
            }
            r->hold[r->n_hold++] = c;
            if (memcmp(r->hold, OPEN, r->n_hold)) { /* not a <think>: all of it is the answer */
                run_put(&u, SRV_TEXT_CONTENT, r->blank, r->n_blank);
                run_put(&u, SRV_TEXT_CONTENT, r->hold, r->n_hold);
                r->n_blank = r->n_hold = 0;
                r->state = ST_CONTENT;
            } else if (r->n_hold == sizeof OPEN - 1) { /* the blanks before <think> go with it */
                r->n_blank = r->n_hold = 0;
                r->state = ST_REASON;
            }
            continue;
        case ST_REASON:
            r->hold[r->n_hold++] = c;
            while (r->n_hold && memcmp(r->hold, CLOSE, r->n_hold)) { /* can no longer begin </think> */
                char b = r->hold[0];
                memmove(r->hold, r->hold + 1, --r->n_hold);
                reason_byte(r, &u, b);
            }
            if (r->n_hold == sizeof CLOSE - 1) { /* </think>: the held blanks were its end */
                r->n_hold = r->n_blank = 0;
                r->state = ST_AFTER;
            }
            continue;
        case ST_AFTER:
            if (is_blank(c)) continue;
            r->state = ST_CONTENT;
            run_put(&u, SRV_TEXT_CONTENT, &c, 1);
            continue;
        default:
            run_put(&u, SRV_TEXT_CONTENT, &c, 1);
        }
    }
    run_flush(&u);
}

void srv_reason_flush(srv_reason *r, srv_reason_out out, void *user) {
    if (r->state == ST_START) {
        if (r->n_blank) out(user, SRV_TEXT_CONTENT, r->blank, r->n_blank);
        if (r->n_hold) out(user, SRV_TEXT_CONTENT, r->hold, r->n_hold);
    } else if (r->state == ST_REASON && r->n_hold) { /* cut inside what looked like </think> */
        if (r->started && r->n_blank) out(user, SRV_TEXT_REASONING, r->blank, r->n_blank);
        out(user, SRV_TEXT_REASONING, r->hold, r->n_hold);
    }
    r->n_hold = r->n_blank = 0;
}
