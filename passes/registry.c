/* The one list of all passes, and the named pipelines. Adding a pass: write passes/NAME.c
 * exporting `const IrPass pass_NAME`, then add it to PASS_LIST below. */
#include "passes/passes.h"

#include <string.h>

#define PASS_LIST(X) \
    X(canonicalize)  \
    X(cse)           \
    X(dce)           \
    X(const_fold)    \
    X(fuse)          \
    X(lower_cf)      \
    X(lower_seq)     \
    X(lower_grad)    \
    X(shape_infer)   \
    X(specialize)    \
    X(quantize_fp8)

#define X(n) extern const IrPass pass_##n;
PASS_LIST(X)
#undef X

static const IrPass *const passes[] = {
#define X(n) &pass_##n,
    PASS_LIST(X)
#undef X
};

static const struct {
    const char *name, *pipeline;
} named[] = {
    {"default", "shape-infer,canonicalize,const-fold,lower-cf,const-fold,cse,dce"},
    {"cleanup", "canonicalize,cse,dce"},
};

const char *ir_pipeline_named_at(uint32_t i) { return i < sizeof named / sizeof named[0] ? named[i].name : NULL; }

uint32_t ir_pass_count(void) { return sizeof passes / sizeof passes[0]; }
const IrPass *ir_pass_at(uint32_t i) { return i < ir_pass_count() ? passes[i] : NULL; }

const IrPass *ir_pass_find(const char *name, size_t n) {
    for (uint32_t i = 0; i < ir_pass_count(); i++)
        if (strlen(passes[i]->name) == n && memcmp(passes[i]->name, name, n) == 0) return passes[i];
    return NULL;
}

const char *ir_pipeline_named(const char *name) {
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (strcmp(named[i].name, name) == 0) return named[i].pipeline;
    return NULL;
}
