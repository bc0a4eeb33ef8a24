/* ir/shape.h, the one copy of concrete shape arithmetic: element counts (zero-size dims, rank 0,
 * int64 overflow), row-major strides, axis normalisation with negative and out-of-range axes,
 * numpy broadcasting of N shapes with the operands and axes named when it fails, broadcast
 * strides and offsets against numpy's own results written out by hand, and index walking.
 */
#include "ir/shape.h"

#include <criterion/criterion.h>
#include <string.h>

#define N(a) ((uint32_t)(sizeof(a) / sizeof((a)[0])))

static void assert_dims(uint32_t rank, const int64_t *got, uint32_t want_rank, const int64_t *want) {
    cr_assert_eq(rank, want_rank, "rank %u, expected %u", rank, want_rank);
    for (uint32_t i = 0; i < rank; i++) cr_assert_eq(got[i], want[i], "dim %u: %lld, expected %lld", i, (long long)got[i], (long long)want[i]);
}

/* ---- counts and strides ------------------------------------------------------------------- */

Test(shape_numel, products_rank0_and_zero_dims) {
    const int64_t d[] = {2, 3, 4}, z[] = {5, 0, 7};
    cr_assert_eq(ir_shape_numel(3, d), 24);
    cr_assert_eq(ir_shape_numel(0, NULL), 1, "a scalar has one element");
    cr_assert_eq(ir_shape_numel(3, z), 0);
    cr_assert_eq(ir_shape_numel(1, d + 2), 4);
    int64_t n = -1;
    cr_assert(ir_shape_numel_checked(3, d, &n));
    cr_assert_eq(n, 24);
    cr_assert(ir_shape_numel_checked(0, NULL, &n));
    cr_assert_eq(n, 1);
    cr_assert(ir_shape_numel_checked(3, z, &n));
    cr_assert_eq(n, 0);
}

Test(shape_numel, checked_rejects_negative_dims_and_overflow) {
    int64_t n = 42;
    const int64_t neg[] = {2, -1, 3};
    cr_assert_not(ir_shape_numel_checked(3, neg, &n));
    const int64_t big[] = {INT64_C(1) << 32, INT64_C(1) << 31}; /* 2^63: one past INT64_MAX */
    cr_assert_not(ir_shape_numel_checked(2, big, &n));
    const int64_t edge[] = {INT64_C(1) << 31, (INT64_C(1) << 32) - 1, 1, 1}; /* just fits */
    cr_assert(ir_shape_numel_checked(4, edge, &n));
    cr_assert_eq(n, INT64_MAX - ((INT64_C(1) << 31) - 1));
    const int64_t max[] = {INT64_MAX};
    cr_assert(ir_shape_numel_checked(1, max, &n));
    cr_assert_eq(n, INT64_MAX);
    /* a zero dim does not excuse the other dims overflowing together: their strides would */
    const int64_t zbig[] = {0, INT64_C(1) << 40, INT64_C(1) << 40};
    cr_assert_not(ir_shape_numel_checked(3, zbig, &n));
    const int64_t zfit[] = {INT64_C(1) << 40, 0, INT64_C(1) << 20};
    cr_assert(ir_shape_numel_checked(3, zfit, &n));
    cr_assert_eq(n, 0);
}

Test(shape_strides, row_major_rank0_and_zero_dims) {
    const int64_t d[] = {2, 3, 4}, want[] = {12, 4, 1};
    int64_t s[3];
    ir_shape_strides(3, d, s);
    assert_dims(3, s, 3, want);
    const int64_t z[] = {3, 0, 2}, wz[] = {0, 2, 1};
    ir_shape_strides(3, z, s);
    assert_dims(3, s, 3, wz);
    s[0] = 99;
    ir_shape_strides(0, NULL, s);
    cr_assert_eq(s[0], 99, "rank 0 writes nothing");
}

Test(shape_split, outer_len_inner_around_each_axis) {
    const int64_t d[] = {2, 3, 4, 5};
    int64_t o, l, in;
    ir_shape_split(4, d, 0, &o, &l, &in);
    cr_assert(o == 1 && l == 2 && in == 60);
    ir_shape_split(4, d, 2, &o, &l, &in);
    cr_assert(o == 6 && l == 4 && in == 5);
    ir_shape_split(4, d, 3, &o, &l, &in);
    cr_assert(o == 24 && l == 5 && in == 1);
    const int64_t z[] = {0, 7};
    ir_shape_split(2, z, 1, &o, &l, &in);
    cr_assert(o == 0 && l == 7 && in == 1);
    ir_shape_split(4, d, 1, &o, NULL, &in);
    cr_assert(o == 2 && in == 20, "len may be NULL");
}

/* ---- axes --------------------------------------------------------------------------------- */

Test(shape_axis, negative_axes_count_from_the_end) {
    cr_assert_eq(ir_shape_axis(-1, 4), 3);
    cr_assert_eq(ir_shape_axis(-4, 4), 0);
    cr_assert_eq(ir_shape_axis(2, 4), 2);
    for (int64_t a = -3; a < 3; a++) {
        int64_t x = a;
        cr_assert(ir_shape_axis_checked(&x, 3), "axis %lld", (long long)a);
        cr_assert_eq(x, a < 0 ? a + 3 : a);
    }
}

Test(shape_axis, checked_reports_out_of_range) {
    const int64_t bad[] = {3, 4, -4, -100, INT64_MIN + 1, INT64_MAX};
    for (uint32_t i = 0; i < N(bad); i++) {
        int64_t x = bad[i];
        cr_assert_not(ir_shape_axis_checked(&x, 3), "axis %lld must be out of range for rank 3", (long long)bad[i]);
    }
    int64_t x = 0;
    cr_assert_not(ir_shape_axis_checked(&x, 0), "a scalar has no axis");
    x = -1;
    cr_assert_not(ir_shape_axis_checked(&x, 0));
    x = -3; /* Unsqueeze of a rank-2 tensor by one axis: checked against the result rank */
    cr_assert(ir_shape_axis_checked(&x, 3));
    cr_assert_eq(x, 0);
}

/* ---- indices ------------------------------------------------------------------------------ */

Test(shape_index, unravel_and_next_agree_with_row_major_order) {
    const int64_t d[] = {2, 3, 4};
    int64_t walk[3] = {0}, idx[3], st[3];
    ir_shape_strides(3, d, st);
    for (int64_t f = 0; f < 24; f++) {
        ir_shape_unravel(f, 3, d, idx);
        cr_assert(memcmp(idx, walk, sizeof idx) == 0, "flat %lld", (long long)f);
        cr_assert_eq(idx[0] * st[0] + idx[1] * st[1] + idx[2] * st[2], f);
        bool more = ir_shape_index_next(3, d, walk);
        cr_assert_eq(more, f < 23, "the walk ends after the last element");
    }
    const int64_t zeros[3] = {0};
    cr_assert(memcmp(walk, zeros, sizeof walk) == 0, "wrapped back to zeros");
    cr_assert_not(ir_shape_index_next(0, NULL, NULL), "a scalar has one index");
}

Test(shape_index, unravel_with_a_zero_dim_does_not_divide_by_zero) {
    const int64_t d[] = {0, 3};
    int64_t idx[2];
    ir_shape_unravel(2, 2, d, idx);
    cr_assert(idx[0] == 0 && idx[1] == 2);
}

/* ---- broadcasting ------------------------------------------------------------------------- */

Test(shape_broadcast, dims_pairwise) {
    int64_t o;
    cr_assert(ir_shape_broadcast_dim(3, 3, &o) && o == 3);
    cr_assert(ir_shape_broadcast_dim(1, 5, &o) && o == 5);
    cr_assert(ir_shape_broadcast_dim(5, 1, &o) && o == 5);
    cr_assert(ir_shape_broadcast_dim(1, 0, &o) && o == 0, "1 gives way to 0 as numpy does");
    cr_assert(ir_shape_broadcast_dim(0, 1, &o) && o == 0);
    cr_assert(ir_shape_broadcast_dim(0, 0, &o) && o == 0);
    cr_assert_not(ir_shape_broadcast_dim(0, 3, &o));
    cr_assert_not(ir_shape_broadcast_dim(2, 3, &o));
}

Test(shape_broadcast, n_shapes_right_aligned) {
    /* np.broadcast_shapes((8, 1, 6, 1), (7, 1, 5), (5,), ()) == (8, 7, 6, 5) */
    const int64_t a[] = {8, 1, 6, 1}, b[] = {7, 1, 5}, c[] = {5};
    const uint32_t ranks[] = {4, 3, 1, 0};
    const int64_t *const dims[] = {a, b, c, NULL};
    int64_t out[4];
    uint32_t r = 99;
    cr_assert(ir_shape_broadcast(4, ranks, dims, &r, out, NULL));
    const int64_t want[] = {8, 7, 6, 5};
    assert_dims(r, out, 4, want);
}

Test(shape_broadcast, rank0_zero_size_and_no_operands) {
    int64_t out[3];
    uint32_t r = 99;
    cr_assert(ir_shape_broadcast2(0, NULL, 0, NULL, &r, out, NULL));
    cr_assert_eq(r, 0, "scalars broadcast to a scalar");
    cr_assert(ir_shape_broadcast(0, NULL, NULL, &r, out, NULL));
    cr_assert_eq(r, 0);
    const int64_t z[] = {2, 0, 1}, one[] = {1, 4};
    cr_assert(ir_shape_broadcast2(3, z, 2, one, &r, out, NULL));
    const int64_t want[] = {2, 0, 4};
    assert_dims(r, out, 3, want);
    const int64_t three[] = {3};
    IrShapeBroadcastError e;
    cr_assert_not(ir_shape_broadcast2(3, z, 2, (const int64_t[]){3, 1}, &r, out, &e), "0 against 3");
    cr_assert(e.operand == 1 && e.axis == 0 && e.dim == 3 && e.other == 0 && e.other_axis == 1 && e.other_dim == 0);
    cr_assert(ir_shape_broadcast2(1, three, 0, NULL, &r, out, NULL));
    assert_dims(r, out, 1, three);
}

Test(shape_broadcast, error_names_both_operands_and_axes) {
    /* operand 2 (rank 1) clashes on its axis 0 with operand 1's axis 2 (operand 0 has a 1 there) */
    const int64_t a[] = {2, 1}, b[] = {4, 2, 3}, c[] = {5};
    const uint32_t ranks[] = {2, 3, 1};
    const int64_t *const dims[] = {a, b, c};
    int64_t out[3];
    uint32_t r = 77;
    IrShapeBroadcastError e;
    memset(&e, 0xff, sizeof e);
    cr_assert_not(ir_shape_broadcast(3, ranks, dims, &r, out, &e));
    cr_assert_eq(r, 77, "out_rank untouched on failure");
    cr_assert_eq(e.operand, 2);
    cr_assert_eq(e.axis, 0);
    cr_assert_eq(e.dim, 5);
    cr_assert_eq(e.other, 1);
    cr_assert_eq(e.other_axis, 2);
    cr_assert_eq(e.other_dim, 3);
    cr_assert_eq(e.out_axis, 2);
    char msg[128];
    ir_shape_broadcast_message(&e, msg, sizeof msg);
    cr_assert_str_eq(msg, "operand 2 axis 0 has size 5 where operand 1 axis 2 has size 3");
    /* the first operand that set the axis is named, past a shorter one that lacks it */
    const int64_t p[] = {3}, q[] = {4, 1}, s[] = {2, 1};
    const uint32_t r2[] = {1, 2, 2};
    const int64_t *const d2[] = {p, q, s};
    cr_assert_not(ir_shape_broadcast(3, r2, d2, &r, out, &e));
    cr_assert(e.operand == 2 && e.axis == 0 && e.dim == 2 && e.other == 1 && e.other_axis == 0 && e.other_dim == 4 &&
              e.out_axis == 0);
    cr_assert_not(ir_shape_broadcast(3, r2, d2, &r, out, NULL), "err may be NULL");
}

Test(shape_broadcast, strides_against_an_output) {
    /* np.broadcast_to(np.empty((3, 1), dtype=np.int8), (2, 3, 4)).strides == (0, 1, 0) */
    const int64_t x[] = {3, 1}, od[] = {2, 3, 4};
    int64_t st[3];
    cr_assert(ir_shape_broadcast_strides(2, x, 3, od, st));
    const int64_t want[] = {0, 1, 0};
    assert_dims(3, st, 3, want);
    const int64_t full[] = {2, 3, 4}, wf[] = {12, 4, 1};
    cr_assert(ir_shape_broadcast_strides(3, full, 3, od, st));
    assert_dims(3, st, 3, wf);
    const int64_t row[] = {4}, wr[] = {0, 0, 1};
    cr_assert(ir_shape_broadcast_strides(1, row, 3, NULL, st), "no check without out_dims");
    assert_dims(3, st, 3, wr);
    cr_assert(ir_shape_broadcast_strides(0, NULL, 3, od, st));
    const int64_t w0[] = {0, 0, 0};
    assert_dims(3, st, 3, w0);
    /* leading 1s beyond the output rank are allowed; other sizes are not */
    const int64_t lead1[] = {1, 1, 4}, lead2[] = {2, 3, 4}, bad[] = {5, 4};
    cr_assert(ir_shape_broadcast_strides(3, lead1, 1, row, st));
    cr_assert_eq(st[0], 1);
    cr_assert_not(ir_shape_broadcast_strides(3, lead2, 1, row, st));
    cr_assert_not(ir_shape_broadcast_strides(2, bad, 3, od, st));
    const int64_t zo[] = {2, 0}, zx[] = {1, 0}, wz[] = {0, 1};
    cr_assert(ir_shape_broadcast_strides(2, zx, 2, zo, st), "zero-size dims broadcast");
    assert_dims(2, st, 2, wz);
}

Test(shape_broadcast, offsets_match_strides_over_every_index) {
    const int64_t x[] = {3, 1}, od[] = {2, 3, 4};
    int64_t st[3], idx[3] = {0};
    cr_assert(ir_shape_broadcast_strides(2, x, 3, od, st));
    do {
        int64_t want = idx[0] * st[0] + idx[1] * st[1] + idx[2] * st[2];
        cr_assert_eq(ir_shape_broadcast_offset(2, x, 3, idx), want);
        cr_assert_eq(want, idx[1], "x[i, 0] for output index (_, i, _)");
    } while (ir_shape_index_next(3, od, idx));
    cr_assert_eq(ir_shape_broadcast_offset(0, NULL, 3, idx), 0, "a scalar is always element 0");
}
