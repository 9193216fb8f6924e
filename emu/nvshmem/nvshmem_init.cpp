// Brings NVSHMEM up as one PE in this process, through its host library only
// (nvshmemx_hostlib_init_attr, so no device library, no -rdc) with the unique-ID bootstrap,
// then allocates and frees symmetric memory, so that its transports initialize and connect:
// with NVSHMEM_IB_ENABLE_IBGDA=1 its IBGDA transport runs nvshmemt_init and
// connect_endpoints against whatever libibverbs.so.1 / libmlx5.so.1 the loader finds (the
// emulated ConnectX under scripts/nvshmem-on-emulator.sh, which sets the environment).
//
// Each step is printed (and flushed) before it is taken: when NVSHMEM stops or hangs, the
// last line says in which call. Exit status: 0 when every step returned, else the number
// of the step that failed.
//
// Build (the GPU machine: nvcc 13.0, the nvidia-nvshmem-cu13 wheel's include/ and lib/):
//   nvcc -O1 -o nvshmem_init nvshmem_init.cpp -I$NVSHMEM/include \
//        $NVSHMEM/lib/libnvshmem_host.so.3 -Xlinker -rpath=$NVSHMEM/lib

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>
#include <nvshmem_host.h>

namespace {

int step_number = 0;

void step(const char *what) {
    ++step_number;
    std::printf("nvshmem_init: step %d: %s\n", step_number, what);
    std::fflush(stdout);
}

int fail(const char *what, int code) {
    std::printf("nvshmem_init: step %d failed: %s (%d)\n", step_number, what, code);
    std::fflush(stdout);
    return step_number;
}

const char *status_name(int status) {
    switch (status) {
        case NVSHMEM_STATUS_NOT_INITIALIZED:
            return "not initialized";
        case NVSHMEM_STATUS_IS_BOOTSTRAPPED:
            return "bootstrapped only: NVSHMEM's common init failed (its log says where)";
        case NVSHMEM_STATUS_IS_INITIALIZED:
            return "initialized";
        default:
            return "initialized (multi-process-per-GPU or another state)";
    }
}

}  // namespace

int main() {
    step("cudaSetDevice(0)");
    cudaError_t cuda = cudaSetDevice(0);
    if (cuda != cudaSuccess) return fail(cudaGetErrorString(cuda), static_cast<int>(cuda));

    step("nvshmemx_get_uniqueid");
    nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
    int status = nvshmemx_get_uniqueid(&id);
    if (status != 0) return fail("nvshmemx_get_uniqueid", status);

    step("nvshmemx_set_attr_uniqueid_args(rank 0 of 1)");
    nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
    status = nvshmemx_set_attr_uniqueid_args(0, 1, &id, &attr);
    if (status != 0) return fail("nvshmemx_set_attr_uniqueid_args", status);

    step("nvshmemx_hostlib_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID): bootstrap, transports, "
         "connect_endpoints");
    status = nvshmemx_hostlib_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr);
    if (status != 0) return fail("nvshmemx_hostlib_init_attr", status);

    step("nvshmemx_init_status");
    int init = nvshmemx_init_status();
    std::printf("nvshmem_init: status %d: %s; PE %d of %d\n", init, status_name(init),
                nvshmem_my_pe(), nvshmem_n_pes());
    std::fflush(stdout);
    if (init != NVSHMEM_STATUS_IS_INITIALIZED) return fail("nvshmemx_init_status", init);

    step("nvshmem_malloc(1 MiB): symmetric memory registered with the transports");
    void *buffer = nvshmem_malloc(1 << 20);
    if (buffer == nullptr) return fail("nvshmem_malloc", 0);

    step("nvshmem_free");
    nvshmem_free(buffer);

    step("nvshmemx_hostlib_finalize");
    nvshmemx_hostlib_finalize();

    step("done");
    return 0;
}
