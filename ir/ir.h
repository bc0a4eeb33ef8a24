/* irtool core IR: the one public header of ir/.
 *
 * A graph owns all of its memory (tables, strings, constants, mappings); ir_graph_destroy frees
 * it all. Objects refer to each other by 32-bit ids (0 = none), which survive table growth,
 * serialize directly and print identically every run. Types, dim expressions and strings are
 * interned, so equality is an id compare. Nothing here touches global mutable state: several
 * graphs may be processed on several threads at once.
 */
#ifndef IRTOOL_IR_H
#define IRTOOL_IR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IRTOOL_VERSION_STRING "0.1.0"
#define IR_MUST_CHECK __attribute__((warn_unused_result))

/* ---- status and diagnostics ------------------------------------------------------------ */

typedef enum IrStatus {
    IR_OK = 0,
    IR_ESYNTAX,      /* malformed text or binary input */
    IR_EVERIFY,      /* graph violates an invariant */
    IR_EUNSUPPORTED, /* op, dtype, version or feature not supported */
    IR_EIO,          /* file system */
    IR_ENOMEM,       /* allocation failed or size limit exceeded */
    IR_EINVAL,       /* bad argument from the caller */
    IR_ENOTFOUND,    /* lookup failed */
} IrStatus;

const char *ir_status_name(IrStatus s);

typedef enum IrSeverity { IR_SEV_ERROR, IR_SEV_WARNING, IR_SEV_NOTE } IrSeverity;

typedef struct IrDiagnostic {
    IrSeverity severity;
    const char *file;   /* may be NULL */
    uint32_t line, col; /* 1-based; 0 = unknown */
    const char *message;
    const char *source_line; /* the text of that line, without newline; may be NULL */
    size_t source_line_len;
} IrDiagnostic;

typedef void (*IrDiagFn)(void *user, const IrDiagnostic *d);

/* A diagnostics sink. Library code reports through it and never prints on its own. */
typedef struct IrDiag {
    IrDiagFn fn;
    void *user;
    uint32_t n_errors, n_warnings;
    uint32_t max_errors; /* 0 = unlimited; further errors are counted but not delivered */
} IrDiag;

void ir_diag_init(IrDiag *d, IrDiagFn fn, void *user);
/* The standard sink: `file:line:col: error: message`, the source line and a caret. `user` is
 * a FILE*. */
void ir_diag_print_fn(void *user, const IrDiagnostic *d);
/* A sink that appends formatted diagnostics into an IrStrBuf (user = IrStrBuf*). */
void ir_diag_buffer_fn(void *user, const IrDiagnostic *d);
void ir_diag_report(IrDiag *d, IrSeverity sev, const char *file, uint32_t line, uint32_t col,
                    const char *src, size_t src_len, const char *fmt, ...)
    __attribute__((format(printf, 8, 9)));
/* Convenience: an error with no location. */
void ir_diag_error(IrDiag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* For "did you mean": the name in names[0..n) closest to word (edit distance, a swap of
 * neighbours counting one, case ignored) when it is close enough to be a typo; else NULL. */
const char *ir_suggest(const char *word, const char *const *names, size_t n);

/* Growable string buffer, used by printers and sinks. */
typedef struct IrStrBuf {
    char *data;
    size_t len, cap;
    bool failed; /* an allocation failed; contents truncated */
} IrStrBuf;
void ir_strbuf_init(IrStrBuf *b);
void ir_strbuf_free(IrStrBuf *b);
void ir_strbuf_append(IrStrBuf *b, const char *s, size_t n);
void ir_strbuf_puts(IrStrBuf *b, const char *s);
void ir_strbuf_printf(IrStrBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ir_strbuf_putc(IrStrBuf *b, char c);

/* ---- ids ----------------------------------------------------------------------------------- */

typedef uint32_t IrStrId;    /* interned string; 0 = "" */
typedef uint32_t IrExprId;   /* interned dim expression; 0 = none */
typedef uint32_t IrTypeId;   /* interned type (tensor, seq, opt); 0 = unknown type */
typedef uint32_t IrValueId;  /* SSA value; 0 = none (absent optional operand/result) */
typedef uint32_t IrNodeId;   /* node; 0 = none */
typedef uint32_t IrRegionId; /* region; 1 = the graph's top-level body */
typedef uint32_t IrConstId;  /* constant tensor data; 0 = none */
typedef uint32_t IrSymId;    /* shape symbol; 0 = none */

#define IR_ROOT_REGION ((IrRegionId)1)

/* ---- dtypes -------------------------------------------------------------------------------- */

#define IR_DTYPE_LIST(X)                                                                       \
    X(F64, "f64", 8, 11)                                                                       \
    X(F32, "f32", 4, 1)                                                                        \
    X(F16, "f16", 2, 10)                                                                       \
    X(BF16, "bf16", 2, 16)                                                                     \
    X(F8E4M3FN, "f8e4m3fn", 1, 17)                                                             \
    X(F8E5M2, "f8e5m2", 1, 19)                                                                 \
    X(I64, "i64", 8, 7)                                                                        \
    X(I32, "i32", 4, 6)                                                                        \
    X(I16, "i16", 2, 5)                                                                        \
    X(I8, "i8", 1, 3)                                                                          \
    X(U64, "u64", 8, 13)                                                                       \
    X(U32, "u32", 4, 12)                                                                       \
    X(U16, "u16", 2, 4)                                                                        \
    X(U8, "u8", 1, 2)                                                                          \
    X(BOOL, "bool", 1, 9)                                                                      \
    X(STRING, "string", 16, 8)

typedef enum IrDType {
    IR_DTYPE_NONE = 0,
#define X(e, name, size, onnx) IR_DTYPE_##e,
    IR_DTYPE_LIST(X)
#undef X
    IR_DTYPE_COUNT
} IrDType;

const char *ir_dtype_name(IrDType t);       /* "f32"; "?" for NONE */
IrDType ir_dtype_from_name(const char *s, size_t n); /* NONE if unknown */
size_t ir_dtype_size(IrDType t);            /* bytes per element */
int ir_dtype_onnx(IrDType t);               /* ONNX TensorProto.DataType code */
IrDType ir_dtype_from_onnx(int code);       /* NONE if unsupported */
bool ir_dtype_is_float(IrDType t);
bool ir_dtype_is_int(IrDType t);   /* signed or unsigned integer, not bool */
bool ir_dtype_is_signed(IrDType t);
/* The value range of the 8- to 32-bit integer dtypes (what quantization saturates to); false for
 * the others. */
bool ir_dtype_quant_range(IrDType t, double *lo, double *hi);

/* Strings. A tensor element of dtype string is a byte string of any length (NUL and non-UTF-8
 * bytes allowed). In memory (interpreter tensors, builders) an element is an IrStringElem, so
 * elements copy by value like any other dtype (ir_dtype_size(IR_DTYPE_STRING) ==
 * sizeof(IrStringElem)); the bytes live in the block that owns the tensor. Graph constants
 * hold a position-independent blob instead, so they serialize, hash and compare by bytes and
 * map in place: u64 little-endian offsets[n + 1] (offsets[0] = 0, non-decreasing), then the
 * bytes of all elements back to back; element i is bytes[offsets[i], offsets[i + 1]). */
typedef struct IrStringElem {
    const char *data; /* may be NULL when len == 0 */
    size_t len;
} IrStringElem;
/* Bytes of the blob holding n elements. */
size_t ir_string_blob_size(const IrStringElem *elems, size_t n);
/* Writes the blob (ir_string_blob_size bytes) for n elements into dst. */
void ir_string_blob_write(const IrStringElem *elems, size_t n, void *dst);
/* True when data[0..nbytes) is a well-formed blob of exactly n elements. */
bool ir_string_blob_valid(const void *data, size_t nbytes, size_t n);
/* Element i of a valid blob of n elements (points into the blob). */
IrStringElem ir_string_blob_at(const void *data, size_t n, size_t i);

/* Exact software conversions (round to nearest even; FP8 per the OCP 8-bit FP spec, saturating
 * to the largest finite value on overflow when `saturate`, NaN kept). */
float ir_f16_to_f32(uint16_t h);
uint16_t ir_f32_to_f16(float f);
float ir_bf16_to_f32(uint16_t h);
uint16_t ir_f32_to_bf16(float f);
float ir_f8e4m3fn_to_f32(uint8_t v);
uint8_t ir_f32_to_f8e4m3fn(float f, bool saturate);
float ir_f8e5m2_to_f32(uint8_t v);
uint8_t ir_f32_to_f8e5m2(float f, bool saturate);
/* The constants of an FP8 format's encoder (the f32 -> FP8 conversion above works on the bits of
 * the value as a double): exponent bias, significand bits with the implicit one, mantissa mask,
 * the double bit patterns of half the smallest subnormal (at or below it: zero), of the largest
 * value that still rounds to a finite code and of the smallest normal, the largest finite code,
 * and whether the format is E4M3FN (one NaN code, no infinities). The CPU backend generates the
 * same conversion from them. */
typedef struct IrFp8Format {
    unsigned bias, sig_bits, man_mask;
    uint64_t mindenorm_o2, overflow, minnorm;
    uint8_t maxnorm;
    bool e4m3;
} IrFp8Format;
/* The format of dt (IR_DTYPE_F8E4M3FN or IR_DTYPE_F8E5M2), NULL for other dtypes. */
const IrFp8Format *ir_fp8_format(IrDType dt);
/* Element i of a buffer of dtype t, as double / as int64 (for any dtype). */
double ir_elem_get_f64(IrDType t, const void *data, size_t i);
int64_t ir_elem_get_i64(IrDType t, const void *data, size_t i);
/* Store a double into element i (rounding as the dtype requires; ints truncate toward zero). */
void ir_elem_set_f64(IrDType t, void *data, size_t i, double v);
void ir_elem_set_i64(IrDType t, void *data, size_t i, int64_t v);

/* ---- the graph ----------------------------------------------------------------------------- */

typedef struct IrGraph IrGraph;

IrStatus ir_graph_create(IrGraph **out) IR_MUST_CHECK;
void ir_graph_destroy(IrGraph *g);
void ir_graph_set_name(IrGraph *g, const char *name);
const char *ir_graph_name(const IrGraph *g);
/* The file the graph was read from (for diagnostics); may be NULL. */
const char *ir_graph_source_file(const IrGraph *g);
void ir_graph_set_source_file(IrGraph *g, const char *path);
/* Borrows the text the graph was parsed from so diagnostics can show source lines; the caller
 * keeps it alive (or clears it with NULL) while the graph is used. */
void ir_graph_set_source_text(IrGraph *g, const char *text, size_t len);
/* Bytes of memory held by the graph's tables (not counting mapped weights). */
size_t ir_graph_memory_bytes(const IrGraph *g);
/* Set when an allocation failed inside an infallible-looking builder call; every later builder
 * call is a no-op returning 0, and ir_graph_status reports IR_ENOMEM. */
IrStatus ir_graph_status(const IrGraph *g);

/* strings */
IrStrId ir_str_intern(IrGraph *g, const char *s, size_t n);
IrStrId ir_str_intern_cstr(IrGraph *g, const char *s);
const char *ir_str(const IrGraph *g, IrStrId id);
/* Returns 0 when the string was never interned. */
IrStrId ir_str_find(const IrGraph *g, const char *s, size_t n);

/* ---- symbolic dims ------------------------------------------------------------------------- */

typedef enum IrExprKind {
    IR_EXPR_CONST = 1, /* a known size */
    IR_EXPR_UNKNOWN,   /* `?` */
    IR_EXPR_SYM,       /* a named symbol */
    IR_EXPR_ADD,
    IR_EXPR_SUB,
    IR_EXPR_MUL,
    IR_EXPR_DIV, /* floor division, meant for exact cases (S/2 with S % 2 == 0) */
    IR_EXPR_MOD,
    IR_EXPR_MIN, /* min(a, b): a Slice's clamped bounds on a symbolic dim */
    IR_EXPR_MAX,
} IrExprKind;

IrSymId ir_sym_declare(IrGraph *g, const char *name); /* idempotent */
IrSymId ir_sym_find(const IrGraph *g, const char *name, size_t n);
const char *ir_sym_name(const IrGraph *g, IrSymId s);
uint32_t ir_graph_num_syms(const IrGraph *g);
/* True once ir_graph_specialize_symbol replaced the symbol (it is then neither printed nor
 * found by name). */
bool ir_sym_specialized(const IrGraph *g, IrSymId s);

IrExprId ir_expr_const(IrGraph *g, int64_t v);
IrExprId ir_expr_unknown(IrGraph *g);
IrExprId ir_expr_sym(IrGraph *g, IrSymId s);
/* Builds a simplified, canonical binary expression (constants folded, identities removed,
 * commutative operands ordered), so equal expressions usually get equal ids. */
IrExprId ir_expr_binary(IrGraph *g, IrExprKind k, IrExprId a, IrExprId b);
IrExprKind ir_expr_kind(const IrGraph *g, IrExprId e);
int64_t ir_expr_const_value(const IrGraph *g, IrExprId e); /* CONST only */
IrSymId ir_expr_sym_id(const IrGraph *g, IrExprId e);      /* SYM only */
IrExprId ir_expr_lhs(const IrGraph *g, IrExprId e);
IrExprId ir_expr_rhs(const IrGraph *g, IrExprId e);
bool ir_expr_is_const(const IrGraph *g, IrExprId e, int64_t *value);
/* Evaluates with symbol values given by `sym_values[sym]` (index by IrSymId, entry 0 unused);
 * false if an unknown, an unbound symbol (value < 0) or a division by zero is met. */
bool ir_expr_eval(const IrGraph *g, IrExprId e, const int64_t *sym_values, int64_t *out);
void ir_expr_print(const IrGraph *g, IrExprId e, IrStrBuf *b);

typedef enum IrConstraintKind {
    IR_CONSTRAINT_RANGE = 1, /* lo <= a <= hi */
    IR_CONSTRAINT_EQ,        /* a == b */
    IR_CONSTRAINT_DIVISIBLE, /* a % k == 0 */
} IrConstraintKind;

/* Where a constraint comes from: the user (`constraint`), shape analysis (`fact`: implied by
 * the graph, e.g. two dims that must match), or a runtime check on the inputs under which the
 * graph is valid (`guard`, computed by shape-infer). */
typedef enum IrConstraintOrigin {
    IR_CONSTRAINT_USER = 0,
    IR_CONSTRAINT_FACT = 1,
    IR_CONSTRAINT_GUARD = 2,
} IrConstraintOrigin;

typedef struct IrConstraint {
    IrConstraintKind kind;
    IrExprId a, b; /* b for EQ */
    int64_t lo, hi; /* RANGE; DIVISIBLE uses lo as k */
    IrConstraintOrigin origin;
    IrStrId note; /* facts and guards: the node that required it (0 = none) */
} IrConstraint;

/* Adds a constraint unless an identical one (kind, operands, origin) is present. */
void ir_graph_add_constraint(IrGraph *g, const IrConstraint *c);
/* Removes every constraint of the given origin (shape-infer recomputes facts and guards). */
void ir_graph_clear_constraints(IrGraph *g, IrConstraintOrigin origin);
/* Replaces symbol s by a constant everywhere (types, constraints); it is no longer listed by
 * the printer nor found by name. Constraints
 * that become constant are checked (a violated one is an error naming it) and dropped. */
IrStatus ir_graph_specialize_symbol(IrGraph *g, IrSymId s, int64_t value, IrDiag *diag) IR_MUST_CHECK;
/* Rebuilds an expression with symbol s replaced by a constant (simplified). */
IrExprId ir_expr_substitute(IrGraph *g, IrExprId e, IrSymId s, int64_t value);
/* "B in [1, 64]", "S % 8 == 0", "T == S + 1" */
void ir_constraint_print(const IrGraph *g, const IrConstraint *c, IrStrBuf *b);
uint32_t ir_graph_num_constraints(const IrGraph *g);
IrConstraint ir_graph_constraint(const IrGraph *g, uint32_t i);

/* ---- types --------------------------------------------------------------------------------- */

#define IR_RANK_UNKNOWN UINT32_MAX

/* dims: `rank` interned expressions. rank IR_RANK_UNKNOWN means unranked (dims ignored). */
IrTypeId ir_type_tensor(IrGraph *g, IrDType dt, uint32_t rank, const IrExprId *dims);
/* Convenience: all dims constant (a negative entry means `?`). */
IrTypeId ir_type_tensor_i64(IrGraph *g, IrDType dt, uint32_t rank, const int64_t *dims);
IrDType ir_type_dtype(const IrGraph *g, IrTypeId t); /* NONE for type 0 */
uint32_t ir_type_rank(const IrGraph *g, IrTypeId t); /* IR_RANK_UNKNOWN for unranked/0 */
const IrExprId *ir_type_dims(const IrGraph *g, IrTypeId t);
/* Element count if every dim is constant. */
bool ir_type_numel(const IrGraph *g, IrTypeId t, int64_t *out);
void ir_type_print(const IrGraph *g, IrTypeId t, IrStrBuf *b);

/* Sequence and optional types (ONNX's sequence_type / optional_type). `seq<T>` is a sequence
 * of tensors of type T (T's dims are what all elements share: `seq<f32[?, 3]>`, or `seq<f32>`
 * when only the dtype is known); `opt<T>` holds nothing or one value of tensor or sequence type
 * T. An element type 0 means unknown (`seq<?>`). Interned like tensor types. For them
 * ir_type_dtype is NONE, ir_type_rank IR_RANK_UNKNOWN and ir_type_dims NULL, so code that only
 * knows tensors sees an unknown type; ask ir_type_kind first. */
typedef enum IrTypeKind {
    IR_TYPE_TENSOR = 0,
    IR_TYPE_SEQ = 1,
    IR_TYPE_OPT = 2,
} IrTypeKind;
/* elem must be a tensor type or 0; returns 0 otherwise (or after an allocation failure). */
IrTypeId ir_type_seq(IrGraph *g, IrTypeId elem);
/* inner must be a tensor or sequence type, or 0. */
IrTypeId ir_type_opt(IrGraph *g, IrTypeId inner);
IrTypeKind ir_type_kind(const IrGraph *g, IrTypeId t); /* TENSOR for 0 (unknown) */
IrTypeId ir_type_elem(const IrGraph *g, IrTypeId t);   /* seq/opt: element type; else 0 */
/* True for a seq or opt type. */
bool ir_type_is_container(const IrGraph *g, IrTypeId t);
/* The tensor dtype a type holds, looking through seq/opt (NONE when unknown). */
IrDType ir_type_elem_dtype(const IrGraph *g, IrTypeId t);
/* False when a and b cannot describe the same value (different kinds, dtypes, ranks or
 * constant dims, compared through seq/opt); an unknown side is compatible with anything. */
bool ir_type_compatible(const IrGraph *g, IrTypeId a, IrTypeId b);
/* The type that describes values of both a and b (dims that differ become `?`, ranks that
 * differ unranked, through seq/opt); 0 when one is unknown or the kinds or dtypes differ. */
IrTypeId ir_type_join(IrGraph *g, IrTypeId a, IrTypeId b);

/* ---- op table (see ops.def) ---------------------------------------------------------------- */

typedef enum IrOpClass {
    IR_CLASS_ELEMENTWISE,  /* unary/binary/n-ary with broadcasting */
    IR_CLASS_REDUCTION,    /* reduces along axes (incl. softmax, norms) */
    IR_CLASS_CONTRACTION,  /* MatMul, Gemm, Conv */
    IR_CLASS_DATA_MOVEMENT,/* reshape, transpose, gather, slice, concat... */
    IR_CLASS_SHAPE,        /* computes shapes / metadata */
    IR_CLASS_CONTROL_FLOW, /* If, Loop, Scan */
    IR_CLASS_QUANTIZE,     /* (de)quantization */
    IR_CLASS_FUSED,        /* irtool fused group */
    IR_CLASS_RANDOM,       /* draws from a random generator: never folded, merged or speculated */
    IR_CLASS_OTHER,
} IrOpClass;

typedef enum IrOp {
    IR_OP_NONE = 0,
#define IR_OP(id, name, cls, min_in, max_in, min_out, max_out, regions, attrs, infer) IR_OP_##id,
#include "ops.def"
#undef IR_OP
    IR_OP_COUNT
} IrOp;

typedef struct IrInferCtx IrInferCtx;
typedef IrStatus (*IrInferFn)(IrInferCtx *ctx);

typedef struct IrOpInfo {
    const char *name;   /* as written in text and ONNX: "Conv", "irtool.fused" */
    IrOpClass cls;
    uint16_t min_inputs, max_inputs;   /* max 0xFFFF = variadic */
    uint16_t min_outputs, max_outputs;
    const char *regions; /* space-separated region names, "" for none */
    const char *attrs;   /* attribute schema, see ops.def */
    IrInferFn infer;     /* type/shape rule */
} IrOpInfo;

#define IR_VARIADIC 0xFFFF

const IrOpInfo *ir_op_info(IrOp op);
IrOp ir_op_from_name(const char *name, size_t n); /* IR_OP_NONE if unknown */
const char *ir_op_name(IrOp op);
const char *ir_op_class_name(IrOpClass c);
uint32_t ir_op_num_regions(IrOp op);
/* True for the ops whose operands or results may be seq/opt values (the seq/opt block of
 * ops.def, Identity, If, Loop); every other op takes and gives tensors only. */
bool ir_op_takes_containers(IrOp op);
/* Name of region i of op, written to buf (NUL-terminated). */
bool ir_op_region_name(IrOp op, uint32_t i, char *buf, size_t cap);

/* ---- attributes ---------------------------------------------------------------------------- */

typedef enum IrAttrKind {
    IR_ATTR_NONE = 0,
    IR_ATTR_INT,
    IR_ATTR_FLOAT,
    IR_ATTR_STRING,
    IR_ATTR_INTS,
    IR_ATTR_FLOATS,
    IR_ATTR_STRINGS,
    IR_ATTR_TENSOR, /* constant data (IrConstId) */
    IR_ATTR_DTYPE,
} IrAttrKind;

const char *ir_attr_kind_name(IrAttrKind k);

/* Attribute spec from the op table: kind, whether required, and the default if any. */
typedef struct IrAttrSpec {
    IrAttrKind kind;
    bool required;
    bool has_default;
    const char *default_text; /* points into the table; up to default_len */
    size_t default_len;
} IrAttrSpec;
bool ir_op_attr_spec(IrOp op, const char *name, size_t n, IrAttrSpec *out);
/* Walks an op's attribute schema in order (one pass over the table's text). The name points
 * into the table and is not NUL-terminated. */
typedef struct IrAttrSpecIter {
    const char *p;
} IrAttrSpecIter;
void ir_op_attr_spec_iter(IrOp op, IrAttrSpecIter *it);
bool ir_op_attr_spec_next(IrAttrSpecIter *it, const char **name, size_t *name_len, IrAttrSpec *out);
/* Iterates spec entries: returns false past the end. */
bool ir_op_attr_spec_at(IrOp op, uint32_t i, char *name_buf, size_t cap, IrAttrSpec *out);

/* An attribute value as the builder takes it. Arrays are borrowed (copied into the graph). */
typedef struct IrAttrValue {
    IrAttrKind kind;
    uint32_t count;   /* array kinds */
    int64_t i;        /* INT; DTYPE holds an IrDType */
    double f;         /* FLOAT */
    IrStrId s;        /* STRING */
    const int64_t *ints;
    const double *floats;
    const IrStrId *strs;
    IrConstId tensor; /* TENSOR */
} IrAttrValue;

/* ---- constants ----------------------------------------------------------------------------- */

/* Creates constant data of `type` (must have constant dims). The bytes are copied into an
 * aligned graph-owned block. */
IrConstId ir_const_create(IrGraph *g, IrTypeId type, const void *data, size_t nbytes);
/* Creates constant data pointing into memory the graph does not copy (for mapped files); the
 * caller guarantees `data` lives as long as the graph (see ir_graph_adopt_mapping). */
IrConstId ir_const_create_borrowed(IrGraph *g, IrTypeId type, const void *data, size_t nbytes);
/* Creates a string constant (the blob above) of `type` (constant dims, numel == n) from elements (copied). */
IrConstId ir_const_create_strings(IrGraph *g, IrTypeId type, const IrStringElem *elems, size_t n);
IrTypeId ir_const_type(const IrGraph *g, IrConstId c);
const void *ir_const_data(const IrGraph *g, IrConstId c);
size_t ir_const_nbytes(const IrGraph *g, IrConstId c);
/* Where the data came from when it was read from an external raw file (text `external`). */
void ir_const_set_external(IrGraph *g, IrConstId c, IrStrId path, uint64_t offset);
bool ir_const_external(const IrGraph *g, IrConstId c, IrStrId *path, uint64_t *offset);
uint32_t ir_graph_num_consts(const IrGraph *g);
/* Keeps a mapping (munmap'd with the graph). */
IrStatus ir_graph_adopt_mapping(IrGraph *g, void *addr, size_t len) IR_MUST_CHECK;

/* ---- values -------------------------------------------------------------------------------- */

typedef enum IrValueKind {
    IR_VALUE_ARG = 1, /* region (or graph) input */
    IR_VALUE_RESULT,  /* node result */
    IR_VALUE_CONST,   /* graph-level constant (weight) */
} IrValueKind;

uint32_t ir_graph_num_values(const IrGraph *g); /* ids are 1..num_values */
IrValueKind ir_value_kind(const IrGraph *g, IrValueId v);
const char *ir_value_name(const IrGraph *g, IrValueId v);
IrStrId ir_value_name_id(const IrGraph *g, IrValueId v);
IrTypeId ir_value_type(const IrGraph *g, IrValueId v);
void ir_value_set_type(IrGraph *g, IrValueId v, IrTypeId t);
IrNodeId ir_value_def_node(const IrGraph *g, IrValueId v);    /* RESULT */
uint32_t ir_value_def_index(const IrGraph *g, IrValueId v);   /* result/arg index */
IrRegionId ir_value_def_region(const IrGraph *g, IrValueId v); /* ARG */
IrConstId ir_value_const(const IrGraph *g, IrValueId v);       /* CONST */
IrValueId ir_value_find(const IrGraph *g, const char *name, size_t n);
/* Renames; fails with IR_EINVAL if the name is taken. */
IrStatus ir_value_rename(IrGraph *g, IrValueId v, const char *name) IR_MUST_CHECK;

/* ---- regions ------------------------------------------------------------------------------- */

uint32_t ir_graph_num_regions(const IrGraph *g);
IrNodeId ir_region_parent(const IrGraph *g, IrRegionId r); /* 0 for the root */
IrNodeId ir_region_first(const IrGraph *g, IrRegionId r);
IrNodeId ir_region_last(const IrGraph *g, IrRegionId r);
uint32_t ir_region_num_args(const IrGraph *g, IrRegionId r);
IrValueId ir_region_arg(const IrGraph *g, IrRegionId r, uint32_t i);
/* Adds an argument (graph input for the root). name NULL = generated. */
IrValueId ir_region_add_arg(IrGraph *g, IrRegionId r, const char *name, IrTypeId type);
uint32_t ir_region_num_outputs(const IrGraph *g, IrRegionId r);
IrValueId ir_region_output(const IrGraph *g, IrRegionId r, uint32_t i);
void ir_region_set_outputs(IrGraph *g, IrRegionId r, uint32_t n, const IrValueId *vals);
/* Graph inputs and outputs are the root region's args and outputs. */
static inline uint32_t ir_graph_num_inputs(const IrGraph *g) { return ir_region_num_args(g, IR_ROOT_REGION); }
static inline IrValueId ir_graph_input(const IrGraph *g, uint32_t i) { return ir_region_arg(g, IR_ROOT_REGION, i); }
static inline uint32_t ir_graph_num_outputs(const IrGraph *g) { return ir_region_num_outputs(g, IR_ROOT_REGION); }
static inline IrValueId ir_graph_output(const IrGraph *g, uint32_t i) { return ir_region_output(g, IR_ROOT_REGION, i); }

/* Graph-level constant value (lives in the root region's scope). */
IrValueId ir_graph_add_const_value(IrGraph *g, const char *name, IrConstId c);
uint32_t ir_graph_num_const_values(const IrGraph *g);
/* Removes the graph constants whose use count (indexed by value id, as filled by
 * ir_graph_count_uses) is zero. */
void ir_graph_remove_unused_consts(IrGraph *g, const uint32_t *uses);
IrValueId ir_graph_const_value(const IrGraph *g, uint32_t i);

/* ---- nodes --------------------------------------------------------------------------------- */

typedef struct IrLoc {
    IrStrId file; /* 0 = no location */
    uint32_t line, col;
} IrLoc;

/* Creates a node at the end of region r. Results get fresh values named by result_names (NULL
 * or NULL entries: generated names) with types (NULL = unknown). An absent optional operand is
 * 0. Creates the op's regions, empty. Returns 0, creating nothing, when a result name is taken
 * (or repeated), and after an allocation failure (then ir_graph_status says IR_ENOMEM). */
IrNodeId ir_node_create(IrGraph *g, IrRegionId r, IrOp op, uint32_t n_operands,
                        const IrValueId *operands, uint32_t n_results,
                        const char *const *result_names, const IrTypeId *result_types);
/* Same, but placing the node before `before` (in before's region). */
IrNodeId ir_node_create_before(IrGraph *g, IrNodeId before, IrOp op, uint32_t n_operands,
                               const IrValueId *operands, uint32_t n_results,
                               const char *const *result_names, const IrTypeId *result_types);
/* Unlinks and frees the node (its regions too). Its results must have no remaining uses. */
void ir_node_erase(IrGraph *g, IrNodeId n);
/* Moves an existing node to just before `before` (or to the end of region r if before = 0). */
void ir_node_move(IrGraph *g, IrNodeId n, IrRegionId r, IrNodeId before);
bool ir_node_alive(const IrGraph *g, IrNodeId n);
uint32_t ir_graph_node_capacity(const IrGraph *g); /* node ids are < capacity+1 */
uint32_t ir_graph_num_nodes(const IrGraph *g);     /* live nodes, all regions */

IrOp ir_node_op(const IrGraph *g, IrNodeId n);
IrRegionId ir_node_region(const IrGraph *g, IrNodeId n);
IrNodeId ir_node_next(const IrGraph *g, IrNodeId n);
IrNodeId ir_node_prev(const IrGraph *g, IrNodeId n);
uint32_t ir_node_num_operands(const IrGraph *g, IrNodeId n);
IrValueId ir_node_operand(const IrGraph *g, IrNodeId n, uint32_t i); /* 0 (absent) past the last */
void ir_node_set_operand(IrGraph *g, IrNodeId n, uint32_t i, IrValueId v);
uint32_t ir_node_num_results(const IrGraph *g, IrNodeId n);
IrValueId ir_node_result(const IrGraph *g, IrNodeId n, uint32_t i); /* 0 (absent) past the last */
uint32_t ir_node_num_regions(const IrGraph *g, IrNodeId n);
IrRegionId ir_node_region_at(const IrGraph *g, IrNodeId n, uint32_t i);

/* Node names are stored, not interned: compare them as text, not by id. */
const char *ir_node_name(const IrGraph *g, IrNodeId n); /* "" if none */
void ir_node_set_name(IrGraph *g, IrNodeId n, const char *name);
IrLoc ir_node_loc(const IrGraph *g, IrNodeId n);
void ir_node_set_loc(IrGraph *g, IrNodeId n, IrLoc loc);
/* Position in the text the node was parsed from (diagnostics only; never printed). */
void ir_node_text_pos(const IrGraph *g, IrNodeId n, uint32_t *line, uint32_t *col);
void ir_node_set_text_pos(IrGraph *g, IrNodeId n, uint32_t line, uint32_t col);
/* Provenance: names of the original nodes this node came from. */
uint32_t ir_node_num_provenance(const IrGraph *g, IrNodeId n);
IrStrId ir_node_provenance(const IrGraph *g, IrNodeId n, uint32_t i);
void ir_node_set_provenance(IrGraph *g, IrNodeId n, uint32_t count, const IrStrId *names);

/* Attributes are kept sorted by name; setting an existing name replaces it. */
void ir_node_set_attr(IrGraph *g, IrNodeId n, const char *name, const IrAttrValue *v);
void ir_node_set_attr_id(IrGraph *g, IrNodeId n, IrStrId name, const IrAttrValue *v);
uint32_t ir_node_num_attrs(const IrGraph *g, IrNodeId n);
IrStrId ir_node_attr_name(const IrGraph *g, IrNodeId n, uint32_t i);
IrAttrValue ir_node_attr_at(const IrGraph *g, IrNodeId n, uint32_t i);
/* Looks up an attribute set on the node (not defaults). */
bool ir_node_attr(const IrGraph *g, IrNodeId n, const char *name, IrAttrValue *out);
/* Typed getters that fall back to the op table's default; `*found` false when neither the node
 * nor the table has a value. */
int64_t ir_node_attr_int(const IrGraph *g, IrNodeId n, const char *name, bool *found);
double ir_node_attr_float(const IrGraph *g, IrNodeId n, const char *name, bool *found);
const char *ir_node_attr_string(const IrGraph *g, IrNodeId n, const char *name, bool *found);

/* Traversal: all live nodes in program order, pre-order into regions. Call with 0 to start. */
IrNodeId ir_graph_walk_next(const IrGraph *g, IrNodeId cur);

/* Uses (recomputed on request, never stored stale). Fills counts[v] = number of operand and
 * region-output uses of every value, plus one for the value a Gradient node names as `y`;
 * `counts` has ir_graph_num_values()+1 entries. */
void ir_graph_count_uses(const IrGraph *g, uint32_t *counts);
/* Replaces every use of `from` (operands and region outputs) with `to`. */
void ir_graph_replace_uses(IrGraph *g, IrValueId from, IrValueId to);

/* Graph-level metadata kept for ONNX round trips: opset imports and key/value strings. */
void ir_graph_set_opset(IrGraph *g, const char *domain, int64_t version);
uint32_t ir_graph_num_opsets(const IrGraph *g);
void ir_graph_opset_at(const IrGraph *g, uint32_t i, const char **domain, int64_t *version);
void ir_graph_set_meta(IrGraph *g, const char *key, const char *value);
uint32_t ir_graph_num_meta(const IrGraph *g);
void ir_graph_meta_at(const IrGraph *g, uint32_t i, const char **key, const char **value);

/* ---- cloning ---- */

/* Deep-copies node n into region dst of the same graph, before `before` (0 = at the end of
 * dst): op, attributes, name, location, result types, and its regions with their arguments and
 * nodes, recursively. The copy's provenance is n's provenance, or n's name when it has none.
 * Results and region arguments get fresh unique names derived from the originals ("h" ->
 * "h_u1"; a name already ending in _uN restarts from its stem).
 * `map` is a dense array indexed by IrValueId with at least ir_graph_num_values(g) + 1 entries
 * at the time of the call: an operand v (here or inside the copied regions) is replaced by
 * map[v] when that is nonzero, else kept. On return map[old] = new for every result and region
 * argument of n and of the nodes nested in it, so later clones refer to the copies.
 * Returns the new node, or 0 after an allocation failure (ir_graph_status says which). */
IrNodeId ir_node_clone(IrGraph *g, IrNodeId n, IrRegionId dst, IrNodeId before, IrValueId *map);
/* Clones every node of region src, in order, into region dst before `before` (0 = at the
 * end), with `map` as for ir_node_clone; the caller binds src's arguments first (map[arg] =
 * value). outputs (ir_region_num_outputs(src) entries, may be NULL) receives src's outputs
 * after mapping: a copy, or the outer value itself when the region returns one it did not
 * define. src may equal dst only when `before` is nonzero. */
IrStatus ir_region_clone_into(IrGraph *g, IrRegionId src, IrRegionId dst, IrNodeId before, IrValueId *map,
                              IrValueId *outputs) IR_MUST_CHECK;

/* ---- type inference context (used by the op table's infer functions) ----------------------- */

IrGraph *ir_infer_graph(IrInferCtx *c);
IrNodeId ir_infer_node(IrInferCtx *c);
uint32_t ir_infer_num_inputs(IrInferCtx *c);
/* Type of operand i; 0 (unknown) when absent or unknown. */
IrTypeId ir_infer_input_type(IrInferCtx *c, uint32_t i);
/* Constant data of operand i when it is a graph constant (or a Constant node's value), else
 * NULL; lets shape rules read e.g. Reshape's shape. */
const void *ir_infer_input_const(IrInferCtx *c, uint32_t i, IrTypeId *type);
uint32_t ir_infer_num_outputs(IrInferCtx *c);
void ir_infer_set_output(IrInferCtx *c, uint32_t i, IrTypeId t);
/* Report a rule violation; returns IR_EVERIFY for convenience. */
IrStatus ir_infer_error(IrInferCtx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Known contents of small integer tensors: shape computations (Shape -> Gather -> Concat ->
 * Reshape) evaluated symbolically, as one dim expression per element. Filled by shape-infer
 * while it walks the graph; type rules read them through ir_infer_input_values. Rules also
 * record requirements they rely on (two dims equal, a dim divisible) as facts here. */
typedef struct IrShapeFacts IrShapeFacts;
IrStatus ir_shape_facts_create(const IrGraph *g, IrShapeFacts **out) IR_MUST_CHECK;
void ir_shape_facts_destroy(IrShapeFacts *f);
bool ir_shape_facts_values(const IrShapeFacts *f, IrValueId v, const IrExprId **vals, uint32_t *n);
uint32_t ir_shape_facts_num_required(const IrShapeFacts *f);
/* Requirement i: a constraint (EQ or DIVISIBLE) and the node that needs it. */
IrConstraint ir_shape_facts_required(const IrShapeFacts *f, uint32_t i, IrNodeId *node);

/* Contents of operand i as dim expressions (constants, or facts when available); false if
 * unknown or longer than cap. A scalar gives one element. */
bool ir_infer_input_values(IrInferCtx *c, uint32_t i, IrExprId *vals, uint32_t *n, uint32_t cap);
void ir_infer_set_output_values(IrInferCtx *c, uint32_t i, const IrExprId *vals, uint32_t n);
/* Records that the rule assumes a == b (a no-op when they are already equal). */
void ir_infer_require_equal(IrInferCtx *c, IrExprId a, IrExprId b);
/* Records that the rule assumes a % k == 0. */
void ir_infer_require_divisible(IrInferCtx *c, IrExprId a, int64_t k);

/* Runs the op's type rule on node n. inferred[] (num results entries) receives the types (0 =
 * unknown). Errors go to diag (located at the node). */
IrStatus ir_node_infer_types(IrGraph *g, IrNodeId n, IrDiag *diag, IrTypeId *inferred) IR_MUST_CHECK;
/* Same, reading and recording shape facts (may be NULL). */
IrStatus ir_node_infer_types_ex(IrGraph *g, IrNodeId n, IrDiag *diag, IrTypeId *inferred,
                                IrShapeFacts *facts) IR_MUST_CHECK;

/* ---- verifier ------------------------------------------------------------------------------ */

typedef struct IrVerifyOptions {
    uint32_t max_errors; /* 0 = default (20) */
    bool check_types;    /* run the op table's type rules (default true via ir_verify) */
} IrVerifyOptions;

/* Checks SSA, scoping, operand/result/region counts, attribute names and kinds, type rules and
 * outputs. Reports every error (up to the cap) with location. */
IrStatus ir_verify(IrGraph *g, IrDiag *diag) IR_MUST_CHECK;
IrStatus ir_verify_ex(IrGraph *g, const IrVerifyOptions *opt, IrDiag *diag) IR_MUST_CHECK;
/* Reports a diagnostic located at node n (text position, else source location). */
void ir_diag_at_node(IrDiag *d, const IrGraph *g, IrNodeId n, IrSeverity sev, const char *fmt,
                     ...) __attribute__((format(printf, 5, 6)));

/* ---- text format (.ir) --------------------------------------------------------------------- */

/* Parses text. `filename` is used in diagnostics and to resolve `external` weight files (NULL:
 * "<input>", externals relative to the working directory). */
IrStatus ir_parse_text(const char *text, size_t len, const char *filename, IrDiag *diag,
                       IrGraph **out) IR_MUST_CHECK;
/* Canonical, deterministic printing. */
IrStatus ir_print_text(const IrGraph *g, IrStrBuf *out) IR_MUST_CHECK;

/* ---- binary format (.irb) ------------------------------------------------------------------ */

#define IR_BINARY_FORMAT_VERSION 1
IrStatus ir_write_binary(const IrGraph *g, const char *path, IrDiag *diag) IR_MUST_CHECK;
/* Maps the file; weights are used in place, never copied. */
IrStatus ir_read_binary(const char *path, IrDiag *diag, IrGraph **out) IR_MUST_CHECK;
/* From memory (copies weight data into the graph). */
IrStatus ir_read_binary_mem(const void *data, size_t len, const char *name, IrDiag *diag,
                            IrGraph **out) IR_MUST_CHECK;
bool ir_is_binary(const void *data, size_t len);

/* ---- ONNX (ir/onnx_import.c, ir/onnx_export.c) ------------------------------------------------------------------- */

/* Imports an ONNX ModelProto (opsets 1-17 of the default domain; older operator forms are
 * upgraded to opset 17). `path` names the model for diagnostics and locates external data files
 * (NULL: none allowed). */
IrStatus ir_onnx_import(const void *data, size_t len, const char *path, IrDiag *diag,
                        IrGraph **out) IR_MUST_CHECK;
/* Exports to an ONNX ModelProto file (irtool's own ops go into the "irtool" domain). */
IrStatus ir_onnx_export(const IrGraph *g, const char *path, IrDiag *diag) IR_MUST_CHECK;

/* ---- files --------------------------------------------------------------------------------- */

typedef enum IrFormat {
    IR_FORMAT_UNKNOWN = 0,
    IR_FORMAT_TEXT,   /* .ir */
    IR_FORMAT_BINARY, /* .irb */
    IR_FORMAT_ONNX,   /* .onnx */
    IR_FORMAT_ARTIFACT, /* .irx */
} IrFormat;

IrFormat ir_format_from_path(const char *path);
/* Reads a whole file ("-" = stdin) into a malloc'd NUL-terminated buffer. */
IrStatus ir_read_file(const char *path, IrDiag *diag, char **data, size_t *len) IR_MUST_CHECK;
/* Content addresses (cache keys, entry sums, an artifact's ir_hash) are BLAKE2b-256, written
 * with the algorithm's name so that a different one is recognised, never misread:
 * "blake2b-256:" and 64 hex digits (ir/io.c). */
#define IR_CONTENT_ADDRESS_ALGO "blake2b-256"
#define IR_CONTENT_ADDRESS_CHARS (sizeof IR_CONTENT_ADDRESS_ALGO + 64 + 1) /* "blake2b-256:" 64 hex NUL */
void ir_content_address(const void *p, size_t n, char out[IR_CONTENT_ADDRESS_CHARS]);
/* Writes atomically: a temporary file beside the target (TARGET.tmp.irtool.N, locked while it
 * is written; one a killed writer left is taken over by the next write of TARGET), fsync, then
 * rename; removed on every error. "-" = stdout. A symlink is written through (the file it names
 * is replaced, the link stays); an existing file keeps its permission bits; an existing
 * non-regular file (/dev/null, a FIFO) is written in place. */
IrStatus ir_write_file_atomic(const char *path, const void *data, size_t len,
                              IrDiag *diag) IR_MUST_CHECK;
/* Loads any model format by extension (content sniffing for stdin). */
IrStatus ir_load(const char *path, IrDiag *diag, IrGraph **out) IR_MUST_CHECK;
/* Saves by extension (.ir, .irb, .onnx). */
IrStatus ir_save(const IrGraph *g, const char *path, IrDiag *diag) IR_MUST_CHECK;

#ifdef __cplusplus
}
#endif
#endif
