/* Internal layout of an IrGraph, shared by the files of ir/ only.
 *
 * Every table is a flat growable array indexed by id (entry 0 reserved), so the binary format
 * can write and read the tables as they are. Variable-length lists (operands, results, dims,
 * attribute arrays, region args) live in shared pools addressed by (offset, count); replacing
 * a list appends a new slice and leaves the old one as garbage until the graph is compacted.
 */
#ifndef IRTOOL_IR_INTERNAL_H
#define IRTOOL_IR_INTERNAL_H

#include "ir.h"

#include <stdlib.h>
#include <string.h>

#define IR_ASSERT(c)                                                                           \
    do {                                                                                       \
        if (!(c)) ir_assert_fail(#c, __FILE__, __LINE__);                                      \
    } while (0)
_Noreturn void ir_assert_fail(const char *expr, const char *file, int line);

/* A growable array of fixed-size elements. */
typedef struct IrVec {
    void *data;
    uint32_t len, cap;
} IrVec;

bool ir_vec_reserve(IrVec *v, size_t elem, uint32_t need);
void ir_vec_free(IrVec *v);
#define IR_VEC_AT(v, T, i) (((T *)(v).data)[i])

/* Open-addressing hash set of u32 ids; keys are compared through a callback. */
typedef struct IrHash {
    uint64_t *ent;   /* per slot: id in the low 32 bits (0 = empty), the key's hash in the high */
    uint32_t *slots; /* the value-name index only: a plain array indexed by string id */
    uint32_t cap, count;
} IrHash;
void ir_hash_free(IrHash *h);
uint64_t ir_hash_bytes(const void *p, size_t n, uint64_t seed);

typedef struct IrExprRec {
    uint8_t kind;
    uint8_t pad[3];
    uint32_t a, b;   /* SYM: a = sym; binary: a, b = expr ids */
    int64_t value;   /* CONST */
} IrExprRec;

typedef struct IrTypeRec {
    uint8_t dtype;   /* tensors; IR_DTYPE_NONE for seq/opt */
    uint8_t kind;    /* IrTypeKind */
    uint8_t pad[2];
    uint32_t rank;   /* IR_RANK_UNKNOWN = unranked (always for seq/opt) */
    uint32_t dims;   /* tensors: offset into u32 pool; seq/opt: the element type id (< own id) */
} IrTypeRec;

typedef struct IrValueRec {
    uint32_t name;   /* IrStrId */
    uint32_t type;   /* IrTypeId */
    uint32_t def;    /* node (RESULT), region (ARG), value's const (CONST) */
    uint32_t index : 24;
    uint32_t kind : 8;
} IrValueRec;

enum { IR_NODE_DEAD = 1 };

typedef struct IrNodeRec {
    uint16_t op;
    uint16_t flags;
    uint16_t n_operands, n_results;
    uint32_t operands, results; /* u32 pool offsets */
    uint32_t attrs;             /* attr table offset (attributes are contiguous) */
    uint16_t n_attrs, n_regions;
    uint32_t regions;           /* u32 pool offset */
    uint32_t name;              /* IrStrId */
    uint32_t region;            /* containing region */
    uint32_t prev, next;
    uint32_t loc_file, loc_line, loc_col;
    uint32_t prov, n_prov;      /* u32 pool (IrStrId list) */
    uint32_t text_line, text_col;
} IrNodeRec;

typedef struct IrAttrRec {
    uint32_t name;  /* IrStrId */
    uint8_t kind;
    uint8_t pad[3];
    uint32_t count; /* arrays */
    uint32_t pad2;
    union {
        int64_t i;     /* INT, DTYPE */
        double f;      /* FLOAT */
        uint32_t s;    /* STRING: IrStrId; TENSOR: IrConstId */
        uint64_t off;  /* INTS: i64 pool, FLOATS: f64 pool, STRINGS: u32 pool */
    } u;
} IrAttrRec;

typedef struct IrRegionRec {
    uint32_t parent; /* node; 0 for root */
    uint32_t first, last;
    uint32_t args, n_args;
    uint32_t outs, n_outs;
} IrRegionRec;

typedef struct IrConstRec {
    uint32_t type;
    uint32_t ext_path; /* IrStrId of the external raw file it came from, or 0 */
    uint64_t ext_offset;
    uint64_t nbytes;
    const void *data;
} IrConstRec;

typedef struct IrSymRec {
    uint32_t name;
    uint32_t specialized; /* replaced by a constant everywhere; no longer listed or found */
} IrSymRec;

typedef struct IrConstraintRec {
    uint32_t kind, a, b, origin;
    int64_t lo, hi;
    uint32_t note, pad;
} IrConstraintRec;

typedef struct IrMapping {
    void *addr;
    size_t len;
} IrMapping;

typedef struct IrKV {
    uint32_t key, value; /* IrStrIds; opsets: key = domain, value = version (fits u32) */
} IrKV;

/* Large allocation blocks for constant data (64-byte aligned). */
typedef struct IrBlock {
    struct IrBlock *next;
} IrBlock;

struct IrGraph {
    IrStatus status;
    uint32_t name;        /* IrStrId */
    char *source_file;
    const char *source_text; /* for diagnostics; owned when source_owned */
    size_t source_len;
    bool source_owned;
    /* strings: bytes of NUL-terminated strings; offsets by id */
    IrVec str_bytes;  /* char */
    IrVec str_offs;   /* u32 */
    IrHash str_hash;  /* built lazily (str_hash_ok) */
    bool str_hash_ok;
    IrVec exprs;      /* IrExprRec */
    IrExprId small_const[258]; /* ids of the constants -1..256, filled on first use */
    uint32_t (*binop_cache)[4]; /* direct-mapped memo of ir_expr_binary: kind, a, b, result */
    IrHash expr_hash;
    bool expr_hash_ok;
    IrVec types;      /* IrTypeRec */
    IrHash type_hash;
    bool type_hash_ok;
    IrVec values;     /* IrValueRec */
    IrHash name_hash; /* value names */
    bool name_hash_ok;
    uint32_t name_counter;
    IrVec nodes;      /* IrNodeRec */
    uint32_t n_live_nodes;
    IrVec attrs;      /* IrAttrRec */
    IrVec regions;    /* IrRegionRec */
    IrVec consts;     /* IrConstRec */
    IrVec const_values; /* u32 value ids, in declaration order */
    IrVec syms;       /* IrSymRec */
    IrVec constraints;/* IrConstraintRec */
    IrVec u32pool;
    IrVec i64pool;
    IrVec f64pool;
    IrVec opsets;     /* IrKV */
    IrVec meta;       /* IrKV */
    IrVec mappings;   /* IrMapping */
    IrBlock *blocks;  /* owned constant data */
};

static inline IrValueRec *ir__val(const IrGraph *g, IrValueId v) {
    return &((IrValueRec *)g->values.data)[v];
}
static inline IrNodeRec *ir__node(const IrGraph *g, IrNodeId n) {
    return &((IrNodeRec *)g->nodes.data)[n];
}
static inline IrRegionRec *ir__region(const IrGraph *g, IrRegionId r) {
    return &((IrRegionRec *)g->regions.data)[r];
}
static inline IrTypeRec *ir__type(const IrGraph *g, IrTypeId t) {
    return &((IrTypeRec *)g->types.data)[t];
}
static inline IrExprRec *ir__expr(const IrGraph *g, IrExprId e) {
    return &((IrExprRec *)g->exprs.data)[e];
}
static inline IrConstRec *ir__const(const IrGraph *g, IrConstId c) {
    return &((IrConstRec *)g->consts.data)[c];
}
static inline uint32_t *ir__u32(const IrGraph *g, uint32_t off) {
    return &((uint32_t *)g->u32pool.data)[off];
}

/* Appends n u32s to the pool; returns the offset (0 on failure, with g->status set; offset 0
 * is reserved so it never names a real slice). */
uint32_t ir__pool_u32(IrGraph *g, const uint32_t *vals, uint32_t n);
uint32_t ir__pool_i64(IrGraph *g, const int64_t *vals, uint32_t n);
uint32_t ir__pool_f64(IrGraph *g, const double *vals, uint32_t n);
/* Allocates a 64-byte aligned block owned by the graph. */
void *ir__alloc_block(IrGraph *g, size_t n);
void ir__oom(IrGraph *g);
/* Presizes tables for a text of about `lines` statements (big files only). */
void ir__graph_reserve(IrGraph *g, uint32_t lines);
/* Creates a value record; name NULL = generated unique name. Returns 0 if the name is taken. */
IrValueId ir__value_new(IrGraph *g, IrStrId name, IrValueKind kind, uint32_t def, uint32_t index,
                        IrTypeId type);
IrStrId ir__unique_value_name(IrGraph *g);
/* The live value with interned name `name`, or 0 (ir_value_find without hashing the text). */
IrValueId ir__value_by_name(IrGraph *g, IrStrId name);
/* Stores a string without interning it (no hash lookup or insert): for node names, which are
 * never looked up by text. Equal names may then have different ids; compare them as text. */
IrStrId ir__str_append(IrGraph *g, const char *s, size_t n);
/* Prefetches the hash slot of a string hash (ir_hash_bytes(s, n, 0)). */
void ir__str_prefetch(const IrGraph *g, uint64_t hv);
/* ir_str_intern / ir_str_find with the string's hash already computed (s holds no NUL). */
IrStrId ir__str_intern_hashed(IrGraph *g, const char *s, size_t n, uint64_t hv);
IrStrId ir__str_find_hashed(const IrGraph *g, const char *s, size_t n, uint64_t hv);
/* Node creation with interned result names (0 = generated, IR_ABSENT_NAME = no result value);
 * fails (0) on a taken name. */
#define IR_ABSENT_NAME 0xFFFFFFFFu
IrNodeId ir__node_create(IrGraph *g, IrRegionId r, IrNodeId before, IrOp op, uint32_t n_operands,
                         const IrValueId *operands, uint32_t n_results, const IrStrId *names,
                         const IrTypeId *types);
/* Rebuilds lazily built hash tables (after the binary reader filled the tables directly). */
void ir__invalidate_hashes(IrGraph *g);

/* Interns an expression record as it is (no simplification). */
IrExprId ir__expr_intern(IrGraph *g, IrExprRec rec);

/* Opens external data `rel` of a model in folder dir (NULL: the current folder) for reading:
 * rel must be relative, and after '..' and symlinks are resolved still inside dir, and a regular
 * file (a FIFO or a device would block or never end). The fd with its stat, or -1 with the reason
 * in why (a fixed string or strerror's), -2 when the path leads out of dir. Text IR and ONNX both read external data through it. */
struct stat;
int ir__open_beside(const char *dir, const char *rel, struct stat *st, const char **why);

/* Gives the graph ownership of the text it was parsed from (freed with the graph). */
void ir__graph_take_source_text(IrGraph *g, char *text, size_t len);

/* Float formatting that round-trips (shortest %g that reads back identically). */
/* Whether constant data of nbytes fits a tensor of numel elements of dt: numel * size, or for
 * strings a valid blob (data NULL: only the lower bound on the size is checked). */
bool ir__const_size_ok(IrDType dt, int64_t numel, const void *data, size_t nbytes);
void ir__fmt_double(IrStrBuf *b, double v);
void ir__fmt_float(IrStrBuf *b, float v);
/* Attribute spec parsing over the op table's string. */
bool ir__attr_kind_from_code(const char *s, size_t n, IrAttrKind *k);

#endif
