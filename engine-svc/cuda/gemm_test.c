/* gemm_test.c - cuBLAS is found at run time: the library gemm.c dlopens
 * and every symbol it takes from it.  Runs without a GPU: there handle
 * creation itself fails (no device), but with a cuBLAS status, not with a
 * loading error.  The products are checked by tests/gpu. */
#include "gemm.h"

#include "error.h"

#include <stdio.h>
#include <string.h>

int main(void)
{
    lp_cuda_blas_t *b = NULL;
    int rc = lp_cuda_blas_new(NULL, &b);
    if (rc == LP_ERR(ENOSYS)) {
        fprintf(stderr, "cuBLAS did not load: %s\n", lp_error_msg());
        return 1;
    }
    if (rc) {
        /* no device: the failure must come from cuBLAS itself */
        if (!strstr(lp_error_msg(), "cuBLAS creating a handle")) {
            fprintf(stderr, "unexpected failure: %s\n", lp_error_msg());
            return 1;
        }
        printf("cuBLAS loaded; no handle without a device (%s)\n", lp_error_msg());
        return 0;
    }
    lp_cuda_blas_destroy(&b);
    printf("cuBLAS loaded, handle made\n");
    return b == NULL ? 0 : 1;
}
