/* softnic_host.cpp: the host build of the CUDA software NIC's engine (softnic.cuh), for
 * the differential test against the CPU software NIC on machines without a GPU. Compiled
 * by kernels/build.rs (the cc crate, g++ -std=c++17); called only through
 * ibgda_kernels::softnic::ffi. */
#include "softnic.cuh"

extern "C" {

/* One step of an engine; returns its progress count (0: nothing happened). */
unsigned long long ibgda_softnic_host_step(ibgda::NicEngine* engine) { return ibgda::nic::step(engine); }

/* Whether `len` fetched bytes parse as the WQE at `index` of a queue of `transport`
 * (layout::NIC_TRANSPORT_*); fills `fields` (8 words: opcode, qpn, ds, fm_ce_se, op,
 * data kind, segments or inline length, atomic width) when they do. */
int ibgda_softnic_host_parse(const unsigned char* buf, unsigned len, unsigned index, unsigned transport,
                             unsigned* fields) {
    ibgda::nic::Parsed w;
    if (!ibgda::nic::parse(buf, len, index, transport, w)) return 0;
    fields[0] = w.opcode;
    fields[1] = w.qpn;
    fields[2] = w.ds;
    fields[3] = w.fm_ce_se;
    fields[4] = (unsigned)w.op;
    fields[5] = (unsigned)w.data;
    fields[6] = w.data == ibgda::nic::Data::Inline ? w.inline_len : (w.data == ibgda::nic::Data::Pointers ? w.segments : 0u);
    fields[7] = w.op == ibgda::nic::Op::Atomic ? w.width : 0u;
    return 1;
}

}
