/* A consumer of the installed runtime alone (<irtool/runtime.h>, libirtool-runtime): loads the
 * artifact in argv[1], binds every symbolic dim to 2, fills the inputs with a ramp, runs it
 * and prints each output's shape. Built by .ci/consumers.sh with pkg-config and with CMake. */
#include <irtool/runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    char err[1024];
    IrtArtifact *a = argc == 2 ? irt_load(argv[1], err, sizeof err) : NULL;
    if (!a) {
        fprintf(stderr, "run_any: %s\n", argc == 2 ? err : "usage: run_any MODEL.irx");
        return 1;
    }
    uint32_t n_in = irt_num_inputs(a), n_out = irt_num_outputs(a);
    IrtTensor *in = calloc(n_in + 1, sizeof *in), *out = calloc(n_out + 1, sizeof *out);
    for (uint32_t i = 0; i < n_in; i++) {
        irt_input_info(a, i, &in[i]);
        size_t n = irt_dtype_size(a, in[i].dtype);
        for (uint32_t k = 0; k < in[i].rank; k++) {
            if (irt_input_dim_symbol(a, i, k)) in[i].dims[k] = 2;
            n *= (size_t)in[i].dims[k];
        }
        in[i].data = calloc(n ? n : 1, 1);
        if (in[i].dtype == irt_dtype_code(a, "f32"))
            for (size_t e = 0; e < n / 4; e++) ((float *)in[i].data)[e] = (float)(e % 7) / 7.0f;
    }
    int rc = irt_run_n(a, n_in, in, n_out, out, err, sizeof err);
    if (rc) fprintf(stderr, "run_any: %s\n", err);
    for (uint32_t i = 0; !rc && i < n_out; i++) {
        printf("%s: %s[", irt_output_name(a, i), irt_dtype_name(a, out[i].dtype));
        for (uint32_t k = 0; k < out[i].rank; k++) printf("%s%lld", k ? ", " : "", (long long)out[i].dims[k]);
        printf("]\n");
        irt_tensor_free(&out[i]);
    }
    for (uint32_t i = 0; i < n_in; i++) free(in[i].data);
    free(in), free(out);
    irt_free(a);
    return rc ? 1 : 0;
}
