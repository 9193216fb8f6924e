/* api_host.cpp: the device API's planning and the device library's WQE builders compiled
 * for the host (g++, by build.rs), so that a test without a GPU compares the WQEs every
 * operation builds with the Rust builders' bytes, and runs them on the software NICs.
 * Reached only through kernels/src/api/host.rs. */
#include "host_shim.h"
#include "api_calls.cuh"

using namespace ibgda;

/* Plans `call` over `windows` and builds its WQEs into the ring `queue` names, from WQEBB
 * counter `start` on. Returns the status; *wqebbs gets the WQEBBs built. Every address in
 * the descriptors is host memory the caller owns (ring, peer tables, local sides). */
extern "C" int ibgda_api_host_build(const DeviceComm* comm, const DeviceWindow* windows, unsigned n_windows,
                                    const ApiCall* call, const DeviceQueueDescriptor* queue,
                                    unsigned long long start, unsigned* wqebbs) {
    const api::Plan p = api::plan_call(*comm, windows, n_windows, *call);
    *wqebbs = 0;
    if (p.status) return p.status;
    api::build(Queue{*queue}, start, p);
    *wqebbs = p.wqebbs;
    return 0;
}
