//! The CUDA software NIC behind the control plane, without a GPU: ranks made by PRM
//! commands on `SoftGpuNic` devices (the software NIC's executor over GPU queue memory)
//! become the engines' tables (`cudanic::nic_builder`): one node per device, every
//! registration under the keys the control plane handed out, every queue pair over its
//! own memory, connected to the peer its INIT2RTR named, each connected pair on one
//! engine; a queue pair no command made, or given without its peer, is refused. The
//! "device" memory is host memory standing in (never dereferenced: no kernel runs).

use std::sync::Arc;

use ibgda::memory::DeviceBuffer;
use ibgda::nic::team::{connect_rc, exchange_window, Bootstrap, LocalBootstrap};
use ibgda::nic::{
    Device, GpuDoorbellMemory, MemoryAccess, MemoryRegion, NicError, QueueAllocator, QueueFill,
    QueueSpec, RegisterMemory, SoftGpuNic, Window,
};
use ibgda::order::GpuReleaseStore;
use ibgda::queue::{Gpu as GpuPlaced, ProducerStateMemory, QueuePair};
use ibgda::softnic::{Access, Fabric};
use ibgda::wqe::{Rc, RingSize};
use ibgda_kernels::cudanic::nic_builder;
use ibgda_kernels::gpu::GpuError;
use ibgda_kernels::softnic::{state, NIC_NONE};

fn stand_in(len: usize) -> DeviceBuffer {
    let backing = vec![0u64; len.div_ceil(8).max(1)];
    let addr = backing.as_ptr() as u64;
    // SAFETY: no GPU and no kernel: the buffer is only an address range; `backing` keeps
    // it allocated (and distinct) for the buffer's life.
    unsafe { DeviceBuffer::from_raw(addr, len, Box::new(backing)) }
}

#[derive(Debug)]
struct StandIn;

impl QueueAllocator<GpuPlaced> for StandIn {
    fn allocate(&self, len: usize, _: usize, _: QueueFill) -> Result<DeviceBuffer, NicError> {
        Ok(stand_in(len))
    }
}

impl GpuDoorbellMemory for StandIn {
    fn doorbell(&self) -> Result<DeviceBuffer, NicError> {
        Ok(stand_in(8))
    }
}

struct Rank {
    _window: Window,
    region: MemoryRegion<SoftGpuNic>,
    queues: Vec<QueuePair<Rc, GpuPlaced, GpuReleaseStore>>,
    device: Device<SoftGpuNic>,
}

fn ranks(n: usize) -> Vec<Rank> {
    let fabric = Fabric::new();
    let group = LocalBootstrap::group(n);
    std::thread::scope(|s| {
        let jobs: Vec<_> = group
            .iter()
            .map(|b| {
                let fabric = fabric.clone();
                s.spawn(move || {
                    let nic = SoftGpuNic::open(&fabric, 1 + b.rank() as u16, Arc::new(StandIn))
                        .expect("nic");
                    let device = Device::open(nic).expect("device");
                    let pd = device.alloc_pd().expect("pd");
                    let queues = connect_rc(
                        b,
                        &pd,
                        QueueSpec::new(RingSize::new(64).expect("ring")),
                        &StandIn,
                        || Ok(ProducerStateMemory::from_device(stand_in(64)).expect("state")),
                        GpuReleaseStore,
                    )
                    .expect("connect");
                    let region = pd
                        .register_memory(
                            RegisterMemory::Gpu {
                                buffer: Arc::new(stand_in(4096)),
                                offset: 0,
                                len: 4096,
                            },
                            MemoryAccess::LOCAL_WRITE | MemoryAccess::REMOTE_WRITE,
                        )
                        .expect("region");
                    let window = exchange_window(b, &region, 0).expect("window");
                    Rank {
                        _window: window,
                        region,
                        queues,
                        device,
                    }
                })
            })
            .collect();
        jobs.into_iter().map(|j| j.join().expect("rank")).collect()
    })
}

#[test]
fn the_commands_objects_become_the_engines_tables() {
    let ranks = ranks(3);
    let devices: Vec<&SoftGpuNic> = ranks.iter().map(|r| r.device.backend()).collect();
    let all: Vec<_> = ranks.iter().flat_map(|r| r.queues.iter()).collect();
    // 3 self-connected pairs and 3 between ranks: 6 pairs on 4 engines.
    let builder = nic_builder(&devices, &all, 4, 16 << 10).expect("builder");
    let tables = builder.tables();
    assert_eq!(tables.len(), 4);
    for t in &tables {
        assert_eq!(
            t.nodes.iter().map(|n| n.lid).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        // Every registration, with the control plane's keys, on its rank's node.
        for (node, r) in ranks.iter().enumerate() {
            let found = t
                .regions
                .iter()
                .find(|x| x.lkey == r.region.lkey().0)
                .expect("the region");
            assert_eq!(
                (found.rkey, found.start, found.len, found.node),
                (r.region.rkey().0, r.region.addr(), 4096, node as u32)
            );
            assert_eq!(
                Access::from_bits_truncate(found.access),
                Access::LOCAL_WRITE | Access::REMOTE_WRITE
            );
        }
    }
    // Every queue pair once, ready, connected to rank p's queue pair for its rank, on
    // the engine of its peer.
    let mut seen = 0;
    for (rank, r) in ranks.iter().enumerate() {
        for (peer, qp) in r.queues.iter().enumerate() {
            let qpn = qp.device_qpn().get();
            let (e, q) = tables
                .iter()
                .enumerate()
                .find_map(|(e, t)| t.queues.iter().find(|q| q.qpn == qpn).map(|q| (e, *q)))
                .expect("the queue");
            let theirs = ranks[peer].queues[rank].device_qpn().get();
            assert_eq!(q.peer, theirs, "rank {rank} peer {peer}");
            assert_eq!(q.state, state::READY);
            assert_eq!(q.node, rank as u32);
            assert_eq!(q.ring, qp.sq_memory().ring().addr);
            assert_eq!(q.doorbell, qp.sq_memory().doorbell().addr);
            assert!(
                tables[e].queues.iter().any(|x| x.qpn == theirs),
                "the peer shares the engine"
            );
            assert!(tables[e]
                .responders
                .iter()
                .any(|x| x.number == qpn && x.cq == NIC_NONE));
            seen += 1;
        }
    }
    assert_eq!(seen, 9);
    assert_eq!(tables.iter().map(|t| t.queues.len()).sum::<usize>(), 9);
}

#[test]
fn queue_pairs_the_commands_did_not_make_or_without_their_peer_are_refused() {
    let ranks = ranks(2);
    let devices: Vec<&SoftGpuNic> = ranks.iter().map(|r| r.device.backend()).collect();
    // Rank 0's queue pair to rank 1 without rank 1's to rank 0.
    let lone = [&ranks[0].queues[1]];
    let e = nic_builder(&devices, &lone, 1, 4096)
        .map(|_| ())
        .unwrap_err();
    assert!(
        matches!(&e, GpuError::Invalid(m) if m.contains("not among")),
        "{e}"
    );
    // Rank 1's queue pairs, but only rank 0's device.
    let theirs: Vec<_> = ranks[1].queues.iter().collect();
    let e = nic_builder(&devices[..1], &theirs, 1, 4096)
        .map(|_| ())
        .unwrap_err();
    assert!(
        matches!(&e, GpuError::Invalid(m) if m.contains("none of the devices")),
        "{e}"
    );
    // The same queue pair twice.
    let twice = [&ranks[0].queues[0], &ranks[0].queues[0]];
    assert!(nic_builder(&devices, &twice, 1, 4096).is_err());
    assert!(nic_builder(&devices, &[&ranks[0].queues[0]], 0, 4096).is_err());
}

/// A region under the control plane's keys keeps them; a key of 0, two equal keys, or a
/// key another region has are refused.
#[test]
fn regions_under_given_keys_are_checked() {
    use ibgda::wqe::{LKey, RKey};
    use ibgda_kernels::softnic::builder::DeviceNicBuilder;
    let mut nic = DeviceNicBuilder::new();
    let node = nic.node(1).expect("node");
    let buffer = Arc::new(stand_in(4096));
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let k = nic
        .region_with_keys(node, &buffer, 0, 1024, rw, (LKey(0x500), RKey(0x501)))
        .expect("region");
    assert_eq!(
        (k.lkey, k.rkey, k.addr),
        (LKey(0x500), RKey(0x501), buffer.addr())
    );
    for keys in [
        (LKey(0), RKey(0x601)),
        (LKey(0x700), RKey(0x700)),
        (LKey(0x501), RKey(0x800)),
        (LKey(0x900), RKey(0x500)),
    ] {
        assert!(
            nic.region_with_keys(node, &buffer, 1024, 1024, rw, keys)
                .is_err(),
            "{keys:?}"
        );
    }
    // The builder's own keys never collide with given ones.
    let own = nic.region(node, &buffer, 2048, 1024, rw).expect("region");
    assert!(![0x500, 0x501].contains(&own.lkey.0) && ![0x500, 0x501].contains(&own.rkey.0));
}
