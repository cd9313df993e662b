/* Load a model and stream a completion to stdout with the cinfer library.
 *   cc main.c $(pkg-config --cflags --libs cinfer) -o embed
 *   ./embed model.gguf "Once upon a time" [n_tokens] [seed]            */
#include <cinfer.h>
#include <stdio.h>
#include <stdlib.h>

static int print_piece(const char *piece, size_t len, int32_t token, void *user) {
    (void)token, (void)user;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    return 0; /* nonzero would stop generation */
}

int main(int argc, char **argv) {
    if (argc < 3) return fprintf(stderr, "usage: %s MODEL.gguf PROMPT [N] [SEED]\n", argv[0]), 2;
    char err[512];
    cinfer_model *model;
    cinfer_session *sess;
    if (cinfer_model_open(argv[1], NULL, &model, err, sizeof err))
        return fprintf(stderr, "%s\n", err), 1;
    if (cinfer_session_new(model, NULL, &sess, err, sizeof err))
        return fprintf(stderr, "%s\n", err), cinfer_model_close(model), 1;
    cinfer_gen_options opts = {
        .max_tokens = argc > 3 ? atoi(argv[3]) : 64,
        .temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
        .seed = argc > 4 ? strtoull(argv[4], NULL, 10) : 42,
    };
    fputs(argv[2], stdout);
    int rc = cinfer_generate(sess, argv[2], &opts, print_piece, NULL, NULL, err, sizeof err);
    if (rc) fprintf(stderr, "\n%s\n", err);
    else putchar('\n');
    cinfer_session_free(sess);
    cinfer_model_close(model);
    return rc ? 1 : 0;
}
