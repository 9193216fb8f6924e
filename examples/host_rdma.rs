//! RDMA WRITE, READ and fetch-and-add from the host through a typed RC queue pair made by
//! the control plane (`nic::Device`: PRM commands, UMEM, UAR), here on the software NIC
//! (`cargo run --example host_rdma`). The same code runs on a ConnectX: open the device
//! with the mlx5 backend instead of `SoftNic` (see `ibgda-demo --nic mlx5_0`).

use std::{error::Error, sync::Arc, time::Duration};

use ibgda::memory::DmaBuffer;
use ibgda::nic::{Device, MemoryAccess, QueueSpec, SoftNic};
use ibgda::softnic::Fabric;
use ibgda::wqe::{Atomic, RdmaRead, RdmaWrite, RingSize};

/// Runs the three operations and checks every byte they move.
pub fn main() -> Result<(), Box<dyn Error>> {
    // Two software NICs (hosts a and b) on one fabric, and the engine thread that executes
    // their WQEs until dropped (a ConnectX needs none).
    let fabric = Fabric::new();
    let (a, b) = (
        Device::open(SoftNic::open(&fabric, 1)?)?,
        Device::open(SoftNic::open(&fabric, 2)?)?,
    );
    let engine = fabric.spawn_engine();
    let (pd_a, pd_b) = (a.alloc_pd()?, b.alloc_pd()?);

    // The requester's local buffer on host a, the target on host b.
    let local = Arc::new(DmaBuffer::zeroed(4096, 64)?);
    let remote = Arc::new(DmaBuffer::zeroed(4096, 64)?);
    remote.write(0, b"hello from host b")?;
    remote.write(64, &40u64.to_be_bytes())?; // RDMA atomics are big-endian
    let mine = pd_a.register(local.clone(), 0, 4096, MemoryAccess::LOCAL_WRITE)?;
    let theirs = pd_b.register(remote.clone(), 0, 4096, MemoryAccess::all())?;

    // An RC queue pair on each host, connected with each other's endpoint (what a TCP
    // exchange would carry: nic::connection::exchange).
    let spec = QueueSpec::new(RingSize::new(16)?);
    let (pending_a, pending_b) = (pd_a.create_rc(spec)?, pd_b.create_rc(spec)?);
    let (end_a, end_b) = (pending_a.endpoint(), pending_b.endpoint());
    let mut qp = pending_a.connect(&end_b)?;
    let _peer = pending_b.connect(&end_a)?;
    let keep = [mine.registered()];

    // WRITE: 8 bytes carried inline in the WQE land at remote[128..136].
    let payload = 0x0123_4567_89ab_cdefu64.to_be_bytes();
    let write = RdmaWrite::new(theirs.remote(128)).inline(&payload);
    // READ: remote[0..17] into local[0..17].
    let read = RdmaRead::new(theirs.remote(0)).sge(mine.sge(0, 17)?);
    // Fetch-and-add: remote[64..72] += 2; the old value lands in local[256..264].
    let add = Atomic::fetch_add(theirs.remote(64), mine.local(256), 2);

    qp.post(&write.build()?, &[])?;
    qp.post(&read.build()?, &keep)?;
    let last = qp.post(&add.signaled().build()?, &keep)?;
    qp.wait(last, Duration::from_secs(5))?; // every WQE before it completed too
    drop(engine);

    let (local, remote) = (local.to_vec(), remote.to_vec());
    assert_eq!(remote[128..136], payload, "WRITE");
    assert_eq!(&local[..17], b"hello from host b", "READ");
    assert_eq!(local[256..264], 40u64.to_be_bytes(), "atomic's old value");
    assert_eq!(remote[64..72], 42u64.to_be_bytes(), "atomic's new value");
    println!("WRITE, READ, fetch-and-add: {:?}", fabric.counters());
    Ok(())
}
