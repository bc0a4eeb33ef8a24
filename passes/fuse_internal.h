/* Internal interface between passes/fuse.c (the driver: options, use index, convexity, group
 * construction, elementwise and reduction groups) and passes/fuse_patterns.c (BatchNorm folding,
 * contraction epilogues, and the recognised attention / LayerNorm / GELU patterns).
 *
 * Invariants while a region is processed: the region's nodes stay in a valid program order (a
 * group is materialized as soon as it is chosen, so every later decision sees real nodes);
 * outside uses of a member result still name the member's value until the final walk, and
 * fuse_resolve maps such a value to the fused node's result.
 */
#ifndef IRTOOL_FUSE_INTERNAL_H
#define IRTOOL_FUSE_INTERNAL_H

#include "passes/passes.h"

enum {
    FUSE_ELEMENTWISE = 1u << 0,
    FUSE_REDUCTION = 1u << 1,
    FUSE_EPILOGUE = 1u << 2,
    FUSE_ATTENTION = 1u << 3,
    FUSE_LAYERNORM = 1u << 4,
    FUSE_GELU = 1u << 5,
    FUSE_BN = 1u << 6,
    FUSE_CONVSUM = 1u << 7,
    FUSE_PATTERNS = FUSE_ATTENTION | FUSE_LAYERNORM | FUSE_GELU,
    FUSE_REWRITES = FUSE_BN | FUSE_CONVSUM, /* graph rewrites done before any group is formed */
    FUSE_ALL = 0xff,
    /* not in `all`: the attention pattern also takes a Transpose making K^T from keys [.., S, d]
     * (a decode step's cache), for backends whose attention kernel reads K by rows (CPU static) */
    FUSE_ATTENTION_KT = 1u << 8,
};

/* Node flags (Fuse.flags). */
enum {
    FL_NEWFUSED = 1, /* a fused node created by this run */
    FL_STATIC = 2,   /* computes from constants and shapes only (left to const-fold) */
};

typedef struct FuseVec {
    IrNodeId *a;
    uint32_t n, cap;
} FuseVec;

typedef struct Fuse {
    IrPassContext *c;
    IrGraph *g;
    uint32_t max_size;
    unsigned kinds;
    IrStatus status; /* first failure (allocation); stops further work */

    /* value-indexed, ids 1..nval (values that existed when uses were counted) */
    uint32_t nval;
    uint32_t *uses;  /* operand and region-output uses */
    IrValueId *repl; /* member result -> the fused node's result that replaces it outside */

    /* node-indexed, ids 1..ncap */
    uint32_t ncap;
    uint32_t *pos;  /* program position in the current region */
    IrNodeId *rep;  /* member -> the fused node holding it */
    uint8_t *flags;
    uint32_t *uoff, *ucnt; /* users of each node of the current region (CSR into edges) */
    uint32_t *gfirst, *gcount; /* a new fused node's members in gmem */
    uint32_t *mark, *mark2;
    uint32_t stamp, stamp2;
    FuseVec edges, gmem, stack, tmp, order;
    IrRegionId region;

    int64_t *sym_hi; /* symbol -> upper bound (-1 = unknown), for the byte estimate */

    int64_t groups, members, bytes_saved, unsized, bn_folded, convsums;
    int64_t per_kind[6];
} Fuse;

/* ---- driver services (fuse.c) ---- */
bool fuse_vec_push(Fuse *f, FuseVec *v, IrNodeId n);
IrValueId fuse_resolve(const Fuse *f, IrValueId v);
IrValueId fuse_operand(const Fuse *f, IrNodeId n, uint32_t i); /* resolved */
/* Node of the current region not yet in a group, not a fused node, without regions. */
bool fuse_is_free(const Fuse *f, IrNodeId n);
/* The free node defining v (resolved), or 0. */
IrNodeId fuse_free_def(const Fuse *f, IrValueId v);
/* Use count of v as counted before grouping (UINT32_MAX for values created since). */
uint32_t fuse_uses(const Fuse *f, IrValueId v);
/* The node using v when v has exactly one use and that use is a direct operand; else 0. */
IrNodeId fuse_only_user(Fuse *f, IrValueId v);
/* Appends the users of n (nodes of the current region, fused nodes for absorbed users). */
void fuse_users(Fuse *f, IrNodeId n, FuseVec *out);
/* Forms a group of `k` free nodes (any order) when it is convex and within max-size; `anchor`
 * names it. Returns true when the group was built. */
bool fuse_form(Fuse *f, const IrNodeId *members, uint32_t k, const char *kind, IrNodeId anchor);
/* The node's name as an interned string (0 when it has none). */
IrStrId fuse_node_name_id(IrGraph *g, IrNodeId n);
/* A row reduction: Softmax/LogSoftmax/LayerNormalization or a Reduce* over the last axis. */
bool fuse_row_reduction(const Fuse *f, IrNodeId n);

/* ---- constants (fuse_patterns.c) ---- */
/* A constant seen through a graph constant, a Constant node or a ConstantOfShape of a constant
 * shape (a splat). */
typedef struct FuseConst {
    IrDType dt;
    const void *data; /* one element when splat */
    bool splat;
    int64_t numel;
    uint32_t rank;
    int64_t dims[8];
    IrValueId shape_operand; /* ConstantOfShape: its shape operand */
} FuseConst;
bool fuse_const_view(const IrGraph *g, IrValueId v, FuseConst *out);
double fuse_const_at(const FuseConst *k, int64_t i);
/* v is a constant whose every element is within rtol of x. */
bool fuse_const_near(const IrGraph *g, IrValueId v, double x, double rtol);

/* ---- phases (fuse_patterns.c) ---- */
IrStatus fuse_fold_batchnorm(Fuse *f);
void fuse_match_patterns(Fuse *f); /* attention, layernorm, gelu over f->order */
void fuse_match_epilogues(Fuse *f);
/* Add/Sum of two Convs of one geometry -> one Conv over the inputs' channels (fuse_convsum.c). */
IrStatus fuse_merge_conv_sums(Fuse *f);
/* Helpers shared by the rewrites (fuse_patterns.c): attributes of `from` onto `to`; the
 * provenance (or names) of a then b onto dst; base + suffix, numbered until no value has it
 * (malloc'd, NULL when out of memory). */
void fuse_copy_attrs(IrGraph *g, IrNodeId from, IrNodeId to);
void fuse_merge_provenance(IrGraph *g, IrNodeId dst, IrNodeId a, IrNodeId b);
char *fuse_fresh_name(const IrGraph *g, const char *base, const char *suffix);
/* Weights a rewrite may leave unused: orphan[v] (values 1..nval) set when v is a graph constant
 * or a Constant / ConstantOfShape result; fuse_drop_orphans then erases such nodes nothing uses
 * (marking their operands, a ConstantOfShape's shape, in turn) and removes the unused orphaned
 * graph constants, never values that were unused before the rewrite. */
void fuse_mark_orphan(const IrGraph *g, uint32_t nval, uint8_t *orphan, IrValueId v);
void fuse_drop_orphans(IrGraph *g, uint32_t nval, uint8_t *orphan);

#endif
