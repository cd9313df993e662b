/*
 * cinfer.h — public API of the cinfer library.
 *
 * cinfer compiles a GGUF model into a forward pass specialised to that model
 * (see docs/architecture.md).  This header grows with the library issue; for
 * now it carries the version and error codes shared by every module.
 */
#ifndef CINFER_H
#define CINFER_H

#define CINFER_VERSION "0.1.0"

/* Error codes: functions return 0 on success or one of these (negative). */
enum {
    CINFER_OK = 0,
    CINFER_EIO = -1,      /* file could not be read/mapped/written */
    CINFER_EFORMAT = -2,  /* malformed input file */
    CINFER_ENOTFOUND = -3,
    CINFER_ETYPE = -4,
    CINFER_ENOMEM = -5,
    CINFER_EUNSUPPORTED = -6,
    CINFER_ECOMPILE = -7, /* code generation or C compilation failed */
    CINFER_EARG = -8,     /* invalid argument */
};

#endif
