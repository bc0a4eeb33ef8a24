/* .npy files: a write/read round trip for every dtype, version 2.0/3.0 headers, odd whitespace,
 * big-endian data, and clear errors for every malformed file: each truncation of a valid file,
 * bad magic, Fortran order, unsupported descr, trailing bytes.
 */
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A byte-exact .npy image built by hand (independently of validate/npy.c). */
static size_t make_npy(unsigned char *buf, int major, const char *dict, const void *data, size_t nbytes) {
    size_t k = 0, hlen = strlen(dict);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    buf[7] = 0;
    k = 8;
    if (major == 1) {
        buf[k++] = (unsigned char)(hlen & 0xff);
        buf[k++] = (unsigned char)(hlen >> 8);
    } else {
        for (int i = 0; i < 4; i++) buf[k++] = (unsigned char)(hlen >> (8 * i));
    }
    memcpy(buf + k, dict, hlen);
    k += hlen;
    if (nbytes) memcpy(buf + k, data, nbytes);
    return k + nbytes;
}

static IrStatus read_mem(const void *data, size_t len, IrTensor *t, TuDiag *d) {
    return ir_npy_read_mem(data, len, "t.npy", &d->diag, t);
}

Test(npy, round_trip_every_dtype) {
    char *dir = tu_mkdtemp();
    cr_assert(dir);
    for (int dt = IR_DTYPE_NONE + 1; dt < IR_DTYPE_COUNT; dt++) {
        if (dt == IR_DTYPE_STRING) continue; /* numpy '<U' arrays: test_strings.c */
        int64_t dims[3] = {2, 3, 5};
        IrTensor t;
        cr_assert_eq(ir_tensor_alloc(&t, (IrDType)dt, 3, dims), IR_OK);
        unsigned char *p = t.data;
        for (size_t i = 0; i < ir_tensor_nbytes(&t); i++) p[i] = (unsigned char)(i * 37 + (size_t)dt);
        if (dt == IR_DTYPE_BOOL)
            for (size_t i = 0; i < ir_tensor_nbytes(&t); i++) p[i] &= 1;
        char name[64];
        snprintf(name, sizeof name, "t_%s.npy", ir_dtype_name((IrDType)dt));
        char *path = tu_path_join(dir, name);
        TuDiag d;
        tu_diag_init(&d);
        cr_assert_eq(ir_npy_write(path, &t, &d.diag), IR_OK, "%s: %s", name, tu_diag_text(&d));
        /* the header is padded to a multiple of 64 bytes and ends in a newline */
        size_t len;
        char *raw = tu_read_file(path, &len);
        cr_assert(raw);
        size_t hlen = (unsigned char)raw[8] | (size_t)(unsigned char)raw[9] << 8;
        cr_assert_eq((10 + hlen) % 64, 0);
        cr_assert_eq(raw[10 + hlen - 1], '\n');
        free(raw);
        IrTensor u;
        cr_assert_eq(ir_npy_read(path, &d.diag, &u), IR_OK, "%s: %s", name, tu_diag_text(&d));
        cr_assert_eq(u.dtype, t.dtype, "%s", name);
        cr_assert_eq(u.rank, 3);
        cr_assert_arr_eq(u.dims, dims, sizeof dims);
        cr_assert_arr_eq(u.data, t.data, ir_tensor_nbytes(&t), "%s data", name);
        ir_tensor_free(&u);
        ir_tensor_free(&t);
        tu_diag_free(&d);
        free(path);
    }
    tu_rmtree(dir);
    free(dir);
}

Test(npy, scalars_vectors_and_empty_tensors) {
    char *dir = tu_mkdtemp();
    struct {
        uint32_t rank;
        int64_t dims[2];
    } cases[] = {{0, {0, 0}}, {1, {7, 0}}, {2, {0, 4}}, {1, {0, 0}}, {2, {3, 0}}}; /* {3, 0}: a zero after a nonzero dim */
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        IrTensor t;
        cr_assert_eq(ir_tensor_alloc(&t, IR_DTYPE_F32, cases[c].rank, cases[c].dims), IR_OK);
        for (int64_t i = 0; i < ir_tensor_numel(&t); i++) ((float *)t.data)[i] = (float)i + 0.5f;
        char *path = tu_path_join(dir, "s.npy");
        TuDiag d;
        tu_diag_init(&d);
        cr_assert_eq(ir_npy_write(path, &t, &d.diag), IR_OK);
        IrTensor u;
        cr_assert_eq(ir_npy_read(path, &d.diag, &u), IR_OK, "%s", tu_diag_text(&d));
        cr_assert_eq(u.rank, t.rank);
        cr_assert_eq(ir_tensor_numel(&u), ir_tensor_numel(&t));
        if (ir_tensor_nbytes(&t)) cr_assert_arr_eq(u.data, t.data, ir_tensor_nbytes(&t));
        ir_tensor_free(&u);
        ir_tensor_free(&t);
        tu_diag_free(&d);
        free(path);
    }
    tu_rmtree(dir);
    free(dir);
}

Test(npy, versions_whitespace_and_spellings) {
    float v[6] = {1, 2, 3, 4, 5, 6};
    static const char *dicts[] = {
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n",
        "{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(2,3)}\n",
        "{ 'shape' : ( 2 ,\t3 ) ,\n 'fortran_order' : False , 'descr' : '<f4' }      \n",
        "{'descr': '=f4', 'fortran_order': False, 'shape': (2L, 3L), }\n",
    };
    for (int major = 1; major <= 3; major++)
        for (size_t i = 0; i < sizeof dicts / sizeof dicts[0]; i++) {
            unsigned char buf[512];
            size_t len = make_npy(buf, major, dicts[i], v, sizeof v);
            IrTensor t;
            TuDiag d;
            tu_diag_init(&d);
            cr_assert_eq(read_mem(buf, len, &t, &d), IR_OK, "v%d dict %zu: %s", major, i, tu_diag_text(&d));
            cr_assert_eq(t.rank, 2);
            cr_assert_eq(t.dims[0], 2);
            cr_assert_eq(t.dims[1], 3);
            cr_assert_arr_eq(t.data, v, sizeof v);
            ir_tensor_free(&t);
            tu_diag_free(&d);
        }
}

Test(npy, big_endian_is_byte_swapped) {
    unsigned char be[8] = {0x3f, 0x80, 0, 0, 0xc0, 0x00, 0, 0}; /* 1.0f, -2.0f */
    unsigned char buf[256];
    size_t len = make_npy(buf, 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }\n", be, sizeof be);
    IrTensor t;
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(read_mem(buf, len, &t, &d), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(((float *)t.data)[0], 1.0f);
    cr_assert_eq(((float *)t.data)[1], -2.0f);
    ir_tensor_free(&t);
    tu_diag_free(&d);
}

static void expect_error(const void *buf, size_t len, const char *needle) {
    IrTensor t;
    TuDiag d;
    tu_diag_init(&d);
    IrStatus s = read_mem(buf, len, &t, &d);
    cr_assert_neq(s, IR_OK, "expected an error mentioning '%s'", needle);
    cr_assert_null(t.data);
    cr_assert(strstr(tu_diag_text(&d), needle), "'%s' not in: %s", needle, tu_diag_text(&d));
    cr_assert(strstr(tu_diag_text(&d), "t.npy"), "the file is named: %s", tu_diag_text(&d));
    tu_diag_free(&d);
}

Test(npy, every_truncation_is_a_clear_error) {
    int32_t v[5] = {1, -2, 3, -4, 5};
    unsigned char buf[256];
    size_t len = make_npy(buf, 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }          \n", v, sizeof v);
    for (size_t n = 0; n < len; n++) {
        IrTensor t;
        TuDiag d;
        tu_diag_init(&d);
        /* a fresh heap copy of exactly n bytes, so reading past it is caught by sanitizers */
        unsigned char *cut = malloc(n ? n : 1);
        memcpy(cut, buf, n);
        IrStatus s = read_mem(cut, n, &t, &d);
        cr_assert_neq(s, IR_OK, "truncated to %zu of %zu bytes", n, len);
        cr_assert_gt(d.diag.n_errors, 0);
        const char *msg = tu_diag_text(&d);
        cr_assert(strstr(msg, "truncated") || strstr(msg, "bad magic") || strstr(msg, "bad .npy header"),
                  "at %zu: %s", n, msg);
        free(cut);
        tu_diag_free(&d);
    }
}

Test(npy, malformed_headers) {
    float v[4] = {0};
    unsigned char buf[512];
    size_t len;
    memcpy(buf, "\x93NUMPX\x01\x00", 8);
    expect_error(buf, 20, "bad magic");
    len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }\n", v, sizeof v);
    expect_error(buf, len, "Fortran");
    len = make_npy(buf, 1, "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }\n", v, 16);
    expect_error(buf, len, "unsupported .npy dtype '<c8'");
    len = make_npy(buf, 1, "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }\n", v, 16);
    expect_error(buf, len, "object arrays (dtype=object) hold Python objects");
    len = make_npy(buf, 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }\n", v, 8);
    expect_error(buf, len, "structured");
    len = make_npy(buf, 4, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", v, 8);
    expect_error(buf, len, "version 4.0");
    len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", v, 12);
    expect_error(buf, len, "unexpected bytes");
    len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\n", v, 8);
    expect_error(buf, len, "truncated .npy data");
    len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }\n", v, 8);
    expect_error(buf, len, "bad .npy header");
    len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }\n", v, 8);
    expect_error(buf, len, "truncated .npy data");
    len = make_npy(buf, 1, "{'descr': '<f4', 'shape': (2,), }\n", v, 8);
    expect_error(buf, len, "fortran_order");
    len = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False }\n", v, 8);
    expect_error(buf, len, "shape");
    len = make_npy(buf, 1, "['descr', '<f4']\n", v, 8);
    expect_error(buf, len, "not a dict");
    len = make_npy(buf, 1,
                   "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1), }\n", v, 4);
    expect_error(buf, len, "16 dimensions");
}

Test(npy, missing_file_and_unwritable_dtype) {
    IrTensor t;
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_neq(ir_npy_read("/nonexistent/dir/x.npy", &d.diag, &t), IR_OK);
    cr_assert(strstr(tu_diag_text(&d), "/nonexistent/dir/x.npy"));
    tu_diag_free(&d);
}

/* ---- ONNX TensorProto (.pb) ------------------------------------------------------------------ */

#include "onnx.pb-c.h"

/* Serializes tp to dir/name and returns the path (malloc'd). */
static char *write_pb(const char *dir, const char *name, const Onnx__TensorProto *tp) {
    size_t n = onnx__tensor_proto__get_packed_size(tp);
    uint8_t *buf = malloc(n ? n : 1);
    onnx__tensor_proto__pack(tp, buf);
    char *path = tu_path_join(dir, name);
    cr_assert(tu_write_file(path, buf, n));
    free(buf);
    return path;
}

static IrStatus read_pb(const char *path, IrTensor *t, TuDiag *d, char **name) {
    return ir_pb_tensor_read(path, &d->diag, t, name);
}

Test(pb, typed_fields_and_raw_data) {
    char *dir = tu_mkdtemp();
    int64_t dims[2] = {2, 2};
    TuDiag d;
    tu_diag_init(&d);
    IrTensor t;
    char *name;

    /* float_data */
    float fv[4] = {1.5f, -2, 0, 3.25f};
    Onnx__TensorProto tp;
    onnx__tensor_proto__init(&tp);
    tp.n_dims = 2, tp.dims = dims, tp.has_data_type = 1, tp.data_type = 1, tp.n_float_data = 4, tp.float_data = fv;
    tp.name = "x";
    char *p = write_pb(dir, "f.pb", &tp);
    cr_assert_eq(read_pb(p, &t, &d, &name), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(t.dtype, IR_DTYPE_F32);
    cr_assert_arr_eq(t.data, fv, sizeof fv);
    cr_assert_str_eq(name, "x");
    free(name), free(p), ir_tensor_free(&t);

    /* f16 bit patterns travel in int32_data */
    int32_t hv[4] = {0x3c00, 0xc000, 0x0000, 0x7bff};
    onnx__tensor_proto__init(&tp);
    tp.n_dims = 2, tp.dims = dims, tp.has_data_type = 1, tp.data_type = 10, tp.n_int32_data = 4, tp.int32_data = hv;
    p = write_pb(dir, "h.pb", &tp);
    cr_assert_eq(read_pb(p, &t, &d, NULL), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(t.dtype, IR_DTYPE_F16);
    cr_assert_eq(((uint16_t *)t.data)[1], 0xc000);
    cr_assert_eq(ir_elem_get_f64(t.dtype, t.data, 0), 1.0);
    free(p), ir_tensor_free(&t);

    /* int8 values and bools in int32_data */
    int32_t iv[4] = {-128, 127, -1, 5};
    tp.data_type = 3;
    tp.int32_data = iv;
    p = write_pb(dir, "i8.pb", &tp);
    cr_assert_eq(read_pb(p, &t, &d, NULL), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(((int8_t *)t.data)[0], -128);
    cr_assert_eq(((int8_t *)t.data)[2], -1);
    free(p), ir_tensor_free(&t);

    /* int64_data, uint64_data for u32 */
    int64_t lv[4] = {INT64_MIN, -1, 0, INT64_MAX};
    onnx__tensor_proto__init(&tp);
    tp.n_dims = 2, tp.dims = dims, tp.has_data_type = 1, tp.data_type = 7, tp.n_int64_data = 4, tp.int64_data = lv;
    p = write_pb(dir, "l.pb", &tp);
    cr_assert_eq(read_pb(p, &t, &d, NULL), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_arr_eq(t.data, lv, sizeof lv);
    free(p), ir_tensor_free(&t);
    uint64_t uv[4] = {0, 1, 4000000000u, 7};
    onnx__tensor_proto__init(&tp);
    tp.n_dims = 2, tp.dims = dims, tp.has_data_type = 1, tp.data_type = 12, tp.n_uint64_data = 4, tp.uint64_data = uv;
    p = write_pb(dir, "u.pb", &tp);
    cr_assert_eq(read_pb(p, &t, &d, NULL), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(t.dtype, IR_DTYPE_U32);
    cr_assert_eq(((uint32_t *)t.data)[2], 4000000000u);
    free(p), ir_tensor_free(&t);

    /* raw_data, and a scalar */
    double dv = -0.125;
    onnx__tensor_proto__init(&tp);
    tp.has_data_type = 1, tp.data_type = 11, tp.has_raw_data = 1;
    tp.raw_data.data = (uint8_t *)&dv, tp.raw_data.len = sizeof dv;
    p = write_pb(dir, "d.pb", &tp);
    cr_assert_eq(read_pb(p, &t, &d, NULL), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(t.rank, 0);
    cr_assert_eq(*(double *)t.data, -0.125);
    free(p), ir_tensor_free(&t);
    tu_diag_free(&d);
    tu_rmtree(dir);
    free(dir);
}

static void expect_pb_error(const char *dir, const Onnx__TensorProto *tp, const char *needle) {
    char *p = write_pb(dir, "bad.pb", tp);
    TuDiag d;
    tu_diag_init(&d);
    IrTensor t;
    cr_assert_neq(read_pb(p, &t, &d, NULL), IR_OK, "expected an error mentioning '%s'", needle);
    cr_assert(strstr(tu_diag_text(&d), needle), "'%s' not in: %s", needle, tu_diag_text(&d));
    cr_assert(strstr(tu_diag_text(&d), "bad.pb"), "%s", tu_diag_text(&d));
    cr_assert_null(t.data);
    tu_diag_free(&d);
    free(p);
}

Test(pb, clear_errors) {
    char *dir = tu_mkdtemp();
    int64_t dims[2] = {2, 3};
    float fv[4] = {0};
    Onnx__TensorProto tp;
    onnx__tensor_proto__init(&tp);
    tp.n_dims = 2, tp.dims = dims, tp.has_data_type = 1, tp.data_type = 1, tp.n_float_data = 4, tp.float_data = fv;
    expect_pb_error(dir, &tp, "4 values in float_data, its shape needs 6");
    tp.n_float_data = 0;
    tp.has_raw_data = 1, tp.raw_data.data = (uint8_t *)fv, tp.raw_data.len = 16;
    expect_pb_error(dir, &tp, "raw_data has 16 bytes");
    ProtobufCBinaryData s = {1, (uint8_t *)"a"};
    onnx__tensor_proto__init(&tp);
    tp.has_data_type = 1, tp.data_type = 8, tp.n_string_data = 1, tp.string_data = &s;
    tp.n_dims = 1, tp.dims = dims; /* 2 strings needed, 1 given */
    expect_pb_error(dir, &tp, "1 values in string_data, its shape needs 2");
    tp.data_type = 14;
    expect_pb_error(dir, &tp, "complex");
    int64_t neg = -1;
    onnx__tensor_proto__init(&tp);
    tp.n_dims = 1, tp.dims = &neg, tp.has_data_type = 1, tp.data_type = 1;
    expect_pb_error(dir, &tp, "negative");
    char *p = tu_path_join(dir, "junk.pb");
    cr_assert(tu_write_file(p, "\xff\xff\xff\xff\xff", 5));
    TuDiag d;
    tu_diag_init(&d);
    IrTensor t;
    cr_assert_neq(read_pb(p, &t, &d, NULL), IR_OK);
    cr_assert(strstr(tu_diag_text(&d), "not a valid ONNX TensorProto"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    free(p);
    tu_rmtree(dir);
    free(dir);
}
