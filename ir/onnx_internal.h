/* What irtool's ONNX importer and exporter agree on beyond the ONNX spec itself: the keys that
 * carry irtool-only information through a ModelProto, so that import(export(g)) prints the same
 * text as g. Internal to ir/onnx_import.c and ir/onnx_export.c.
 *
 * Model metadata_props (written by the exporter, consumed - not kept as graph meta - on import):
 *   irtool.opsets       the graph's own opset list, `domain=version` joined by ';' ("" = none).
 *                       The model's opset_import always says default domain 17 (the IR's
 *                       semantics); this key only restores what the graph recorded.
 *   irtool.symbols      the graph's symbols in declaration order, joined by ','.
 *   irtool.constraints  one constraint per line: `range LO HI EXPR`, `divisible K EXPR`,
 *                       `eq EXPR == EXPR` (EXPR in the text format's dimension syntax).
 * Its presence marks a model written by irtool: producer_name/version are then not recorded
 * as graph meta (they were derived from it), otherwise they become meta `onnx.producer_name`
 * and `onnx.producer_version`.
 *
 * NodeProto.doc_string: lines `key=value`; values escape '\' as "\\" and newline as "\n".
 *   irtool.loc=LINE:COL:FILE   the node's source location
 *   irtool.from=NAME           one line per provenance entry, in order
 * ValueInfoProto.doc_string:
 *   irtool.type=TYPE   the exact type in text syntax, written when a dim is an expression
 *                      (ONNX can only say "unknown" for it)
 * Lines with other keys (e.g. an exporter's stack traces) are ignored.
 */
#ifndef IRTOOL_ONNX_INTERNAL_H
#define IRTOOL_ONNX_INTERNAL_H

#define IR_ONNX_META_OPSETS "irtool.opsets"
#define IR_ONNX_META_SYMBOLS "irtool.symbols"
#define IR_ONNX_META_CONSTRAINTS "irtool.constraints"
#define IR_ONNX_META_PRODUCER_NAME "onnx.producer_name"
#define IR_ONNX_META_PRODUCER_VERSION "onnx.producer_version"
#define IR_ONNX_DOC_LOC "irtool.loc="
#define IR_ONNX_DOC_FROM "irtool.from="
#define IR_ONNX_DOC_TYPE "irtool.type="
#define IR_ONNX_IRTOOL_DOMAIN "irtool"
#define IR_ONNX_TRAINING_DOMAIN "ai.onnx.preview.training"
#define IR_ONNX_OPSET_MIN 1
#define IR_ONNX_OPSET_MAX 17

#endif
