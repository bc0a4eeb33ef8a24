/* ONNX import/export: not built yet in this revision (issue 3); both entry points say so. */
#include "ir_internal.h"

IrStatus ir_onnx_import(const void *data, size_t len, const char *path, IrDiag *diag, IrGraph **out) {
    (void)data, (void)len;
    *out = NULL;
    ir_diag_report(diag, IR_SEV_ERROR, path ? path : "<stdin>", 0, 0, NULL, 0, "ONNX import is not supported by this build yet");
    return IR_EUNSUPPORTED;
}

IrStatus ir_onnx_export(const IrGraph *g, const char *path, IrDiag *diag) {
    (void)g;
    ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0, "ONNX export is not supported by this build yet");
    return IR_EUNSUPPORTED;
}
