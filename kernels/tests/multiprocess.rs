//! Ranks in processes of their own, without a GPU: each rank a process (this test binary
//! started again, one per rank, by the multi-process launcher) with its own fabric
//! numbered for its rank, joined over a TCP bootstrap on loopback; each connects its queue
//! pairs and exchanges its windows as threads of one process do, then exchanges its rank
//! record (its registrations with the IPC exports of their buffers, its queue pairs) and
//! builds its CUDA software NIC's tables over its own objects and its peers' (mapped by a
//! host stand-in of the IPC import). The "device" memory is host memory standing in
//! (never dereferenced: no kernel runs). What these tables become on the GPU is the GPU
//! script's multi-process MoE run.

use std::net::{SocketAddr, TcpListener};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

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
use ibgda_kernels::cudanic::process_nic_builder;
use ibgda_kernels::experiments::moe_process::{join, launch, RankExit, NVLS_OFF};
use ibgda_kernels::gpu::GpuError;
use ibgda_kernels::ipc::IpcExport;
use ibgda_kernels::multiprocess::{
    exchange, rank_lid, rank_queue_numbers, rank_record, remote_ranks, RankRecord, RemoteRank,
    QUEUE_NUMBERS_PER_RANK,
};
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

const WINDOW_BYTES: usize = 4096;

struct Rank {
    window: Window,
    _region: MemoryRegion<SoftGpuNic>,
    queues: Vec<QueuePair<Rc, GpuPlaced, GpuReleaseStore>>,
    device: Device<SoftGpuNic>,
}

/// Rank `b.rank()` on `fabric`: a queue pair to every rank, one window, as `setup_rank`
/// makes them.
fn setup(b: &dyn Bootstrap, fabric: &Fabric) -> Rank {
    let lid = rank_lid(b.rank()).expect("a LID");
    let nic = SoftGpuNic::open(fabric, lid, Arc::new(StandIn)).expect("nic");
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
    // The window from offset 64 of its buffer: regions need not start their buffer.
    let region = pd
        .register_memory(
            RegisterMemory::Gpu {
                buffer: Arc::new(stand_in(WINDOW_BYTES + 64)),
                offset: 64,
                len: WINDOW_BYTES,
            },
            MemoryAccess::LOCAL_WRITE | MemoryAccess::REMOTE_WRITE | MemoryAccess::REMOTE_ATOMIC,
        )
        .expect("region");
    let window = exchange_window(b, &region, 0).expect("window");
    Rank {
        window,
        _region: region,
        queues,
        device,
    }
}

/// A stand-in export: a handle naming the rank and the buffer, as the GPU's would.
fn fake_export(rank: usize) -> impl FnMut(&DeviceBuffer) -> Result<IpcExport, GpuError> {
    move |b| {
        let mut handle = [0u8; 64];
        handle[..8].copy_from_slice(&(rank as u64).to_be_bytes());
        handle[8..16].copy_from_slice(&b.addr().to_be_bytes());
        Ok(IpcExport {
            handle,
            offset: 0,
            len: b.len() as u64,
            gpu: 0,
        })
    }
}

/// The stand-in import: host memory of the exported length (a mapping at another
/// address than the exporter's, as an IPC mapping is).
fn fake_import(e: &IpcExport) -> Result<Arc<DeviceBuffer>, GpuError> {
    Ok(Arc::new(stand_in(e.len as usize)))
}

/// Everything a rank checks of its records and its NIC's tables.
fn check_rank(b: &dyn Bootstrap, rank: &Rank, records: &[RankRecord], remotes: &[RemoteRank]) {
    let (me, n) = (b.rank(), b.size());
    assert_eq!(records.len(), n);
    for (r, rec) in records.iter().enumerate() {
        assert_eq!(rec.rank as usize, r);
        assert_eq!(rec.lid, rank_lid(r).expect("lid"));
        // Each rank's queue pairs are numbered in its own range.
        let first = rank_queue_numbers(r).expect("range").get();
        assert_eq!(rec.queue_pairs.len(), n, "rank {r}: a queue pair per rank");
        for q in &rec.queue_pairs {
            assert!(
                (first..first + QUEUE_NUMBERS_PER_RANK).contains(&q.qpn),
                "rank {r}'s queue pair {:#x}",
                q.qpn
            );
            assert!(q.ready);
        }
        // The window exchange and the record name the same registration.
        assert_eq!(rec.regions.len(), 1, "rank {r}: the window's registration");
        let w = rank.window.peers()[r];
        assert_eq!(
            (rec.regions[0].addr, rec.regions[0].rkey, rec.regions[0].len),
            (w.addr, w.rkey.0, WINDOW_BYTES as u64)
        );
        assert_eq!(rec.regions[0].offset, 64);
    }
    let queues: Vec<_> = rank.queues.iter().collect();
    let builder =
        process_nic_builder(rank.device.backend(), &queues, remotes, n, 16 << 10).expect("NIC");
    let tables = builder.tables();
    assert_eq!(tables.len(), n, "one engine per queue pair");
    let my_lid = rank_lid(me).expect("lid");
    let mine = &records[me];
    for t in &tables {
        // This rank's node first, then every peer's in rank order.
        let mut lids = vec![u32::from(my_lid)];
        lids.extend(
            (0..n)
                .filter(|&r| r != me)
                .map(|r| u32::from(rank_lid(r).expect("lid"))),
        );
        assert_eq!(t.nodes.iter().map(|x| x.lid).collect::<Vec<_>>(), lids);
        // Every peer's window: named at the peer's address, its bytes at this process's
        // mapping of the peer's buffer (the stand-in), under the peer's keys.
        for remote in remotes {
            let node = t
                .nodes
                .iter()
                .position(|x| x.lid == u32::from(remote.lid))
                .expect("the peer's node") as u32;
            let rr = &remote.regions[0];
            let found = t
                .regions
                .iter()
                .find(|x| x.node == node && x.rkey == rr.record.rkey)
                .expect("the peer's region");
            assert_eq!(found.start, rr.record.addr);
            assert_eq!(found.base, rr.buffer.addr() + 64);
            assert_ne!(
                found.base, found.start,
                "the mapping is not the exporter's address"
            );
            assert_eq!(found.len, WINDOW_BYTES as u64);
            assert_eq!(
                Access::from_bits_truncate(found.access),
                Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC
            );
        }
    }
    // Each queue pair: to itself a local pair; to a peer connected to that peer's queue
    // pair for this rank, whose receive side is a record of this NIC on the peer's node.
    for (peer, qp) in rank.queues.iter().enumerate() {
        let qpn = qp.device_qpn().get();
        let (e, q) = tables
            .iter()
            .enumerate()
            .find_map(|(e, t)| t.queues.iter().find(|q| q.qpn == qpn).map(|q| (e, *q)))
            .expect("the queue");
        assert_eq!(q.state, state::READY);
        assert_eq!(q.node, 0);
        assert_eq!(q.ring, qp.sq_memory().ring().addr);
        let theirs = records[peer]
            .queue_pairs
            .iter()
            .find(|x| x.peer == Some(qpn))
            .expect("the peer's queue pair for this rank")
            .qpn;
        assert_eq!(q.peer, theirs, "rank {me} to {peer}");
        assert!(mine
            .queue_pairs
            .iter()
            .any(|x| x.qpn == qpn && x.peer == Some(theirs)));
        let responder = tables[e]
            .responders
            .iter()
            .find(|x| x.number == theirs)
            .expect("the peer's receive side on the queue's engine");
        let peer_node = tables[e]
            .nodes
            .iter()
            .position(|x| x.lid == u32::from(rank_lid(peer).expect("lid")))
            .expect("node") as u32;
        assert_eq!(responder.node, peer_node);
        assert_eq!((responder.cq, responder.credits), (NIC_NONE, 0));
    }
    assert_eq!(tables.iter().map(|t| t.queues.len()).sum::<usize>(), n);
}

const ENV_RANK: &str = "IBGDA_MULTIPROCESS_TEST_RANK";
const ENV_SIZE: &str = "IBGDA_MULTIPROCESS_TEST_SIZE";
const ENV_ROOT: &str = "IBGDA_MULTIPROCESS_TEST_ROOT";

/// One rank in a process of its own (started by the test below, which sets its rank,
/// the size and the root in the environment; without them it does nothing).
#[test]
#[ignore = "one rank of ranks_in_processes_exchange_records_and_build_their_nics, which starts it"]
fn rank_in_a_process() {
    let (Ok(rank), Ok(size), Ok(root)) = (
        std::env::var(ENV_RANK),
        std::env::var(ENV_SIZE),
        std::env::var(ENV_ROOT),
    ) else {
        return;
    };
    let (rank, size): (usize, usize) = (rank.parse().expect("rank"), size.parse().expect("size"));
    let root: SocketAddr = root.parse().expect("root");
    // The launcher's environment reached this process.
    for (k, v) in NVLS_OFF {
        assert_eq!(std::env::var(k).as_deref(), Ok(v), "{k}");
    }
    let b = join(rank, size, root, Duration::from_secs(60)).expect("join");
    let fabric = Fabric::with_first_queue_number(rank_queue_numbers(rank).expect("range"));
    let r = setup(&b, &fabric);
    let record = rank_record(rank, r.device.backend(), &mut fake_export(rank)).expect("record");
    let records = exchange(&b, &record).expect("exchange");
    let remotes = remote_ranks(&records, rank, &mut fake_import).expect("remotes");
    check_rank(&b, &r, &records, &remotes);
    // Every rank got here: rank 0 says so.
    let done = b.all_gather(&[1]).expect("done");
    assert_eq!(done, vec![vec![1]; size]);
    println!("rank {rank}: records exchanged, NIC tables checked");
}

#[test]
fn ranks_in_processes_exchange_records_and_build_their_nics() {
    let exe = std::env::current_exe().expect("this test binary");
    let probe = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let root = probe.local_addr().expect("addr");
    drop(probe);
    let size = 3;
    let logs = std::env::temp_dir().join(format!("ibgda-multiprocess-{}", std::process::id()));
    std::fs::create_dir_all(&logs).expect("a log directory");
    let log = |r: usize| logs.join(format!("rank-{r}.log"));
    let exits = launch(
        size,
        &|r| {
            let mut c = Command::new(&exe);
            c.args([
                "--exact",
                "rank_in_a_process",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ENV_RANK, r.to_string())
            .env(ENV_SIZE, size.to_string())
            .env(ENV_ROOT, root.to_string())
            .stdout(std::fs::File::create(log(r)).expect("a log"));
            c
        },
        Duration::from_secs(120),
        Duration::from_secs(20),
    )
    .expect("launch");
    for (r, e) in exits.iter().enumerate() {
        let out = std::fs::read_to_string(log(r)).unwrap_or_default();
        assert!(
            matches!(e, RankExit::Exited(s) if s.success()),
            "rank {r}: {e:?}\n{out}"
        );
        // The rank ran (a child without its environment would pass doing nothing).
        assert!(
            out.contains(&format!("rank {r}: records exchanged, NIC tables checked")),
            "rank {r}:\n{out}"
        );
    }
    let _ = std::fs::remove_dir_all(&logs);
}

/// `n` ranks as threads, each on a fabric of its own (`first(rank)` its first queue
/// number), exchanging records over a local bootstrap; `f` gets each rank's view.
fn threads<T: Send>(
    n: usize,
    first: impl Fn(usize) -> Fabric + Sync,
    f: impl Fn(&dyn Bootstrap, &Rank, Vec<RankRecord>) -> T + Sync,
) -> Vec<T> {
    let group = LocalBootstrap::group(n);
    std::thread::scope(|s| {
        let jobs: Vec<_> = group
            .iter()
            .map(|b| {
                let (first, f) = (&first, &f);
                s.spawn(move || {
                    let fabric = first(b.rank());
                    let r = setup(b, &fabric);
                    let record =
                        rank_record(b.rank(), r.device.backend(), &mut fake_export(b.rank()))
                            .expect("record");
                    let records = exchange(b, &record).expect("exchange");
                    f(b, &r, records)
                })
            })
            .collect();
        jobs.into_iter().map(|j| j.join().expect("rank")).collect()
    })
}

fn ranged(rank: usize) -> Fabric {
    Fabric::with_first_queue_number(rank_queue_numbers(rank).expect("range"))
}

fn nic_error(b: &dyn Bootstrap, r: &Rank, records: &[RankRecord]) -> String {
    let remotes = remote_ranks(records, b.rank(), &mut fake_import).expect("remotes");
    let queues: Vec<_> = r.queues.iter().collect();
    process_nic_builder(r.device.backend(), &queues, &remotes, 2, 4096)
        .map(|_| ())
        .expect_err("refused")
        .to_string()
}

#[test]
fn a_peer_not_connected_back_or_missing_is_refused() {
    let errors = threads(2, ranged, |b, r, mut records| {
        let other = 1 - b.rank();
        let missing = {
            let mut without = records.clone();
            without[other].lid = 99;
            nic_error(b, r, &without)
        };
        // The peer's queue pair for this rank says it is connected elsewhere.
        let mine: Vec<u32> = r.queues.iter().map(|q| q.device_qpn().get()).collect();
        for q in &mut records[other].queue_pairs {
            if q.peer.is_some_and(|p| mine.contains(&p)) {
                q.peer = Some(0x42);
            }
        }
        (missing, nic_error(b, r, &records))
    });
    for (missing, elsewhere) in errors {
        assert!(missing.contains("is on no rank given"), "{missing}");
        assert!(elsewhere.contains("is not connected back"), "{elsewhere}");
    }
}

#[test]
fn ranks_whose_queue_numbers_meet_are_refused() {
    // Every rank on a fabric numbered from the same first number: a peer's queue pair
    // has this rank's number, which would name two queue pairs in one table.
    let errors = threads(
        2,
        |_| Fabric::new(),
        |b, r, records| nic_error(b, r, &records),
    );
    for e in errors {
        assert!(e.contains("already on the NIC"), "{e}");
    }
}

#[test]
fn a_region_named_at_an_address_incongruent_with_its_mapping_is_refused() {
    use ibgda::wqe::{LKey, RKey};
    use ibgda_kernels::softnic::builder::DeviceNicBuilder;
    let mut nic = DeviceNicBuilder::new();
    let _local = nic.node(1).expect("node");
    let peer = nic.node(2).expect("node");
    let buffer = Arc::new(stand_in(4096));
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let keys = (LKey(0x2_0100), RKey(0x2_0101));
    let e = nic
        .remote_region(peer, &buffer, 0, 4096, rw, 0x7000_0004, keys)
        .expect_err("not congruent mod 8");
    assert!(e.to_string().contains("not congruent mod 8"), "{e}");
    let e = nic
        .remote_region(peer, &buffer, 0, 4096, rw, u64::MAX - 8, keys)
        .expect_err("past the end");
    assert!(e.to_string().contains("past the end"), "{e}");
    let ok = nic
        .remote_region(peer, &buffer, 8, 64, rw, 0x7000_0008, keys)
        .expect("a remote region");
    assert_eq!(ok.addr, 0x7000_0008, "named at the peer's address");
    nic.engine();
    let t = nic.tables();
    let r = t[0].regions[0];
    assert_eq!(
        (r.start, r.base, r.len),
        (0x7000_0008, buffer.addr() + 8, 64)
    );
    assert_eq!(r.node, peer.index());
}
