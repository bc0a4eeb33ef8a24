/* A program that runs an irtool artifact with libirtool-runtime alone (no LLVM, no IR code):
 *   irtool compile corpus/conv_block.ir -o conv.irx
 *   cc -I. examples/run_artifact.c -Lbuild -lirtool-runtime -o run_artifact
 *   ./run_artifact conv.irx
 * Inputs are filled with a fixed ramp of the compiled shapes (f32 only); prints each output's
 * first values. */
#include "backend/runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    char err[1024];
    if (argc != 2) {
        fprintf(stderr, "usage: %s ARTIFACT.irx\n", argv[0]);
        return 2;
    }
    IrtArtifact *a = irt_load(argv[1], err, sizeof err);
    if (!a) {
        fprintf(stderr, "%s: %s\n", argv[1], err);
        return 1;
    }
    uint32_t n_in = irt_num_inputs(a), n_out = irt_num_outputs(a);
    IrtTensor *in = calloc(n_in + 1, sizeof *in), *out = calloc(n_out + 1, sizeof *out);
    for (uint32_t i = 0; i < n_in; i++) {
        irt_input_info(a, i, &in[i]);
        size_t n = 1;
        for (uint32_t k = 0; k < in[i].rank; k++) {
            if (in[i].dims[k] < 0) in[i].dims[k] = 1; /* a symbolic batch (irt_batch_symbol): one sample */
            n *= (size_t)in[i].dims[k];
        }
        float *d = malloc(n * sizeof *d + 1);
        for (size_t e = 0; e < n; e++) d[e] = (float)(e % 17) / 17.0f;
        in[i].data = d;
    }
    int rc = irt_run(a, in, out, err, sizeof err);
    if (rc) fprintf(stderr, "run failed: %s\n", err);
    for (uint32_t i = 0; !rc && i < n_out; i++) {
        size_t n = 1;
        for (uint32_t k = 0; k < out[i].rank; k++) n *= (size_t)out[i].dims[k];
        printf("%s:", irt_output_name(a, i));
        for (size_t e = 0; e < n && e < 5; e++) printf(" %g", ((float *)out[i].data)[e]);
        printf("%s\n", n > 5 ? " ..." : "");
        free(out[i].data);
    }
    for (uint32_t i = 0; i < n_in; i++) free(in[i].data);
    free(in);
    free(out);
    irt_free(a);
    return rc ? 1 : 0;
}
