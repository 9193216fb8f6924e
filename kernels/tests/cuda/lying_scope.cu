/* Two instances of one kernel under the C names honest_GpuFence and lying_GpuFence: the
 * first posts with scope::GpuFence, as its name says; the second with scope::ThreadFence.
 * Given a GpuFence descriptor, the device library traps in the second. Used by
 * tests/gpu.rs (on a GPU) and tests/nvrtc_ptx.rs (the compare it traps on). */
#include "ibgda.cuh"
using namespace ibgda;
template <class Body> __device__ void nop(const DeviceQueueDescriptor& d, int* status) {
    Exclusive<Body> e = Exclusive<Body>::load(d);
    WqeSlots s;
    if (e.reserve(1, s)) {
        build_nop(s, ctrl(d.qpn, layout::FM_CE_SE_CQ_UPDATE));
        e.commit(1);
    }
    e.store();
    *status = 7;
}
extern "C" __global__ void honest_GpuFence(DeviceQueueDescriptor d, int* status) {
    nop<scope::GpuFence>(d, status);
}
extern "C" __global__ void lying_GpuFence(DeviceQueueDescriptor d, int* status) {
    nop<scope::ThreadFence>(d, status);
}

