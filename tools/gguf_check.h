/* gguf_check.h — hk-check --gguf MODEL.gguf: the user's own model, tensor by tensor. */
#ifndef HK_GGUF_CHECK_H
#define HK_GGUF_CHECK_H

/* The whole --gguf mode: parses its own command line (argv holds --gguf FILE somewhere) and
 * returns hk-check's exit code: 0 every checked tensor within its gate, 1 some failed, 2 a usage,
 * file or device error. */
int gguf_check_main(int argc, char **argv);

#endif
