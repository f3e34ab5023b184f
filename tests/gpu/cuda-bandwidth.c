/* cuda-bandwidth.c - the device-memory bandwidth the decode figures are set
 * against (METHOD.md: measure the ceiling, do not take the datasheet's).
 * Times device-to-device copies of 1 GiB with events, after a warm-up, and
 * prints the median over 20 copies, counting bytes read plus bytes written,
 * and the device's name.  Exits 77 where no device is present.
 * Usage: cuda-bandwidth [MiB] */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define CU(call)                                                                  \
    do {                                                                          \
        cudaError_t e_ = (call);                                                  \
        if (e_ != cudaSuccess) {                                                  \
            fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));           \
            return 1;                                                             \
        }                                                                         \
    } while (0)

static int cmp(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int n_dev = 0;
    cudaError_t err = cudaGetDeviceCount(&n_dev);
    if (err != cudaSuccess || n_dev == 0) {
        printf("skipped: no CUDA device (%s)\n",
               err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
        return 77;
    }
    const size_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 1024;
    const size_t bytes = mib << 20;
    struct cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0));
    void *a, *b;
    CU(cudaMalloc(&a, bytes));
    CU(cudaMalloc(&b, bytes));
    CU(cudaMemset(a, 0x5a, bytes)); /* not zeros (METHOD.md) */
    cudaEvent_t t0, t1;
    CU(cudaEventCreate(&t0));
    CU(cudaEventCreate(&t1));
    CU(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice)); /* warm-up */
    enum { N = 20 };
    float ms[N];
    for (int i = 0; i < N; i++) {
        CU(cudaEventRecord(t0, 0));
        CU(cudaMemcpyAsync(i % 2 ? a : b, i % 2 ? b : a, bytes, cudaMemcpyDeviceToDevice, 0));
        CU(cudaEventRecord(t1, 0));
        CU(cudaEventSynchronize(t1));
        CU(cudaEventElapsedTime(&ms[i], t0, t1));
    }
    qsort(ms, N, sizeof(ms[0]), cmp);
    const double med = ms[N / 2];
    printf("{\"device\": \"%s\", \"copy_mib\": %zu, \"median_ms\": %.3f, "
           "\"read_plus_write_gb_s\": %.1f}\n",
           prop.name, mib, med, 2.0 * (double)bytes / (med * 1e-3) / 1e9);
    cudaFree(a);
    cudaFree(b);
    return 0;
}
