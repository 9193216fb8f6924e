//! Support for the control-plane suite: the backend under test (`IBGDA_NIC`), two "hosts"
//! on it, and a small runner that reports cases ignored on a backend with the reason.
//!
//! `IBGDA_NIC` unset or `soft`: the software NIC with InfiniBand ports (a fresh fabric per
//! case, an engine thread stepping it). `IBGDA_NIC=soft-roce`: the same with RoCE v2
//! ports (each host a MAC and an IPv4 address, the GID table the kernel would build). `IBGDA_NIC=<device>`: the mlx5 backend on that device, when this
//! test binary is built with the `mlx5` feature; without it, or without the device, every
//! case is reported ignored with the reason.
//!
//! With `IBGDA_REQUIRE_EMU=1` (CI: `scripts/test` sets it for every run of the suite), a
//! case may be ignored only for a reason on [`ALLOWED_IGNORES`]: what cannot apply to the
//! backend by its nature. Anything else (no device, a backend without the mlx5 feature, an
//! operation the backend reports unsupported) fails the case, so that a broken emulator
//! fails CI instead of turning every case into "ignored".

#![allow(dead_code)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibgda::memory::DmaBuffer;
use ibgda::nic::{roce, Backend, Device, LinkLayer, MemoryAccess, MemoryRegion, NicError, SoftNic};
use ibgda::queue::{PollError, Polled, QueuePair, RecoveryError};
use ibgda::softnic::{EngineHandle, Fabric};
use ibgda::wqe::{Qpn, Transport};

/// How long a case waits for a completion.
pub const WAIT: Duration = Duration::from_secs(10);

/// Every access right.
pub const ALL: MemoryAccess = MemoryAccess::LOCAL_WRITE
    .union(MemoryAccess::REMOTE_WRITE)
    .union(MemoryAccess::REMOTE_READ)
    .union(MemoryAccess::REMOTE_ATOMIC);

/// Why a case did not pass.
#[derive(Debug)]
pub enum CaseError {
    /// The case cannot apply to this backend by the backend's nature (the reason is
    /// printed): ignored even in a required run, if [`ALLOWED_IGNORES`] lists the case
    /// with this kind.
    NotApplicable(NotApplicable, String),
    /// The case could not run here (the reason is printed): a required run fails it.
    Ignored(String),
    /// The case failed.
    Failed(String),
}

/// What makes a case inapplicable to a backend, where no machine or emulator could change
/// that: the kinds [`ALLOWED_IGNORES`] pairs with cases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotApplicable {
    /// GPU-placed queues: this binary links no CUDA (and CI has no GPU); kernels'
    /// `nic_suite_gpu` runs them on a GPU machine, over the emulator's GPU build or a
    /// ConnectX.
    NoGpu,
    /// RoCE v2 behaviour (UDP source ports) on an InfiniBand port, which sends no UDP: the
    /// case runs on RoCE ports (`IBGDA_NIC=soft-roce`, the emulator with `link_layer =
    /// ethernet`).
    InfiniBandPort,
    /// A compact address vector (LID-routed InfiniBand only) on a RoCE port, whose paths
    /// need the GRH of the full one: the case runs on InfiniBand ports.
    RocePort,
}

/// The only ignores a required run (`IBGDA_REQUIRE_EMU=1`) accepts: each case with the one
/// kind of inapplicability it may be ignored for. Every other case runs on every backend
/// CI tests, and each of these runs on the other port type (the GPU case on a GPU machine).
pub const ALLOWED_IGNORES: &[(&str, NotApplicable)] = &[
    ("gpu_placed_queues", NotApplicable::NoGpu),
    (
        "roce_rc_queue_pairs_get_their_own_udp_source_ports",
        NotApplicable::InfiniBandPort,
    ),
    ("dci_compact_av_reaches_dct", NotApplicable::RocePort),
];

/// The setting that makes every case required to run or be allowed its ignore.
pub const REQUIRE_ENV: &str = "IBGDA_REQUIRE_EMU";

/// A control-plane error fails the case, except that something the backend does not
/// support makes the case not apply to it (reported ignored with the backend's reason).
impl From<NicError> for CaseError {
    fn from(e: NicError) -> Self {
        match e {
            NicError::Unsupported { .. } => Self::Ignored(e.to_string()),
            NicError::Backend(ref backend) if backend.is_unsupported() => {
                Self::Ignored(e.to_string())
            }
            other => Self::Failed(other.to_string()),
        }
    }
}

macro_rules! fails_the_case {
    ($($error:ty),* $(,)?) => {
        $(impl From<$error> for CaseError {
            fn from(e: $error) -> Self {
                Self::Failed(e.to_string())
            }
        })*
    };
}

fails_the_case!(
    std::io::Error,
    ibgda::memory::DmaError,
    ibgda::wqe::WqeError,
    ibgda::queue::PostError,
    ibgda::queue::WaitError,
    ibgda::queue::PollError,
    ibgda::nic::ConnectionError,
    RecoveryError,
);

/// A case's result.
pub type CaseResult = Result<(), CaseError>;

/// A backend under test: two hosts' devices and what the control plane cannot do alone.
pub trait Harness: Send + Sync {
    /// The backend.
    type Backend: Backend;
    /// What the harness runs on, for the report.
    fn describe(&self) -> String;
    /// Opens host `host`'s device (0 or 1; on hardware both may be the same NIC).
    fn open(&self, host: u8) -> Result<Device<Self::Backend>, NicError>;
    /// What is still allocated on `device` after every handle made from it was dropped,
    /// where the backend can tell (`None`: nothing, or it cannot tell).
    fn outstanding(&self, device: &Device<Self::Backend>) -> Option<String>;
    /// Why GPU-placed queues cannot be tested on this harness.
    fn gpu_unavailable(&self) -> String;
    /// The RoCE v2 UDP source port the NIC holds for RC queue pair `qpn` (read back from
    /// the NIC), or why this backend cannot tell.
    fn udp_source_port(&self, device: &Device<Self::Backend>, qpn: Qpn) -> Result<u16, String>;
}

/// The UDP source port a software NIC's queue pair was connected with.
fn soft_udp_source_port(device: &Device<SoftNic>, qpn: Qpn) -> Result<u16, String> {
    match device
        .backend()
        .fabric()
        .qp_status(qpn)
        .and_then(|s| s.peer_path)
    {
        Some(ibgda::softnic::PeerPath::Roce(path)) => Ok(path.udp_source_port),
        other => Err(format!("queue pair {qpn:?} has no RoCE path: {other:?}")),
    }
}

/// The software NIC: a fresh fabric with an engine thread.
pub struct SoftHarness {
    fabric: Fabric,
    _engine: EngineHandle,
}

impl SoftHarness {
    /// A new fabric with its engine running.
    pub fn new() -> Self {
        let fabric = Fabric::new();
        let engine = fabric.spawn_engine();
        Self {
            fabric,
            _engine: engine,
        }
    }
}

impl Harness for SoftHarness {
    type Backend = SoftNic;
    fn describe(&self) -> String {
        "software NIC".into()
    }
    fn open(&self, host: u8) -> Result<Device<SoftNic>, NicError> {
        Device::open(SoftNic::open(&self.fabric, u16::from(host) + 1)?)
    }
    fn outstanding(&self, device: &Device<SoftNic>) -> Option<String> {
        let allocated = device.backend().allocated();
        let census = self.fabric.census();
        let clean = allocated == Default::default()
            && census.queue_pairs == 0
            && census.dc_targets == 0
            && census.completion_queues == 0
            && census.regions == 0
            && census.shared_receive_queues == 0;
        (!clean).then(|| format!("{allocated:?}, {census:?}"))
    }
    fn gpu_unavailable(&self) -> String {
        "the CPU software NIC serves host-placed queues; GPU-placed ones run on the CUDA software NIC (kernels) and on hardware".into()
    }
    fn udp_source_port(&self, device: &Device<SoftNic>, qpn: Qpn) -> Result<u16, String> {
        soft_udp_source_port(device, qpn)
    }
}

/// The software NIC with RoCE v2 ports: host `h` has MAC `02:00:00:00:00:0h+1` and IPv4
/// address `10.0.0.h+1`, and the GID table the kernel builds for them.
pub struct SoftRoceHarness {
    soft: SoftHarness,
}

impl SoftRoceHarness {
    /// A new fabric with its engine running.
    pub fn new() -> Self {
        Self {
            soft: SoftHarness::new(),
        }
    }
}

impl Harness for SoftRoceHarness {
    type Backend = SoftNic;
    fn describe(&self) -> String {
        "software NIC, RoCE v2".into()
    }
    fn open(&self, host: u8) -> Result<Device<SoftNic>, NicError> {
        let mac = [0x02, 0, 0, 0, 0, host + 1];
        let gids = roce::kernel_gid_table(mac, &[[10, 0, 0, host + 1]]);
        let device = Device::open(SoftNic::open_roce(&self.soft.fabric, mac, gids)?)?;
        assert_eq!(device.port().link_layer, LinkLayer::Ethernet);
        Ok(device)
    }
    fn outstanding(&self, device: &Device<SoftNic>) -> Option<String> {
        self.soft.outstanding(device)
    }
    fn gpu_unavailable(&self) -> String {
        self.soft.gpu_unavailable()
    }
    fn udp_source_port(&self, device: &Device<SoftNic>, qpn: Qpn) -> Result<u16, String> {
        soft_udp_source_port(device, qpn)
    }
}

/// A registered buffer of `len` bytes filled with `fill`.
pub struct Area<B: Backend> {
    pub buffer: Arc<DmaBuffer>,
    pub region: MemoryRegion<B>,
}

impl<B: Backend> Area<B> {
    pub fn new(
        pd: &ibgda::nic::ProtectionDomain<B>,
        len: usize,
        fill: u8,
        access: MemoryAccess,
    ) -> Result<Self, CaseError> {
        let buffer = Arc::new(DmaBuffer::zeroed(len, 4096)?);
        buffer.fill(0, len, fill)?;
        let region = pd.register(buffer.clone(), 0, len, access)?;
        Ok(Self { buffer, region })
    }
    pub fn bytes(&self, offset: usize, len: usize) -> Vec<u8> {
        self.buffer.to_vec()[offset..offset + len].to_vec()
    }
    pub fn u64_at(&self, offset: usize) -> u64 {
        u64::from_be_bytes(self.bytes(offset, 8).try_into().unwrap())
    }
    pub fn u32_at(&self, offset: usize) -> u32 {
        u32::from_be_bytes(self.bytes(offset, 4).try_into().unwrap())
    }
}

/// Polls `qp` until `count` completions (successes or errors) arrived, or fails after
/// [`WAIT`].
pub fn poll_n<T: Transport>(
    qp: &mut QueuePair<T>,
    count: usize,
) -> Result<Vec<Result<Polled, PollError>>, CaseError> {
    let start = Instant::now();
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        match qp.poll() {
            Ok(Some(polled)) => out.push(Ok(polled)),
            Ok(None) => {
                if start.elapsed() > WAIT {
                    return Err(CaseError::Failed(format!(
                        "{} of {count} completions after {WAIT:?}: {out:?}",
                        out.len()
                    )));
                }
                std::thread::yield_now();
            }
            Err(e) => out.push(Err(e)),
        }
    }
    Ok(out)
}

/// Fails the case with `what` unless `ok`.
pub fn check(ok: bool, what: impl FnOnce() -> String) -> CaseResult {
    if ok {
        Ok(())
    } else {
        Err(CaseError::Failed(what()))
    }
}

/// Fails the case unless `found == expected`.
pub fn check_eq<T: PartialEq + std::fmt::Debug>(found: T, expected: T, what: &str) -> CaseResult {
    check(found == expected, || {
        format!("{what}: found {found:?}, expected {expected:?}")
    })
}

/// One case of the suite: a name and a function generic over the harness.
pub struct Case<H: Harness> {
    pub name: &'static str,
    pub run: fn(&H) -> CaseResult,
}

/// Runs `cases` on harnesses made by `harness` (one per case), honouring `--list` and a
/// name filter, printing one line per case and a summary; fails if any case failed, and
/// (with `IBGDA_REQUIRE_EMU=1`) if any was ignored for a reason [`ALLOWED_IGNORES`] does
/// not give it.
pub fn run_suite<H: Harness>(
    cases: &[Case<H>],
    harness: impl Fn() -> Result<H, String>,
) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for case in cases {
            println!("{}: test", case.name);
        }
        return ExitCode::SUCCESS;
    }
    let exact = args.iter().any(|a| a == "--exact");
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let selected: Vec<&Case<H>> = cases
        .iter()
        .filter(|c| {
            filters.is_empty()
                || filters.iter().any(|f| {
                    if exact {
                        c.name == f.as_str()
                    } else {
                        c.name.contains(f.as_str())
                    }
                })
        })
        .collect();
    let required = crate::case_report::required(REQUIRE_ENV);
    run_cases(&selected, harness, required.as_deref()).finish()
}

/// Runs `selected`, each on a harness of its own, and tallies them: with `required`
/// (`IBGDA_REQUIRE_EMU=1`), an ignore not on [`ALLOWED_IGNORES`] (a harness that cannot be
/// made, an unsupported operation, an inapplicability the case is not listed with) fails.
pub fn run_cases<H: Harness>(
    selected: &[&Case<H>],
    harness: impl Fn() -> Result<H, String>,
    required: Option<&str>,
) -> crate::case_report::Tally {
    use crate::case_report::{Ran, Tally};
    println!("\nrunning {} tests", selected.len());
    let mut tally = Tally::default();
    for case in selected {
        let outcome = match harness() {
            Err(reason) => Err(CaseError::Ignored(reason)),
            Ok(h) => match catch_unwind(AssertUnwindSafe(|| (case.run)(&h))) {
                Ok(result) => result,
                Err(panic) => Err(CaseError::Failed(
                    panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "panicked".into()),
                )),
            },
        };
        let ran = match outcome {
            Ok(()) => Ran::Passed,
            Err(CaseError::NotApplicable(kind, reason)) => Ran::Ignored {
                allowed: ALLOWED_IGNORES.contains(&(case.name, kind)),
                reason: format!("{reason} ({kind:?})"),
            },
            Err(CaseError::Ignored(reason)) => Ran::Ignored {
                reason,
                allowed: false,
            },
            Err(CaseError::Failed(why)) => Ran::Failed(why),
        };
        tally.record(case.name, ran, required);
    }
    tally
}

/// Which backend `IBGDA_NIC` selects.
pub enum Selection {
    /// The software NIC (InfiniBand ports).
    Soft,
    /// The software NIC with RoCE v2 ports.
    SoftRoce,
    /// The mlx5 device of this name.
    Hardware(String),
}

impl Selection {
    /// Reads `IBGDA_NIC`: unset, empty or `soft` is the software NIC, `soft-roce` the
    /// software NIC with RoCE ports, anything else a device name.
    pub fn from_env() -> Self {
        match std::env::var("IBGDA_NIC") {
            Ok(name) if name == "soft-roce" => Self::SoftRoce,
            Ok(name) if !name.is_empty() && name != "soft" => Self::Hardware(name),
            _ => Self::Soft,
        }
    }
}

/// The hardware backend, where this build has it.
pub mod hardware {
    #[cfg(not(feature = "mlx5"))]
    pub fn run(name: &str) -> std::process::ExitCode {
        println!("nic_suite: backend = mlx5 device {name}");
        let reason = format!(
            "IBGDA_NIC={name} asks for the mlx5 backend, which this build lacks (build the suite with --features mlx5)"
        );
        super::run_suite(
            &crate::cases::<super::SoftHarness>(),
            || Err(reason.clone()),
        )
    }

    #[cfg(feature = "mlx5")]
    #[allow(unused_imports)] // tests/suite_rules.rs includes the runner without calling it
    pub use self::mlx5::run;

    #[cfg(feature = "mlx5")]
    mod mlx5 {
        use std::process::ExitCode;

        use ibgda::nic::mlx5::{Mlx5Backend, Mlx5Device};
        use ibgda::nic::{Device, NicError};

        use super::super::{run_suite, Harness};

        /// Both hosts are the same ConnectX, reached through two device contexts: the
        /// traffic loops back through its port.
        pub struct Mlx5Harness {
            name: String,
        }

        impl Harness for Mlx5Harness {
            type Backend = Mlx5Backend;
            fn describe(&self) -> String {
                format!("mlx5 device {}", self.name)
            }
            fn open(&self, _host: u8) -> Result<Device<Mlx5Backend>, NicError> {
                Device::open(Mlx5Backend::new(Mlx5Device::open(Some(&self.name))?))
            }
            fn outstanding(&self, _: &Device<Mlx5Backend>) -> Option<String> {
                emulated_outstanding()
            }
            fn gpu_unavailable(&self) -> String {
                "this binary links no CUDA: GPU-placed queues through the control plane run in ibgda-kernels' nic_suite_gpu (IBGDA_NIC set, on a GPU machine; over the emulator's GPU build, IBGDA_EMU_FEATURES=cuda)".into()
            }
            fn udp_source_port(
                &self,
                _: &Device<Mlx5Backend>,
                qpn: ibgda::wqe::Qpn,
            ) -> Result<u16, String> {
                emulated_udp_source_port(qpn)
            }
        }

        /// On the emulated ConnectX, the UDP source port it holds for `qpn`
        /// (`ibgda_emu_udp_source_port`); a ConnectX cannot tell here (the mlx5 backend
        /// sends no QUERY_QP).
        fn emulated_udp_source_port(qpn: ibgda::wqe::Qpn) -> Result<u16, String> {
            type UdpSourcePort = unsafe extern "C" fn(u32) -> libc::c_int;
            let absent = || {
                "the mlx5 backend does not read a queue pair's context back (no QUERY_QP), \
                 and libibverbs.so.1 is not the emulated ConnectX (no ibgda_emu_udp_source_port)"
                    .to_owned()
            };
            // SAFETY: the libibverbs.so.1 this process already loaded (no initialiser runs).
            let lib =
                unsafe { libloading::Library::new("libibverbs.so.1") }.map_err(|_| absent())?;
            // SAFETY: the emulator's entry point of this type, if the library is the emulator.
            let port = unsafe { lib.get::<UdpSourcePort>(b"ibgda_emu_udp_source_port\0") }
                .map_err(|_| absent())?;
            // SAFETY: it reads only its argument.
            let port = unsafe { port(qpn.get()) };
            u16::try_from(port).map_err(|_| {
                format!(
                    "the emulator holds no UDP source port for {qpn:?} (errno {})",
                    -port
                )
            })
        }

        /// On the emulated ConnectX (`emu/`), what it still holds after a teardown; a
        /// ConnectX cannot tell (`None`).
        fn emulated_outstanding() -> Option<String> {
            type Outstanding = unsafe extern "C" fn(*mut libc::c_char, usize) -> libc::c_int;
            // SAFETY: the libibverbs.so.1 this process already loaded (no initialiser runs).
            let lib = unsafe { libloading::Library::new("libibverbs.so.1") }.ok()?;
            // SAFETY: the emulator's entry point of this type, if the library is the emulator.
            let outstanding = unsafe { lib.get::<Outstanding>(b"ibgda_emu_outstanding\0") }.ok()?;
            let mut text = [0 as libc::c_char; 256];
            // SAFETY: a buffer of the length given.
            let count = unsafe { outstanding(text.as_mut_ptr(), text.len()) };
            // SAFETY: NUL-terminated by the call.
            let text = unsafe { std::ffi::CStr::from_ptr(text.as_ptr()) }.to_string_lossy();
            (count != 0).then(|| format!("the emulated device holds {text}"))
        }

        pub fn run(name: &str) -> ExitCode {
            println!("nic_suite: backend = mlx5 device {name}");
            let name = name.to_string();
            run_suite(&crate::cases::<Mlx5Harness>(), || {
                // No device (or no libraries) reports every case ignored with the typed
                // error's message.
                Mlx5Device::open(Some(&name))
                    .map(|_| Mlx5Harness { name: name.clone() })
                    .map_err(|e| e.to_string())
            })
        }
    }
}
