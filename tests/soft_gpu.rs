//! The control plane for GPU-placed queues on the software NIC (`nic::SoftGpuNic`),
//! without a GPU: ranks connected over a bootstrap (`nic::team`), every PRM command
//! executed by the software NIC's executor, and what it made read back for a GPU engine.
//! No byte of "device" memory is touched here (the backend never dereferences it), so it
//! stands in as host memory.

use std::sync::Arc;

use ibgda::memory::DeviceBuffer;
use ibgda::nic::team::{connect_rc, exchange_window, Bootstrap, LocalBootstrap};
use ibgda::nic::{
    Device, GpuDoorbellMemory, MemoryAccess, NicError, QueueAllocator, QueueFill, QueueSpec,
    RegisterMemory, SoftGpuNic,
};
use ibgda::order::GpuReleaseStore;
use ibgda::queue::{Gpu, ProducerStateMemory};
use ibgda::softnic::{Fabric, QpState};
use ibgda::wqe::RingSize;

/// Host memory standing in for device memory: its address is only recorded.
fn fake_device(len: usize) -> DeviceBuffer {
    let words = vec![0u64; len.div_ceil(8).max(1) + 8].into_boxed_slice();
    let addr = (words.as_ptr() as u64).next_multiple_of(64);
    // SAFETY: `addr` is inside the allocation `words` (64-byte aligned, `len` bytes fit),
    // which the buffer owns; nothing in these tests dereferences it.
    unsafe { DeviceBuffer::from_raw(addr, len, Box::new(words)) }
}

#[derive(Debug)]
struct FakeGpu;

impl QueueAllocator<Gpu> for FakeGpu {
    fn allocate(
        &self,
        len: usize,
        _align: usize,
        _fill: QueueFill,
    ) -> Result<DeviceBuffer, NicError> {
        Ok(fake_device(len))
    }
}

impl GpuDoorbellMemory for FakeGpu {
    fn doorbell(&self) -> Result<DeviceBuffer, NicError> {
        Ok(fake_device(8))
    }
}

#[test]
fn ranks_connect_gpu_queues_through_the_software_nics_commands() {
    const RANKS: usize = 3;
    let fabric = Fabric::new();
    let group = LocalBootstrap::group(RANKS);
    let made: Vec<_> = std::thread::scope(|s| {
        let jobs: Vec<_> = group
            .iter()
            .map(|b| {
                let fabric = fabric.clone();
                s.spawn(move || {
                    let rank = b.rank();
                    let nic =
                        SoftGpuNic::open(&fabric, 1 + rank as u16, Arc::new(FakeGpu)).expect("nic");
                    let device = Device::open(nic).expect("device");
                    let pd = device.alloc_pd().expect("pd");
                    let spec = QueueSpec::new(RingSize::new(64).expect("ring"));
                    let queues = connect_rc(
                        b,
                        &pd,
                        spec,
                        &FakeGpu,
                        || Ok(ProducerStateMemory::from_device(fake_device(64)).expect("state")),
                        GpuReleaseStore,
                    )
                    .expect("connect");
                    let data = Arc::new(fake_device(4096));
                    let region = pd
                        .register_memory(
                            RegisterMemory::Gpu {
                                buffer: data.clone(),
                                offset: 64,
                                len: 1024,
                            },
                            MemoryAccess::LOCAL_WRITE | MemoryAccess::REMOTE_WRITE,
                        )
                        .expect("region");
                    let window = exchange_window(b, &region, 7).expect("window");
                    // Host memory is refused: the GPU engine could not reach it.
                    let host = Arc::new(ibgda::memory::DmaBuffer::zeroed(64, 64).expect("host"));
                    assert!(matches!(
                        pd.register(host, 0, 64, MemoryAccess::LOCAL_WRITE),
                        Err(NicError::Unsupported { .. })
                    ));
                    let objects = device.backend().gpu_objects();
                    let mine: Vec<_> = queues
                        .iter()
                        .map(|q| {
                            (
                                q.device_qpn().get(),
                                q.sq_memory().ring(),
                                q.sq_memory().dbrec(),
                                q.sq_memory().doorbell().addr,
                                q.cq_memory().ring(),
                            )
                        })
                        .collect();
                    let peers: Vec<_> = window.peers().to_vec();
                    (
                        rank,
                        objects,
                        mine,
                        peers,
                        region.lkey(),
                        region.rkey(),
                        data.addr(),
                        device,
                        queues,
                        region,
                    )
                })
            })
            .collect();
        jobs.into_iter().map(|j| j.join().expect("rank")).collect()
    });
    // Rank r's queue pair p is connected to rank p's queue pair r, in RTS, over exactly the
    // memory the queue pair owns.
    for (rank, objects, mine, peers, lkey, rkey, data, ..) in &made {
        assert_eq!(objects.lid, 1 + *rank as u16);
        assert_eq!(objects.queue_pairs.len(), RANKS);
        for (p, (qpn, ring, dbrec, doorbell, cq)) in mine.iter().enumerate() {
            let o = objects
                .queue_pairs
                .iter()
                .find(|o| o.qpn == *qpn)
                .expect("the command's queue pair");
            assert_eq!(o.state, QpState::ReadyToSend);
            assert_eq!(
                (o.ring, o.dbrec, o.doorbell, o.cq.ring),
                (*ring, *dbrec, *doorbell, *cq)
            );
            assert_eq!(o.log_wqebbs, 6);
            let theirs = made[p].2[*rank].0;
            assert_eq!(o.peer, Some(theirs), "rank {rank} peer {p}");
            assert_eq!(o.peer_lid, Some(1 + p as u16));
        }
        assert_eq!(objects.regions.len(), 1);
        let r = &objects.regions[0];
        assert_eq!(
            (r.addr, r.len, r.lkey, r.rkey),
            (data + 64, 1024, *lkey, *rkey)
        );
        for (p, e) in peers.iter().enumerate() {
            assert_eq!((e.addr, e.len, e.rkey), (made[p].6 + 64, 1024, made[p].5));
        }
    }
    // Every command went through the software NIC's executor: CREATE_CQ and CREATE_QP
    // per queue pair, then its three transitions.
    for (_, _, _, _, _, _, _, device, ..) in &made {
        let executed = device.backend().soft().executed_commands();
        let creates = executed
            .iter()
            .filter(|&&o| o == ibgda::nic::prm::opcode::CREATE_QP)
            .count();
        assert_eq!(creates, RANKS);
        let rtr = executed
            .iter()
            .filter(|&&o| o == ibgda::nic::prm::opcode::INIT2RTR_QP)
            .count();
        assert_eq!(rtr, RANKS);
    }
}
