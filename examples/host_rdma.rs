//! RDMA WRITE, READ and fetch-and-add from the host through a typed RC queue pair made by
//! the control plane (`nic::Device`: PRM commands, UMEM, UAR), on the backend `--nic`
//! names, as `ibgda-demo --nic` does:
//!
//! ```sh
//! cargo run --example host_rdma                                      # the software NIC
//! cargo run --example host_rdma --features mlx5 -- --nic mlx5_0      # a ConnectX
//! scripts/with-emulated-nic cargo run --example host_rdma --features mlx5 -- --nic mlx5_0
//! ```
//!
//! `soft` (the default) is two software NICs on one fabric; a device name is that ConnectX
//! through the mlx5 backend (feature `mlx5`), both hosts on it, or the emulated ConnectX
//! under `scripts/with-emulated-nic`. The code between opening the devices and checking
//! the bytes is the same for both.

use std::{error::Error, sync::Arc, time::Duration};

use ibgda::memory::DmaBuffer;
use ibgda::nic::{Backend, Device, MemoryAccess, QueueSpec, SoftNic};
use ibgda::softnic::Fabric;
use ibgda::wqe::{Atomic, RdmaRead, RdmaWrite, RingSize};

/// Runs the three operations on the NIC `--nic` names (default `soft`).
#[allow(dead_code)] // the tests that include this file call `run`
pub fn main() -> Result<(), Box<dyn Error>> {
    let nic = nic_from_args(std::env::args().skip(1))?;
    println!("{}", run(&nic)?);
    Ok(())
}

/// The NIC the arguments name: `--nic NAME` (or `--nic=NAME`), `soft` without one.
pub fn nic_from_args(args: impl IntoIterator<Item = String>) -> Result<String, String> {
    let usage = "usage: host_rdma [--nic soft|DEVICE]";
    let mut nic = "soft".to_owned();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.strip_prefix("--nic") {
            Some("") => nic = args.next().ok_or(format!("--nic needs a value; {usage}"))?,
            Some(value) if value.starts_with('=') => nic = value[1..].to_owned(),
            _ => return Err(format!("unknown argument {arg:?}; {usage}")),
        }
    }
    if nic.is_empty() {
        return Err(format!("an empty NIC name; {usage}"));
    }
    Ok(nic)
}

/// Runs WRITE, READ and fetch-and-add on `nic` (`soft`, or an mlx5 device's name) and
/// checks every byte they move; returns what ran, for the report.
pub fn run(nic: &str) -> Result<String, Box<dyn Error>> {
    if nic == "soft" {
        // Two software NICs (hosts a and b) on one fabric, and the engine thread that
        // executes their WQEs until dropped (a ConnectX needs none).
        let fabric = Fabric::new();
        let (a, b) = (
            Device::open(SoftNic::open(&fabric, 1)?)?,
            Device::open(SoftNic::open(&fabric, 2)?)?,
        );
        let engine = fabric.spawn_engine();
        transfer(&a, &b)?;
        drop(engine);
        return Ok(format!(
            "WRITE, READ, fetch-and-add on the software NIC: {:?}",
            fabric.counters()
        ));
    }
    hardware(nic)
}

/// Both hosts on the ConnectX `name`, through the mlx5 backend.
#[cfg(feature = "mlx5")]
fn hardware(name: &str) -> Result<String, Box<dyn Error>> {
    use ibgda::nic::mlx5::{Mlx5Backend, Mlx5Device};
    let open = || Device::open(Mlx5Backend::new(Mlx5Device::open(Some(name))?));
    let (a, b) = (open()?, open()?);
    transfer(&a, &b)?;
    Ok(format!(
        "WRITE, READ, fetch-and-add on {name} (mlx5 backend: {})",
        a.backend().name()
    ))
}

#[cfg(not(feature = "mlx5"))]
fn hardware(name: &str) -> Result<String, Box<dyn Error>> {
    Err(
        format!("--nic {name}: a device name needs the mlx5 backend (build with --features mlx5)")
            .into(),
    )
}

/// Host a writes to, reads from and adds to host b's memory through an RC queue pair,
/// every byte checked.
fn transfer<B: Backend>(a: &Device<B>, b: &Device<B>) -> Result<(), Box<dyn Error>> {
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

    let (local, remote) = (local.to_vec(), remote.to_vec());
    let checks = [
        ("WRITE", &remote[128..136], &payload[..]),
        ("READ", &local[..17], &b"hello from host b"[..]),
        (
            "the atomic's old value",
            &local[256..264],
            &40u64.to_be_bytes()[..],
        ),
        (
            "the atomic's new value",
            &remote[64..72],
            &42u64.to_be_bytes()[..],
        ),
    ];
    for (what, found, expected) in checks {
        if found != expected {
            return Err(format!("{what}: found {found:02x?}, expected {expected:02x?}").into());
        }
    }
    Ok(())
}
