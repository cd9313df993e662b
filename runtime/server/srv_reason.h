/*
 * srv_reason.h — reasoning text of "thinking" models (Qwen3, DeepSeek-R1,
 * QwQ) split from the answer while it streams, as llama.cpp's server
 * (reasoning_format "deepseek") and vLLM's reasoning parsers do:
 *
 *   <think>\nLet me see...\n</think>\n\nThe answer is 4.
 *   └──────── reasoning ────────┘        └─ content ─┘
 *
 * Reasoning starts when the reply's first non-blank text is "<think>", or
 * at once when the rendered prompt already ends with "<think>" (DeepSeek-R1
 * and Qwen3 "thinking-only" templates open the block themselves); it ends at
 * "</think>", after which the blank space before the answer is dropped.  A
 * reply that starts with anything else is content throughout.  Tags are
 * matched as text, so a tag split over several tokens is found, and bytes
 * that may still become a tag are held back (at most 8) until decided.
 */
#ifndef CINFER_SRV_REASON_H
#define CINFER_SRV_REASON_H

#include <stddef.h>

enum { SRV_TEXT_CONTENT = 0, SRV_TEXT_REASONING = 1 };

/* out(user, kind, text, len): a piece of SRV_TEXT_CONTENT or SRV_TEXT_REASONING. */
typedef void (*srv_reason_out)(void *user, int kind, const char *text, size_t len);

typedef struct {
    int state;       /* 0: before the first non-blank text, 1: reasoning, 2: after </think> (blanks skipped), 3: content */
    int started;     /* reasoning text has begun (blanks before it are dropped) */
    char hold[8];    /* bytes that may begin the next tag */
    size_t n_hold;
    char blank[64];  /* state 0: blanks before the first text; 1: blanks not yet known to lie inside the text */
    size_t n_blank;
} srv_reason;

/* Does the rendered prompt end with "<think>" (and blank space)? */
int srv_reason_prompt_opens(const char *prompt);

/* A fresh splitter; in_reasoning: the prompt opened the block. */
void srv_reason_init(srv_reason *r, int in_reasoning);
/* Feed n bytes of generated text; out gets every decided piece, in order. */
void srv_reason_feed(srv_reason *r, const char *p, size_t n, srv_reason_out out, void *user);
/* The end of generation: held bytes go out as what they were part of. */
void srv_reason_flush(srv_reason *r, srv_reason_out out, void *user);
/* Is the splitter inside the reasoning block now? */
static inline int srv_reason_in_reasoning(const srv_reason *r) { return r->state == 1; }

#endif
