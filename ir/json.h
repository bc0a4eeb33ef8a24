/* JSON through jansson, for every report, baseline and summary irtool reads or writes. Reading
 * checks the shape member by member and names the place of a wrong one ("entries[3].cosine:
 * expected a number"); writing keeps insertion order, prints reals as the shortest text that
 * reads back to the same double and lays documents out in one of two fixed layouts, so the same
 * tree always gives the same bytes. */
#ifndef IRTOOL_IR_JSON_H
#define IRTOOL_IR_JSON_H

#include "ir.h"

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- building -------------------------------------------------------------------------------- */
/* A real for finite v, null otherwise (JSON has no NaN or infinity). */
json_t *ir_json_real(double v);
/* A string; NULL gives "", bytes that are not UTF-8 become U+FFFD (names read from models are
 * bytes, JSON strings are Unicode). */
json_t *ir_json_string(const char *s);
/* obj[key] = v and arr += v, taking v; false (v released) when obj or v is NULL or the insert
 * fails, so a builder can collect allocation failures in one flag. */
bool ir_json_set(json_t *obj, const char *key, json_t *v);
bool ir_json_push(json_t *arr, json_t *v);

/* ---- writing --------------------------------------------------------------------------------- */
typedef enum IrJsonLayout {
    IR_JSON_LINE, /* one line: ", " between items, ": " after keys */
    IR_JSON_ROWS, /* the top object one member a line; the arrays in it one element a line; deeper
                     values on their line (a report's rows stay greppable and diff by row) */
} IrJsonLayout;
/* Appends v and a newline. Strings, integers and literals are jansson's text; reals the shortest
 * round-trip form (ir/strconv.h, as Python writes them: 0.1, 1.0, 1e-05). */
void ir_json_write(const json_t *v, IrJsonLayout layout, IrStrBuf *out);
/* ir_json_write into path, atomically (ir_write_file_atomic; "-" is stdout). */
IrStatus ir_json_write_file(const json_t *v, IrJsonLayout layout, const char *path, IrDiag *diag) IR_MUST_CHECK;

/* ---- reading --------------------------------------------------------------------------------- */
/* Parses text (len bytes; name is the file name in messages). A duplicate key is an error, as
 * is a syntax error, reported at its line and column with the source line. */
IrStatus ir_json_parse(const char *text, size_t len, const char *name, IrDiag *diag, json_t **out) IR_MUST_CHECK;
IrStatus ir_json_load(const char *path, IrDiag *diag, json_t **out) IR_MUST_CHECK;

typedef enum IrJsonKind {
    IR_JSON_OBJECT,
    IR_JSON_ARRAY,
    IR_JSON_STRING,
    IR_JSON_NUMBER,         /* integer or real */
    IR_JSON_NUMBER_OR_NULL, /* a number, or null for a non-finite one */
    IR_JSON_INTEGER,
    IR_JSON_BOOL,
} IrJsonKind;

/* Where a reader is: the file and the path to the current value ("" at the top, then
 * "entries", "entries[3]", "entries[3].cosine"). */
typedef struct IrJsonAt {
    const char *file;
    IrDiag *diag;
    char path[256];
} IrJsonAt;

/* Whether v is of the kind; else reports "FILE: error: PATH: expected ..." and returns false. */
bool ir_json_check(const json_t *v, IrJsonKind kind, const IrJsonAt *at);
/* Member key of object obj (at `at`) checked to be of the kind: NULL after reporting "PATH.key:
 * missing" or "PATH.key: expected ..."; NULL without a report when !required and it is absent. */
const json_t *ir_json_member(const json_t *obj, const char *key, IrJsonKind kind, bool required, const IrJsonAt *at);
/* at with ".key" or "[i]" appended to its path (sub-paths of deeply nested values are cut). */
IrJsonAt ir_json_at_key(const IrJsonAt *at, const char *key);
IrJsonAt ir_json_at_index(const IrJsonAt *at, size_t i);
/* A number member's value, NaN for null (see IR_JSON_NUMBER_OR_NULL). */
double ir_json_number_value(const json_t *v);

#ifdef __cplusplus
}
#endif
#endif
