//! RDMA WRITE, READ and fetch-and-add from the host through a typed RC queue pair, executed
//! by the software NIC (`cargo run --example host_rdma`).

use std::{error::Error, sync::Arc, time::Duration};

use ibgda::memory::DmaBuffer;
use ibgda::softnic::{Access, Fabric, QueuePairSpec};
use ibgda::wqe::{Atomic, Rc, RdmaRead, RdmaWrite, RingSize};

/// Runs the three operations and checks every byte they move.
pub fn main() -> Result<(), Box<dyn Error>> {
    let fabric = Fabric::new();
    let (a, b) = (fabric.add_node(1)?, fabric.add_node(2)?);
    // The requester's local buffer on node a, the target on node b.
    let local = Arc::new(DmaBuffer::zeroed(4096, 64)?);
    let remote = Arc::new(DmaBuffer::zeroed(4096, 64)?);
    remote.write(0, b"hello from node b")?;
    remote.write(64, &40u64.to_be_bytes())?; // RDMA atomics are big-endian
    let mine = fabric.register(a, local.clone(), 0, 4096, Access::LOCAL_WRITE)?;
    let theirs = fabric.register(b, remote.clone(), 0, 4096, Access::all())?;
    let spec = QueuePairSpec::new(RingSize::new(16)?);
    let mut qp = fabric.create_queue_pair::<Rc>(a, spec)?;
    let peer = fabric.create_queue_pair::<Rc>(b, spec)?;
    fabric.connect(qp.qpn(), peer.qpn())?;
    let engine = fabric.spawn_engine(); // executes WQEs on its own thread until dropped
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
    assert_eq!(&local[..17], b"hello from node b", "READ");
    assert_eq!(local[256..264], 40u64.to_be_bytes(), "atomic's old value");
    assert_eq!(remote[64..72], 42u64.to_be_bytes(), "atomic's new value");
    println!("WRITE, READ, fetch-and-add: {:?}", fabric.counters());
    Ok(())
}
