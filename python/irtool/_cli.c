/* irtool._cli: the toolkit side of the Python package (compile, optimize, validate). It runs
 * the CLI's own commands (tools/cmd_*.c, linked in with libirtool) in this process, so the
 * pipeline, the validation gate and the compile cache behave exactly as `irtool` does without
 * a subprocess; what a command prints is captured (fd 1 and 2 into memfds) and returned.
 * Loaded only when one of those functions is first used: it brings LLVM into the process.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "tools/cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The commands of tools/irtool.c's table that Python reaches. */
static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} COMMANDS[] = {{"compile", cmd_compile}, {"opt", cmd_opt}, {"validate", cmd_validate}};

/* The CLI's usage errors, worded for Python (tools/irtool.c, not linked here, has the CLI's). */
int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "irtool %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return EXIT_USAGE;
}

/* tools/ commands call it for --help; Python passes no such flag. */
int cli_print_help(const char *cmd) {
    fprintf(stderr, "irtool %s: see `irtool %s --help`\n", cmd, cmd);
    return EXIT_USAGE;
}

/* Reads back what fd holds (a memfd written from offset 0) as a str. */
static PyObject *read_back(int fd) {
    off_t n = lseek(fd, 0, SEEK_END);
    char *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf) return PyErr_NoMemory();
    ssize_t got = n > 0 ? pread(fd, buf, (size_t)n, 0) : 0;
    PyObject *s = PyUnicode_DecodeUTF8(buf, got > 0 ? got : 0, "replace");
    free(buf);
    return s;
}

/* run(command, [args...]) -> (exit code, stdout text, stderr text) */
static PyObject *cli_run(PyObject *self, PyObject *args) {
    (void)self;
    const char *cmd;
    PyObject *list;
    if (!PyArg_ParseTuple(args, "sO!", &cmd, &PyList_Type, &list)) return NULL;
    int (*run)(int, char **) = NULL;
    for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++)
        if (!strcmp(COMMANDS[i].name, cmd)) run = COMMANDS[i].run;
    if (!run) return PyErr_Format(PyExc_ValueError, "no toolkit command '%s'", cmd);
    Py_ssize_t n = PyList_GET_SIZE(list);
    char **argv = calloc((size_t)n + 2, sizeof *argv);
    if (!argv) return PyErr_NoMemory();
    argv[0] = (char *)cmd;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyList_GET_ITEM(list, i);
        if (!PyUnicode_Check(a) || !(argv[i + 1] = (char *)PyUnicode_AsUTF8(a))) {
            free(argv);
            return PyErr_Format(PyExc_TypeError, "command arguments are str");
        }
    }
    int out = memfd_create("irtool-stdout", MFD_CLOEXEC), err = memfd_create("irtool-stderr", MFD_CLOEXEC);
    int save_out = dup(1), save_err = dup(2);
    if (out < 0 || err < 0 || save_out < 0 || save_err < 0) {
        free(argv);
        PyErr_SetFromErrno(PyExc_OSError);
        goto close;
    }
    fflush(stdout), fflush(stderr);
    dup2(out, 1), dup2(err, 2);
    int rc = run((int)n + 1, argv);
    fflush(stdout), fflush(stderr);
    dup2(save_out, 1), dup2(save_err, 2);
    free(argv);
    PyObject *o = read_back(out), *e = read_back(err), *res = NULL;
    if (o && e) res = Py_BuildValue("(iOO)", rc, o, e);
    Py_XDECREF(o), Py_XDECREF(e);
    close(out), close(err), close(save_out), close(save_err);
    return res;
close:
    if (out >= 0) close(out);
    if (err >= 0) close(err);
    if (save_out >= 0) close(save_out);
    if (save_err >= 0) close(save_err);
    return NULL;
}

static PyMethodDef cli_methods[] = {
    {"run", cli_run, METH_VARARGS, "run(command, args) -> (exit code, stdout, stderr)"}, {NULL, NULL, 0, NULL}};

static struct PyModuleDef cli_module = {PyModuleDef_HEAD_INIT, .m_name = "irtool._cli",
                                            .m_doc = "irtool's compile, opt and validate commands, in process",
                                            .m_size = 0, .m_methods = cli_methods};

PyMODINIT_FUNC PyInit__cli(void) { return PyModule_Create(&cli_module); }
