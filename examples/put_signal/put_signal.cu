/* Two kernels on the device API: rank 0 puts a message into rank 1's window and adds 1 to
 * rank 1's signal word on the same queue pair; rank 1 waits for the signal (acquire) and
 * then reads the message. One instance per scope: <kernel>_<Scope>. */
#include "ibgda_api.cuh"

using namespace ibgda;

template <class S>
__device__ void send(const DeviceComm& c, const DeviceWindow& data, const DeviceWindow& signals, u32 len, int* status) {
    /* data[peer 1][0 .. len) = data[local][len .. 2 len); then signals[peer 1][0] += 1. */
    int s = api::put_with_signal<S>(c, 1, data, 0, data, len, len, signals, 0, 1);
    if (s == 0) s = api::flush<S>(c, 1); /* the source may be reused once this returns */
    *status = s;
}

template <class S>
__device__ void receive(const DeviceComm& c, const DeviceWindow& signals, int* status) {
    /* Until this rank's signal word is at least 1 (or the communicator's deadline). */
    *status = api::wait_signal<S>(c, signals, 0, layout::SIGNAL_CMP_GE, 1);
}

#define PUT_SIGNAL(S)                                                                                           \
    extern "C" __global__ void send_##S(DeviceComm c, DeviceWindow data, DeviceWindow signals, u32 len,         \
                                        int* status) {                                                          \
        send<scope::S>(c, data, signals, len, status);                                                          \
    }                                                                                                           \
    extern "C" __global__ void receive_##S(DeviceComm c, DeviceWindow signals, int* status) {                   \
        receive<scope::S>(c, signals, status);                                                                  \
    }
PUT_SIGNAL(GpuReleaseStore)
