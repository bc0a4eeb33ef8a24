/* MaxPool and AveragePool kernels large enough to run in parts on the thread pool (the op
 * table's parts column): at one and three threads they agree with the reference interpreter
 * (within rtol 1e-6, atol 1e-6), for the f32 kernel of codegen.c (strides 1-3, pads,
 * count_include_pad, fewer output rows than parts) and for the window walk of cpu/conv.c
 * (ceil_mode, SAME pads), whose first nest is shared out the same way. */
#include "backend/cpu/cpu.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

static void check(const char *text) {
    for (int threads = 1; threads <= 3; threads += 2) tu_check_llvm_text_tol(text, threads, 7, 1e-6, 1e-6);
}

/* One pool node on x: f32[dims] with the given attributes; the result shape is inferred. */
static void check_pool(const char *op, const char *dims, const char *attrs) {
    char text[1024];
    snprintf(text, sizeof text, "graph @pool(%%x: f32[%s]) {\n  %%y = %s(%%x) {%s}\n  return %%y\n}\n", dims, op, attrs);
    check(text);
}

Test(cpu_pool_parts, max_pool_codegen_kernel) {
    /* SqueezeNet's first MaxPool, then pads and strides 1 and 3 */
    check_pool("MaxPool", "1, 64, 111, 111", "kernel_shape = [3, 3], pads = [0, 0, 0, 0], strides = [2, 2]");
    check_pool("MaxPool", "2, 24, 37, 41", "kernel_shape = [3, 2], pads = [1, 0, 1, 1], strides = [1, 1]");
    check_pool("MaxPool", "1, 40, 65, 70", "kernel_shape = [5, 5], pads = [2, 2, 2, 2], strides = [3, 3]");
}

Test(cpu_pool_parts, average_pool_codegen_kernel) {
    check_pool("AveragePool", "1, 32, 64, 64", "kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [1, 1]");
    check_pool("AveragePool", "1, 32, 64, 64",
               "kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2], count_include_pad = 1");
}

Test(cpu_pool_parts, fewer_rows_than_parts) {
    /* 1 plane of 4 output rows: most parts get no row */
    check_pool("MaxPool", "1, 1, 6, 20000", "kernel_shape = [3, 3], pads = [0, 1, 0, 1], strides = [1, 1]");
    check_pool("AveragePool", "1, 1, 5, 16384", "kernel_shape = [2, 4], pads = [0, 0, 0, 0], strides = [1, 2]");
}

Test(cpu_pool_parts, window_walk_kernel) {
    check_pool("MaxPool", "1, 32, 56, 57", "kernel_shape = [3, 3], pads = [0, 0, 0, 0], strides = [2, 2], ceil_mode = 1");
    check_pool("AveragePool", "1, 16, 64, 65", "kernel_shape = [3, 3], auto_pad = \"SAME_UPPER\", strides = [2, 2]");
}
