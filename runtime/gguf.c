/* gguf.c — placeholder; see gguf.h. */
#include "gguf.h"
