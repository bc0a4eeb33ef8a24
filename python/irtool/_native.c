/* irtool._native: the Python binding of libirtool-runtime (runtime.h), a C extension because a
 * ctypes call on a small model cost 40-70 us more than irt_run itself. Inputs are passed as
 * pointers into the caller's numpy arrays (contiguous ones are never copied); each output is
 * the runtime's own buffer under a numpy array whose base (a capsule) frees it. irt_run runs
 * without the GIL, so calls from several threads overlap.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include "backend/runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    PyObject *error;     /* irtool.IrtoolError */
    PyObject *converter; /* Python function: any array-like -> contiguous ndarray */
} ModState;

typedef struct {
    PyObject_HEAD
    IrtArtifact *a;
    uint32_t n_in, n_out;
    PyObject *in_names, *out_names; /* tuples of str */
    int32_t codes[NPY_NTYPES];      /* numpy type number -> the artifact's dtype code (-2: not asked) */
    int out_type[64];               /* dtype code -> numpy type number (-1: none), for codes < 64 */
    ModState *st;
} Artifact;

/* The runtime's dtype name of each numpy type number this binding passes through. */
static const char *dtype_name_of(int npy) {
    switch (npy) {
    case NPY_FLOAT64: return "f64";
    case NPY_FLOAT32: return "f32";
    case NPY_FLOAT16: return "f16";
    case NPY_INT64: return "i64";
    case NPY_INT32: return "i32";
    case NPY_INT16: return "i16";
    case NPY_INT8: return "i8";
    case NPY_UINT64: return "u64";
    case NPY_UINT32: return "u32";
    case NPY_UINT16: return "u16";
    case NPY_UINT8: return "u8";
    case NPY_BOOL: return "bool";
    default: return NULL;
    }
}

/* numpy's type for a runtime dtype name; bf16 and FP8 come back as their bits (uint16, uint8). */
static int npy_of_name(const char *n) {
    static const struct {
        const char *name;
        int npy;
    } map[] = {{"f64", NPY_FLOAT64}, {"f32", NPY_FLOAT32}, {"f16", NPY_FLOAT16}, {"i64", NPY_INT64},
               {"i32", NPY_INT32},   {"i16", NPY_INT16},   {"i8", NPY_INT8},     {"u64", NPY_UINT64},
               {"u32", NPY_UINT32},  {"u16", NPY_UINT16},  {"u8", NPY_UINT8},    {"bool", NPY_BOOL},
               {"bf16", NPY_UINT16}, {"f8e4m3fn", NPY_UINT8}, {"f8e5m2", NPY_UINT8}};
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (!strcmp(map[i].name, n)) return map[i].npy;
    return -1;
}

static ModState *mod_state(PyObject *m) { return (ModState *)PyModule_GetState(m); }

static void artifact_dealloc(Artifact *self) {
    irt_free(self->a);
    Py_XDECREF(self->in_names);
    Py_XDECREF(self->out_names);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *names_tuple(IrtArtifact *a, uint32_t n, const char *(*name)(const IrtArtifact *, uint32_t)) {
    PyObject *t = PyTuple_New(n);
    for (uint32_t i = 0; t && i < n; i++) {
        PyObject *s = PyUnicode_FromString(name(a, i));
        if (!s) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

/* info(is_input, i) -> (dtype name, (dim or symbol name or None, ...)) */
static PyObject *artifact_info(Artifact *self, PyObject *args) {
    int is_input;
    unsigned i;
    if (!PyArg_ParseTuple(args, "pI", &is_input, &i)) return NULL;
    if (i >= (is_input ? self->n_in : self->n_out)) return PyErr_Format(PyExc_IndexError, "no %s %u", is_input ? "input" : "output", i);
    IrtTensor t;
    (is_input ? irt_input_info : irt_output_info)(self->a, i, &t);
    PyObject *shape = PyTuple_New(t.rank);
    for (uint32_t k = 0; shape && k < t.rank; k++) {
        const char *sym = (is_input ? irt_input_dim_symbol : irt_output_dim_symbol)(self->a, i, k);
        PyObject *d;
        if (sym) d = PyUnicode_FromString(sym);
        else if (t.dims[k] < 0) d = Py_NewRef(Py_None);
        else d = PyLong_FromLongLong(t.dims[k]);
        if (!d) {
            Py_DECREF(shape);
            return NULL;
        }
        PyTuple_SET_ITEM(shape, k, d);
    }
    if (!shape) return NULL;
    return Py_BuildValue("(sN)", irt_dtype_name(self->a, t.dtype), shape);
}

static PyObject *raise_runtime(Artifact *self, const char *msg) {
    PyErr_SetString(self->st->error, msg);
    return NULL;
}

/* The input index of key (a str) or -1 with the runtime's "unknown input" error raised. */
static int input_index(Artifact *self, PyObject *key) {
    if (!PyUnicode_Check(key)) {
        PyErr_Format(PyExc_TypeError, "input names are str, not %s", Py_TYPE(key)->tp_name);
        return -1;
    }
    for (uint32_t i = 0; i < self->n_in; i++) {
        PyObject *n = PyTuple_GET_ITEM(self->in_names, i);
        if (n == key) return (int)i;
        int eq = PyUnicode_Compare(n, key);
        if (eq == 0) return (int)i;
    }
    const char *name = PyUnicode_AsUTF8(key);
    if (!name) return -1;
    char err[1024];
    (void)irt_input_find(self->a, name, err, sizeof err);
    raise_runtime(self, err);
    return -1;
}

/* x as a C-contiguous ndarray (a new reference): numpy arrays as they are, anything else through
 * the module's converter (irtool._runtime._as_input), which may instead return (owner, data
 * pointer, shape, dtype name) for memory numpy would be slow to wrap (PyTorch tensors). */
static PyObject *as_array(Artifact *self, PyObject *x) {
    if (PyArray_CheckExact(x) && PyArray_IS_C_CONTIGUOUS((PyArrayObject *)x)) return Py_NewRef(x);
    if (!self->st->converter) return PyErr_Format(PyExc_TypeError, "no array converter set");
    return PyObject_CallOneArg(self->st->converter, x);
}

/* Fills t from the converter's (owner, pointer, shape, dtype name); 0, or -1 with an exception set. */
static int fill_described(Artifact *self, uint32_t i, PyObject *desc, IrtTensor *t) {
    PyObject *shape = PySequence_Fast(PyTuple_GET_ITEM(desc, 2), "shape is a sequence");
    const char *dt = shape ? PyUnicode_AsUTF8(PyTuple_GET_ITEM(desc, 3)) : NULL;
    void *data = dt ? PyLong_AsVoidPtr(PyTuple_GET_ITEM(desc, 1)) : NULL;
    Py_ssize_t nd = shape ? PySequence_Fast_GET_SIZE(shape) : 0;
    int rc = PyErr_Occurred() ? -1 : 0;
    if (!rc && nd > IRT_MAX_RANK) {
        PyErr_Format(self->st->error, "input '%U' has rank %zd, more than %d", PyTuple_GET_ITEM(self->in_names, i), nd,
                     IRT_MAX_RANK);
        rc = -1;
    }
    t->dtype = rc ? 0 : irt_dtype_code(self->a, dt);
    t->rank = (uint32_t)nd;
    for (Py_ssize_t k = 0; !rc && k < nd; k++) {
        t->dims[k] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(shape, k));
        if (t->dims[k] == -1 && PyErr_Occurred()) rc = -1;
    }
    t->data = data;
    Py_XDECREF(shape);
    return rc;
}

/* Fills t from array x (or the converter's description of it) for input i; 0, or -1 with an
 * exception set. */
static int fill_input(Artifact *self, uint32_t i, PyArrayObject *x, IrtTensor *t) {
    if (PyTuple_CheckExact((PyObject *)x) && PyTuple_GET_SIZE((PyObject *)x) == 4)
        return fill_described(self, i, (PyObject *)x, t);
    if (!PyArray_Check((PyObject *)x)) {
        PyErr_Format(PyExc_TypeError, "input '%U': the converter returned %s", PyTuple_GET_ITEM(self->in_names, i),
                     Py_TYPE(x)->tp_name);
        return -1;
    }
    int tn = PyArray_TYPE(x);
    if (tn < 0 || tn >= NPY_NTYPES) tn = NPY_OBJECT;
    if (self->codes[tn] == -2) {
        const char *n = dtype_name_of(tn);
        self->codes[tn] = n ? irt_dtype_code(self->a, n) : -1;
    }
    if (self->codes[tn] < 0) {
        PyErr_Format(self->st->error, "input '%U' has numpy dtype %S, which irtool has no dtype for",
                     PyTuple_GET_ITEM(self->in_names, i), (PyObject *)PyArray_DESCR(x));
        return -1;
    }
    int nd = PyArray_NDIM(x);
    if (nd > IRT_MAX_RANK) {
        PyErr_Format(self->st->error, "input '%U' has rank %d, more than %d", PyTuple_GET_ITEM(self->in_names, i), nd,
                     IRT_MAX_RANK);
        return -1;
    }
    t->dtype = self->codes[tn];
    t->rank = (uint32_t)nd;
    for (int k = 0; k < nd; k++) t->dims[k] = PyArray_DIM(x, k);
    t->data = PyArray_SIZE(x) ? PyArray_DATA(x) : NULL;
    return 0;
}

static void free_capsule(PyObject *cap) { free(PyCapsule_GetPointer(cap, "irtool.buffer")); }

/* Output t as a numpy array owning the runtime's buffer (strings: an object array of bytes). */
static PyObject *wrap_output(Artifact *self, IrtTensor *t) {
    npy_intp dims[IRT_MAX_RANK];
    for (uint32_t k = 0; k < t->rank; k++) dims[k] = (npy_intp)t->dims[k];
    int type = t->dtype >= 0 && t->dtype < 64 ? self->out_type[t->dtype] : -2;
    if (type == -2) type = npy_of_name(irt_dtype_name(self->a, t->dtype));
    if (type < 0 && !strcmp(irt_dtype_name(self->a, t->dtype), "string")) {
        PyArrayObject *o = (PyArrayObject *)PyArray_SimpleNew((int)t->rank, dims, NPY_OBJECT);
        npy_intp n = o ? PyArray_SIZE(o) : 0;
        const IrtString *el = t->data;
        for (npy_intp e = 0; o && e < n; e++) {
            PyObject *b = PyBytes_FromStringAndSize(el[e].len ? el[e].data : "", (Py_ssize_t)el[e].len);
            if (!b || PyArray_SETITEM(o, PyArray_GETPTR1(o, e), b) < 0) Py_CLEAR(o);
            Py_XDECREF(b);
        }
        irt_tensor_free(t);
        return (PyObject *)o;
    }
    if (type < 0) {
        irt_tensor_free(t);
        return PyErr_Format(self->st->error, "output dtype %s has no numpy equivalent", irt_dtype_name(self->a, t->dtype));
    }
    PyObject *cap = PyCapsule_New(t->data, "irtool.buffer", free_capsule);
    if (!cap) {
        irt_tensor_free(t);
        return NULL;
    }
    t->data = NULL; /* the capsule owns it now */
    PyObject *arr = PyArray_SimpleNewFromData((int)t->rank, dims, type, PyCapsule_GetPointer(cap, "irtool.buffer"));
    if (!arr || PyArray_SetBaseObject((PyArrayObject *)arr, cap) < 0) {
        Py_XDECREF(arr);
        Py_DECREF(cap);
        return NULL;
    }
    return arr;
}

/* run(inputs) -> dict: inputs a dict {name: array} or a sequence in input order. */
static PyObject *artifact_run(Artifact *self, PyObject *inputs) {
    IrtTensor in_stack[8], out_stack[8];
    PyObject *keep_stack[8] = {0};
    uint32_t n_in = self->n_in, n_out = self->n_out;
    IrtTensor *in = n_in <= 8 ? in_stack : calloc(n_in, sizeof *in);
    IrtTensor *out = n_out <= 8 ? out_stack : calloc(n_out, sizeof *out);
    PyObject **keep = n_in <= 8 ? keep_stack : calloc(n_in, sizeof *keep);
    PyObject *result = NULL;
    if (!in || !out || !keep) {
        PyErr_NoMemory();
        goto done;
    }
    if (PyDict_Check(inputs)) {
        PyObject *key, *val;
        Py_ssize_t pos = 0;
        while (PyDict_Next(inputs, &pos, &key, &val)) {
            int i = input_index(self, key);
            if (i < 0) goto done;
            if (keep[i]) {
                PyErr_Format(self->st->error, "input '%U' is given twice", key);
                goto done;
            }
            if (!(keep[i] = as_array(self, val)) || fill_input(self, (uint32_t)i, (PyArrayObject *)keep[i], &in[i])) goto done;
        }
    } else {
        PyObject *seq = PySequence_Fast(inputs, "inputs are a dict {name: array} or a sequence of arrays");
        if (!seq) goto done;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        if ((size_t)n != n_in) {
            char err[512];
            (void)irt_run_n(self->a, (uint32_t)n, in, n_out, out, err, sizeof err); /* the runtime's count message */
            Py_DECREF(seq);
            raise_runtime(self, err);
            goto done;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            if (!(keep[i] = as_array(self, PySequence_Fast_GET_ITEM(seq, i))) ||
                fill_input(self, (uint32_t)i, (PyArrayObject *)keep[i], &in[i])) {
                Py_DECREF(seq);
                goto done;
            }
        Py_DECREF(seq);
    }
    for (uint32_t i = 0; i < n_in; i++)
        if (!keep[i]) {
            char list[512] = "";
            for (uint32_t j = 0, at = 0; j < n_in && at < sizeof list; j++)
                at += (uint32_t)snprintf(list + at, sizeof list - at, "%s'%s'", j ? ", " : "", irt_input_name(self->a, j));
            PyErr_Format(self->st->error, "missing input '%U' (the artifact's inputs are %s)", PyTuple_GET_ITEM(self->in_names, i),
                         list);
            goto done;
        }
    char err[1024];
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = irt_run_n(self->a, n_in, in, n_out, out, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (rc) {
        raise_runtime(self, err);
        goto done;
    }
    result = PyDict_New();
    for (uint32_t o = 0; o < n_out; o++) {
        PyObject *arr = result ? wrap_output(self, &out[o]) : NULL;
        if (!arr || PyDict_SetItem(result, PyTuple_GET_ITEM(self->out_names, o), arr) < 0) Py_CLEAR(result);
        Py_XDECREF(arr);
        if (!result) /* the outputs not wrapped yet are still the runtime's */
            for (uint32_t r = o + 1; r < n_out; r++) irt_tensor_free(&out[r]);
        if (!result) break;
    }
done:
    for (uint32_t i = 0; keep && i < n_in; i++) Py_XDECREF(keep[i]);
    if (in != in_stack) free(in);
    if (out != out_stack) free(out);
    if (keep != keep_stack) free(keep);
    return result;
}

static PyObject *artifact_call(Artifact *self, PyObject *args, PyObject *kwargs) {
    Py_ssize_t na = PyTuple_GET_SIZE(args);
    if (na && kwargs && PyDict_GET_SIZE(kwargs)) return raise_runtime(self, "pass inputs either by position or by name, not both");
    return artifact_run(self, na ? args : kwargs ? kwargs : args);
}

static PyMethodDef artifact_methods[] = {
    {"run", (PyCFunction)artifact_run, METH_O, "run(inputs) -> {output name: ndarray}"},
    {"info", (PyCFunction)artifact_info, METH_VARARGS, "info(is_input, i) -> (dtype name, shape)"},
    {NULL, NULL, 0, NULL}};

static PyObject *artifact_get_in_names(Artifact *self, void *c) { (void)c; return Py_NewRef(self->in_names); }
static PyObject *artifact_get_out_names(Artifact *self, void *c) { (void)c; return Py_NewRef(self->out_names); }
static PyGetSetDef artifact_getset[] = {{"input_names", (getter)artifact_get_in_names, NULL, NULL, NULL},
                                        {"output_names", (getter)artifact_get_out_names, NULL, NULL, NULL},
                                        {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject ArtifactType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "irtool._native.Artifact",
    .tp_basicsize = sizeof(Artifact),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)artifact_dealloc,
    .tp_call = (ternaryfunc)artifact_call,
    .tp_methods = artifact_methods,
    .tp_getset = artifact_getset,
};

/* load(path) -> Artifact */
static PyObject *native_load(PyObject *m, PyObject *arg) {
    PyObject *bytes;
    if (!PyUnicode_FSConverter(arg, &bytes)) return NULL;
    char err[2048];
    IrtArtifact *a;
    Py_BEGIN_ALLOW_THREADS
    a = irt_load(PyBytes_AS_STRING(bytes), err, sizeof err);
    Py_END_ALLOW_THREADS
    Py_DECREF(bytes);
    if (!a) {
        PyErr_SetString(mod_state(m)->error, err);
        return NULL;
    }
    Artifact *self = PyObject_New(Artifact, &ArtifactType);
    if (!self) {
        irt_free(a);
        return NULL;
    }
    self->a = a;
    self->st = mod_state(m);
    self->n_in = irt_num_inputs(a);
    self->n_out = irt_num_outputs(a);
    for (int i = 0; i < NPY_NTYPES; i++) self->codes[i] = -2;
    for (int c = 0; c < 64; c++) self->out_type[c] = npy_of_name(irt_dtype_name(a, c));
    self->in_names = names_tuple(a, self->n_in, irt_input_name);
    self->out_names = self->in_names ? names_tuple(a, self->n_out, irt_output_name) : NULL;
    if (!self->out_names) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static PyObject *native_set_threads(PyObject *m, PyObject *arg) {
    (void)m;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0 || n > 4096) return PyErr_Format(PyExc_ValueError, "threads is 0 (all cores) to 4096, not %ld", n);
    irt_set_threads((int)n);
    Py_RETURN_NONE;
}

static PyObject *native_set_converter(PyObject *m, PyObject *fn) {
    Py_XSETREF(mod_state(m)->converter, Py_NewRef(fn));
    Py_RETURN_NONE;
}

static PyMethodDef native_methods[] = {
    {"load", native_load, METH_O, "load(path) -> Artifact"},
    {"set_threads", native_set_threads, METH_O, "set_threads(n): process-wide threads of compiled code"},
    {"set_converter", native_set_converter, METH_O, "set_converter(fn): array-like -> contiguous ndarray"},
    {NULL, NULL, 0, NULL}};

static int native_traverse(PyObject *m, visitproc visit, void *arg) {
    Py_VISIT(mod_state(m)->error);
    Py_VISIT(mod_state(m)->converter);
    return 0;
}

static int native_clear(PyObject *m) {
    Py_CLEAR(mod_state(m)->error);
    Py_CLEAR(mod_state(m)->converter);
    return 0;
}

static struct PyModuleDef native_module = {PyModuleDef_HEAD_INIT, .m_name = "irtool._native",
                                           .m_doc = "libirtool-runtime for Python", .m_size = sizeof(ModState),
                                           .m_methods = native_methods, .m_traverse = native_traverse,
                                           .m_clear = native_clear};

PyMODINIT_FUNC PyInit__native(void) {
    import_array();
    if (PyType_Ready(&ArtifactType) < 0) return NULL;
    PyObject *m = PyModule_Create(&native_module);
    if (!m) return NULL;
    ModState *st = mod_state(m);
    st->error = PyErr_NewExceptionWithDoc("irtool.IrtoolError", "An error reported by irtool's C library (its own message).",
                                          PyExc_RuntimeError, NULL);
    if (!st->error || PyModule_AddObjectRef(m, "IrtoolError", st->error) < 0 ||
        PyModule_AddObjectRef(m, "Artifact", (PyObject *)&ArtifactType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
