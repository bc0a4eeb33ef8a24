/* Det (through the runtime's irt_det: LU with partial pivoting in double, as the interpreter),
 * RoiAlign (irt_roi_align), the training optimizers Adagrad, Adam and Momentum (irt_optim), the
 * random ops (irt_random) and MaxUnpool (generated: zero the output, scatter each input element
 * to its index; an index out of range, or an output_shape given at run time that is not the
 * output's, fails the run naming the node). Each takes its counts as LLVM values (llvm/dims.h),
 * so it serves run-time shapes too.
 */
#include "backend/cpu/cpu.h"
#include "backend/runtime/abi.h"
#include "ir/rng.h"

/* Det's LU matrix in double (and its pivot sign): last dim squared, at the binding sym (NULL:
 * static dims). */
int64_t llvm_ops_misc_scratch_at(const IrGraph *g, IrNodeId n, const int64_t *sym) {
    if (ir_node_op(g, n) != IR_OP_DET) return 0;
    IrTypeId t = ir_value_type(g, ir_node_operand(g, n, 0));
    uint32_t r = t ? ir_type_rank(g, t) : IR_RANK_UNKNOWN;
    int64_t m;
    if (r == IR_RANK_UNKNOWN || r < 2 || !ir_expr_eval(g, ir_type_dims(g, t)[r - 1], sym, &m) || m < 0) return 0;
    return m * m * 8 + 8;
}

int64_t llvm_ops_misc_scratch_bytes(const IrGraph *g, IrNodeId n) { return llvm_ops_misc_scratch_at(g, n, NULL); }

bool llvm_ops_misc_scratch_form(const IrGraph *g, IrNodeId n, LowerScratchForm *f) {
    memset(f, 0, sizeof *f);
    IrTypeId t = ir_node_op(g, n) == IR_OP_DET ? ir_value_type(g, ir_node_operand(g, n, 0)) : 0;
    uint32_t r = t ? ir_type_rank(g, t) : IR_RANK_UNKNOWN;
    if (r == IR_RANK_UNKNOWN || r < 2) return false;
    IrExprId m = ir_type_dims(g, t)[r - 1];
    f->n_terms = 2;
    f->term[0] = (LowerScratchTerm){.c = 8, .n_dims = 2, .dims = {m, m}};
    f->term[1] = (LowerScratchTerm){.c = 8};
    return true;
}

static LLVMValueRef i1_false(LlvmEmit *e) { return LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 0, 0); }

/* Elements of v as a value (a constant for static dims); NULL when a dim is unknown. */
static LLVMValueRef numel_of(LlvmEmit *e, IrValueId v) {
    LlvmDims s;
    return llvm_dims_of(e, v, &s) ? llvm_dims_prod(e, &s, 0, s.rank) : NULL;
}

/* Counts a and b must agree: false when both are constants that differ, else a != b is or'ed
 * into *bad for the run to check. */
static bool agree(LlvmEmit *e, LLVMValueRef a, LLVMValueRef b, LLVMValueRef *bad) {
    if (LLVMIsAConstantInt(a) && LLVMIsAConstantInt(b)) return LLVMConstIntGetSExtValue(a) == LLVMConstIntGetSExtValue(b);
    *bad = LLVMBuildOr(e->b, *bad, LLVMBuildICmp(e->b, LLVMIntNE, a, b, ""), "");
    return true;
}

/* Calls runtime function `slot` unless bad (i1) holds at run time, which fails the run with msg
 * instead (shapes that disagree: nothing is read or written out of range). */
static void call_checked(LlvmEmit *e, LLVMValueRef bad, const char *msg, int slot, LLVMValueRef *args, unsigned n) {
    if (LLVMIsAConstantInt(bad)) {
        lo_call_runtime(e, slot, NULL, args, n);
        return;
    }
    lo_fail_if(e, bad, msg);
    LLVMBasicBlockRef after = lo_if_begin(e, LLVMBuildNot(e->b, bad, ""));
    lo_call_runtime(e, slot, NULL, args, n);
    lo_if_end(e, after);
}

/* n int64 values for a runtime function: a constant array when every one is a constant, else
 * one on the kernel's stack. */
static LLVMValueRef i64_array(LlvmEmit *e, const LLVMValueRef *v, unsigned n, const char *name) {
    LLVMTypeRef i64 = lo_i64_t(e), at = LLVMArrayType2(i64, n);
    bool all = true;
    for (unsigned i = 0; i < n; i++) all = all && LLVMIsAConstantInt(v[i]);
    if (all) return lo_const_array(e, i64, (LLVMValueRef *)v, n, name);
    LLVMValueRef a = LLVMBuildAlloca(e->ab, at, name);
    for (unsigned i = 0; i < n; i++) LLVMBuildStore(e->b, v[i], lo_gep(e, i64, a, lo_i64(e, i)));
    return a;
}

static IrStatus gen_det(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    IrDType dt = lower_value_dtype(g, x);
    LlvmDims sx;
    LLVMValueRef bad = i1_false(e);
    if (!llvm_dims_of(e, x, &sx) || sx.rank < 2 || !agree(e, sx.dim[sx.rank - 1], sx.dim[sx.rank - 2], &bad))
        return llvm_ops_refuse(e, "with these shapes");
    if (dt != IR_DTYPE_F32 && dt != IR_DTYPE_F64) return llvm_ops_refuse(e, "on this dtype (f32, f64)");
    LLVMValueRef args[6] = {lo_buf(e, x), lo_i64(e, dt == IR_DTYPE_F64), llvm_dims_prod(e, &sx, 0, sx.rank - 2), sx.dim[sx.rank - 1],
                            lo_buf(e, y), lo_buf(e, ir_graph_num_values(g) + 1 + e->index)};
    char msg[200];
    snprintf(msg, sizeof msg, "Det %%%s: the matrices are not square", ir_value_name(g, y));
    call_checked(e, bad, msg, IRT_FN_DET, args, 6);
    return IR_OK;
}

/* MaxUnpool on sizes as values (llvm/dims.h): the unpooled shape follows the kernel, strides and
 * pads from X's dims; an output smaller than it, indices of another count than X, an index out of
 * range or an output_shape that is not the output's fail the run. */
static IrStatus gen_max_unpool(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    LLVMBuilderRef b = e->b;
    IrValueId x = ir_node_operand(g, n, 0), vi = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    IrValueId vs = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    LlvmDims sx, si, sy, ss;
    if (!llvm_dims_of(e, x, &sx) || !llvm_dims_of(e, vi, &si) || !llvm_dims_of(e, y, &sy) || sx.rank < 3 || sy.rank != sx.rank)
        return llvm_ops_refuse(e, "with these shapes");
    uint32_t rx = sx.rank;
    IrDType it = lower_value_dtype(g, vi);
    size_t es = ir_dtype_size(lower_value_dtype(g, x));
    if ((it != IR_DTYPE_I64 && it != IR_DTYPE_I32) || es == 0 || es > 8) return llvm_ops_refuse(e, "on these dtypes");
    uint32_t sp = rx - 2;
    int64_t k[IR_MAX_RANK], s[IR_MAX_RANK], p[2 * IR_MAX_RANK];
    IrAttrValue av;
    if (!ir_node_attr(g, n, "kernel_shape", &av) || av.count != sp) return llvm_ops_refuse(e, "without kernel_shape");
    for (uint32_t i = 0; i < sp; i++) k[i] = av.ints[i], s[i] = 1, p[i] = p[sp + i] = 0;
    if (ir_node_attr(g, n, "strides", &av) && av.count == sp)
        for (uint32_t i = 0; i < sp; i++) s[i] = av.ints[i];
    if (ir_node_attr(g, n, "pads", &av) && av.count == 2 * sp)
        for (uint32_t i = 0; i < 2 * sp; i++) p[i] = av.ints[i];
    LlvmDims inf = sx; /* the unpooled shape: (in - 1) * stride + kernel - pads */
    for (uint32_t i = 0; i < sp; i++) {
        LLVMValueRef d = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildSub(b, sx.dim[2 + i], lo_i64(e, 1), ""), lo_i64(e, s[i]), ""),
                                      lo_i64(e, k[i] - p[i] - p[sp + i]), "");
        inf.dim[2 + i] = d, inf.cd[2 + i] = LLVMIsAConstantInt(d) ? LLVMConstIntGetSExtValue(d) : -1, inf.ex[2 + i] = 0;
    }
    char msg[200];
    const char *name = ir_value_name(g, y);
    LLVMValueRef bad = LLVMBuildICmp(b, LLVMIntNE, llvm_dims_prod(e, &si, 0, si.rank), llvm_dims_prod(e, &sx, 0, rx), "");
    for (uint32_t i = 0; i < rx; i++) bad = LLVMBuildOr(b, bad, LLVMBuildICmp(b, LLVMIntSLT, sy.dim[i], inf.dim[i], ""), "");
    bool refuse;
    snprintf(msg, sizeof msg, "MaxUnpool %%%s: indices of another count than X, or an output smaller than the unpooled shape", name);
    LLVMBasicBlockRef shapes = lo_run_guard(e, bad, msg, &refuse);
    if (refuse) return llvm_ops_refuse(e, "with these shapes (indices of another count than X, or an output below the unpooled one)");
    if (vs && llvm_dims_of(e, vs, &ss) && llvm_dims_cprod(&ss, 0, ss.rank) != 0) { /* output_shape: the output's own */
        if (llvm_dims_cprod(&ss, 0, ss.rank) != rx || lower_value_dtype(g, vs) != IR_DTYPE_I64)
            return llvm_ops_refuse(e, "with this output_shape");
        snprintf(msg, sizeof msg, "MaxUnpool %%%s: output_shape differs from the output's shape", name);
        LLVMValueRef differ = LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 0, 0), S = lo_buf(e, vs);
        for (uint32_t i = 0; i < rx; i++)
            differ = LLVMBuildOr(b, differ, LLVMBuildICmp(b, LLVMIntNE, lo_load(e, IR_DTYPE_I64, S, lo_i64(e, i)), sy.dim[i], ""), "");
        lo_fail_if(e, differ, msg);
    }
    LLVMValueRef X = lo_buf(e, x), I = lo_buf(e, vi), Y = lo_buf(e, y);
    LLVMBuildMemSet(b, Y, LLVMConstInt(lo_i8_t(e), 0, 0), LLVMBuildMul(b, llvm_dims_prod(e, &sy, 0, rx), lo_i64(e, (int64_t)es), ""), 1);
    LLVMTypeRef et = LLVMIntTypeInContext(e->ctx, (unsigned)(8 * es));
    LLVMValueRef total = llvm_dims_prod(e, &inf, 0, rx), ostr[IR_MAX_RANK];
    llvm_dims_strides(e, &sy, ostr);
    snprintf(msg, sizeof msg, "MaxUnpool %%%s: an index is out of range", name);
    LoLoop l;
    llvm_loop_n(e, &l, llvm_dims_prod(e, &sx, 0, rx));
    LLVMValueRef idx = lo_load(e, it, I, l.iv);
    if (it == IR_DTYPE_I32) idx = LLVMBuildSExt(b, idx, lo_i64_t(e), "");
    LLVMValueRef out = LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntSLT, idx, lo_i64(e, 0), ""), LLVMBuildICmp(b, LLVMIntSGE, idx, total, ""), "");
    lo_fail_if(e, out, msg);
    LLVMBasicBlockRef after = lo_if_begin(e, LLVMBuildNot(b, out, ""));
    LLVMValueRef off = lo_i64(e, 0), rem = idx;
    for (uint32_t dd = rx; dd-- > 0;) {
        LLVMValueRef q = LLVMBuildSDiv(b, rem, inf.dim[dd], "");
        LLVMValueRef c = LLVMBuildSub(b, rem, LLVMBuildMul(b, q, inf.dim[dd], ""), "");
        off = LLVMBuildAdd(b, off, LLVMBuildMul(b, c, ostr[dd], ""), "");
        rem = q;
    }
    LLVMValueRef v = LLVMBuildLoad2(b, et, lo_gep(e, et, X, l.iv), "");
    LLVMBuildStore(b, v, lo_gep(e, et, Y, off));
    lo_if_end(e, after);
    lo_loop_end(e, &l);
    if (shapes) lo_if_end(e, shapes);
    return IR_OK;
}

/* Whether dims a and b differ (i1: a constant when both are). */
static LLVMValueRef dims_differ(LlvmEmit *e, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildICmp(e->b, LLVMIntNE, a, b, ""); }

/* RoiAlign (f32 X and rois, i64 batch indices): the runtime's irt_roi_align, sizes as values
 * (llvm/dims.h); sizes that disagree at run time (rois not n x 4, a batch index per roi, an
 * empty feature map) fail the run. */
static IrStatus gen_roi_align(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    LLVMBuilderRef b = e->b;
    IrValueId x = ir_node_operand(g, n, 0), vr = ir_node_operand(g, n, 1), vb = ir_node_operand(g, n, 2);
    IrValueId y = ir_node_result(g, n, 0);
    LlvmDims sx, sr, sb, sy;
    if (!llvm_dims_of(e, x, &sx) || !llvm_dims_of(e, vr, &sr) || !llvm_dims_of(e, vb, &sb) || !llvm_dims_of(e, y, &sy) ||
        sx.rank != 4 || sr.rank != 2 || sy.rank != 4)
        return llvm_ops_refuse(e, "with these shapes");
    if (lower_value_dtype(g, x) != IR_DTYPE_F32 || lower_value_dtype(g, vr) != IR_DTYPE_F32 ||
        lower_value_dtype(g, vb) != IR_DTYPE_I64 || lower_value_dtype(g, y) != IR_DTYPE_F32)
        return llvm_ops_refuse(e, "on these dtypes (f32, i64 batch indices)");
    const char *mode = ir_node_attr_string(g, n, "mode", NULL);
    const char *ctm = ir_node_attr_string(g, n, "coordinate_transformation_mode", NULL);
    int64_t oh = ir_node_attr_int(g, n, "output_height", NULL), ow = ir_node_attr_int(g, n, "output_width", NULL);
    LLVMValueRef bad = LLVMBuildOr(b, dims_differ(e, sr.dim[1], lo_i64(e, 4)),
                                   dims_differ(e, llvm_dims_prod(e, &sb, 0, sb.rank), sr.dim[0]), "");
    LLVMValueRef want[4] = {sr.dim[0], sx.dim[1], lo_i64(e, oh), lo_i64(e, ow)};
    for (int k = 0; k < 4; k++) bad = LLVMBuildOr(b, bad, dims_differ(e, sy.dim[k], want[k]), "");
    bool refuse;
    LLVMBasicBlockRef shapes = lo_run_guard(e, bad, "RoiAlign: rois, batch indices and output disagree in shape", &refuse);
    if (refuse) return llvm_ops_refuse(e, "with these shapes");
    LLVMValueRef empty = LLVMBuildICmp(b, LLVMIntEQ, llvm_dims_prod(e, &sx, 2, 4), lo_i64(e, 0), "");
    LLVMBasicBlockRef fmap = lo_run_guard(e, empty, "RoiAlign: an empty feature map", &refuse);
    if (refuse) return llvm_ops_refuse(e, "on an empty feature map");
    int64_t sr_ = ir_node_attr_int(g, n, "sampling_ratio", NULL);
    LLVMValueRef pv[10] = {sx.dim[0], sx.dim[1], sx.dim[2], sx.dim[3], sr.dim[0], lo_i64(e, oh), lo_i64(e, ow), lo_i64(e, sr_),
                           lo_i64(e, mode && !strcmp(mode, "max")), lo_i64(e, !ctm || !strcmp(ctm, "half_pixel"))};
    LLVMValueRef gp = lo_i64s(e, pv, 10, "roi.p");
    LLVMValueRef args[7] = {gp, LLVMConstReal(lo_f64_t(e), ir_node_attr_float(g, n, "spatial_scale", NULL)), lo_buf(e, x),
                            lo_buf(e, vr), lo_buf(e, vb), lo_buf(e, y), lo_buf(e, lower_sym_slot(g) + 1)};
    lo_call_runtime(e, IRT_FN_ROI_ALIGN, NULL, args, 7);
    if (fmap) lo_if_end(e, fmap);
    if (shapes) lo_if_end(e, shapes);
    return IR_OK;
}

/* Adagrad, Adam, Momentum (f32 tensors, f32 R, i64 T): irt_optim per optimized tensor, whose
 * gradient and states must have as many elements (checked at run time when they are symbols). */
static IrStatus gen_optim(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrOp op = ir_node_op(g, n);
    uint32_t groups = op == IR_OP_ADAM ? 4 : 3, no = ir_node_num_operands(g, n), nr = ir_node_num_results(g, n);
    if (no < 2 + groups || (no - 2) % groups) return llvm_ops_refuse(e, "with these operands");
    uint32_t cnt = (no - 2) / groups;
    if (nr < (groups - 1) * cnt) return llvm_ops_refuse(e, "with too few results");
    IrValueId vr = ir_node_operand(g, n, 0), vt = ir_node_operand(g, n, 1);
    if (lower_value_dtype(g, vr) != IR_DTYPE_F32 || lower_value_dtype(g, vt) != IR_DTYPE_I64 || lower_value_nbytes(g, vr) != 4 ||
        lower_value_nbytes(g, vt) != 8)
        return llvm_ops_refuse(e, "with R and T other than f32 and i64 scalars");
    for (uint32_t i = 2; i < no; i++) {
        IrValueId v = ir_node_operand(g, n, i);
        if (!v || lower_value_dtype(g, v) != IR_DTYPE_F32) return llvm_ops_refuse(e, "on this dtype (f32)");
    }
    double at[6] = {0};
    if (op == IR_OP_ADAGRAD) {
        at[0] = 0, at[1] = ir_node_attr_float(g, n, "decay_factor", NULL), at[2] = ir_node_attr_float(g, n, "epsilon", NULL);
        at[3] = ir_node_attr_float(g, n, "norm_coefficient", NULL);
    } else if (op == IR_OP_ADAM) {
        at[0] = 1, at[1] = ir_node_attr_float(g, n, "alpha", NULL), at[2] = ir_node_attr_float(g, n, "beta", NULL);
        at[3] = ir_node_attr_float(g, n, "epsilon", NULL), at[4] = ir_node_attr_float(g, n, "norm_coefficient", NULL);
        at[5] = ir_node_attr_float(g, n, "norm_coefficient_post", NULL);
    } else {
        const char *mode = ir_node_attr_string(g, n, "mode", NULL);
        if (!mode || (strcmp(mode, "standard") && strcmp(mode, "nesterov"))) return llvm_ops_refuse(e, "with this mode");
        at[0] = 2, at[1] = ir_node_attr_float(g, n, "alpha", NULL), at[2] = ir_node_attr_float(g, n, "beta", NULL);
        at[3] = ir_node_attr_float(g, n, "norm_coefficient", NULL), at[4] = !strcmp(mode, "nesterov");
    }
    LLVMValueRef av[6];
    for (int i = 0; i < 6; i++) av[i] = LLVMConstReal(lo_f64_t(e), at[i]);
    LLVMValueRef ga = lo_const_array(e, lo_f64_t(e), av, 6, "optim.at");
    LLVMTypeRef ptr = lo_ptr_t(e);
    char msg[200];
    snprintf(msg, sizeof msg, "%s %%%s: a gradient or state has another size than its tensor", ir_op_name(op),
             ir_value_name(g, ir_node_result(g, n, 0)));
    for (uint32_t i = 0; i < cnt; i++) {
        IrValueId x = ir_node_operand(g, n, 2 + i);
        LLVMValueRef ne = numel_of(e, x), bad = i1_false(e), c;
        if (!ne) return llvm_ops_refuse(e, "with these shapes");
        for (uint32_t k = 1; k < groups; k++) /* G and the states: as many elements as X */
            if (!(c = numel_of(e, ir_node_operand(g, n, 2 + k * cnt + i))) || !agree(e, ne, c, &bad))
                return llvm_ops_refuse(e, "with a gradient or state of another size than its tensor");
        LLVMValueRef args[11] = {ga, lo_buf(e, vr), lo_buf(e, vt), ne, lo_buf(e, x), lo_buf(e, ir_node_operand(g, n, 2 + cnt + i))};
        for (uint32_t k = 0; k < 2; k++) { /* the states */
            bool has = 2 + k < groups;
            args[6 + k] = has ? lo_buf(e, ir_node_operand(g, n, 2 + (2 + k) * cnt + i)) : LLVMConstPointerNull(ptr);
        }
        for (uint32_t k = 0; k < 3; k++) { /* X', then the states' */
            IrValueId v = k < groups - 1 ? ir_node_result(g, n, k * cnt + i) : 0;
            if (v && (!(c = numel_of(e, v)) || !agree(e, ne, c, &bad))) return llvm_ops_refuse(e, "with these shapes");
            args[8 + k] = v ? lo_buf(e, v) : LLVMConstPointerNull(ptr);
        }
        if (!args[8] || LLVMIsNull(args[8])) return llvm_ops_refuse(e, "without its X output");
        for (uint32_t k = 0; k < 2; k++) /* unread state outputs: computed into nothing */
            if (2 + k < groups && LLVMIsNull(args[9 + k])) return llvm_ops_refuse(e, "without its state outputs");
        call_checked(e, bad, msg, IRT_FN_OPTIM, args, 11);
    }
    return IR_OK;
}

static int64_t rand_kind(IrDType dt) {
    switch (dt) {
    case IR_DTYPE_F32: return 0;
    case IR_DTYPE_F64: return 1;
    case IR_DTYPE_I32: return 2;
    case IR_DTYPE_I64: return 3;
    case IR_DTYPE_I8: case IR_DTYPE_U8: case IR_DTYPE_BOOL: return 4;
    default: return -1;
    }
}

/* The random ops with the interpreter's generator and seed (irt_random): the same numbers as the
 * interpreter for a seeded op; an unseeded one is seeded from its node, which passes may renumber. */
static IrStatus gen_random(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrOp op = ir_node_op(g, n);
    IrValueId y = ir_node_result(g, n, 0), in = ir_node_num_operands(g, n) ? ir_node_operand(g, n, 0) : 0;
    LLVMValueRef count = numel_of(e, y);
    if (!count) return llvm_ops_refuse(e, "with this shape");
    bool bern = op == IR_OP_BERNOULLI, normal = op == IR_OP_RANDOM_NORMAL || op == IR_OP_RANDOM_NORMAL_LIKE;
    int64_t ok = rand_kind(lower_value_dtype(g, y)), ik = bern ? rand_kind(lower_value_dtype(g, in)) : 0;
    if (ok < 0 || (!bern && ok > 1) || ik < 0 || ik > 1) return llvm_ops_refuse(e, "on this dtype");
    bool has;
    double seed = ir_node_attr_float(g, n, "seed", &has);
    LLVMValueRef ip[5] = {lo_i64(e, bern ? 2 : normal ? 1 : 0), lo_i64(e, (int64_t)ir_rng_seed(has, seed, (uint64_t)n)), count,
                          lo_i64(e, ik), lo_i64(e, ok)};
    double fp[2] = {ir_node_attr_float(g, n, normal ? "mean" : "low", NULL), ir_node_attr_float(g, n, normal ? "scale" : "high", NULL)};
    LLVMValueRef fv[2] = {LLVMConstReal(lo_f64_t(e), fp[0]), LLVMConstReal(lo_f64_t(e), fp[1])};
    LLVMValueRef gi = i64_array(e, ip, 5, "rand.ip"), gf = lo_const_array(e, lo_f64_t(e), fv, 2, "rand.fp");
    LLVMValueRef args[4] = {gi, gf, bern ? lo_buf(e, in) : LLVMConstPointerNull(lo_ptr_t(e)), lo_buf(e, y)};
    lo_call_runtime(e, IRT_FN_RANDOM, NULL, args, 4);
    return IR_OK;
}

IrStatus llvm_ops_misc_gen(LlvmEmit *e) {
    IrOp op = ir_node_op(e->g, e->node);
    if (op == IR_OP_ADAGRAD || op == IR_OP_ADAM || op == IR_OP_MOMENTUM) return gen_optim(e);
    if (op == IR_OP_RANDOM_UNIFORM || op == IR_OP_RANDOM_UNIFORM_LIKE || op == IR_OP_RANDOM_NORMAL ||
        op == IR_OP_RANDOM_NORMAL_LIKE || op == IR_OP_BERNOULLI)
        return gen_random(e);
    return op == IR_OP_DET ? gen_det(e) : op == IR_OP_ROI_ALIGN ? gen_roi_align(e) : gen_max_unpool(e);
}
