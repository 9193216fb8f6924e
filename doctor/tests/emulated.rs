//! `ibgda-doctor` on the emulated ConnectX (`emu/`), once healthy and once per bring-up
//! fault, each run a process of its own with the emulator configured for it
//! (`IBGDA_EMU_CONFIG_TEXT`): every row's status, the values in its result, its remedy
//! (where the remedy is the mlx5 backend's message, the message of the typed error built
//! here as the backend builds it), and the exit status.
//!
//! The `libraries` and `dmabuf_api` rows fail on real loader setups, not on facts made up:
//! the emulator built to export only what rdma-core 21, 33 or 34 exports
//! (`IBGDA_EMU_RDMA_CORE=<release> scripts/build-emulated-nic`, next to the emulator in
//! `<emu>/../rdma-core-<release>/lib`), and a loader path holding the emulator's
//! `libibverbs.so.1` alone, so that `libmlx5.so.1` is the host's own (another rdma-core,
//! which does not load over the emulator's private symbols) or absent; the loader's own
//! message for that load is found by this binary in a process of its own and must be what
//! the row reports.
//!
//! The GPU rows' faults (`fault.umem_reg_dmabuf`, `fault.reg_dmabuf_mr`,
//! `fault.uar_gpu_mapping`) act only where a GPU context exists: each has a case for a host
//! without a GPU (every GPU row skipped for want of one, the fault changing nothing else),
//! and the two a GPU row reports have a case for the GPU machine (`..._on_a_gpu`), reported
//! ignored on a host without a CUDA driver (even under `IBGDA_REQUIRE_EMU=1`, which demands
//! the emulator, not a GPU). Their expectations are for the plain emulator build (as
//! `<target>/emu/lib` is), whose UMEMs never reach GPU memory. The doctor never calls
//! `ibv_reg_dmabuf_mr` (the `dmabuf_api` row looks the symbol up), so `fault.reg_dmabuf_mr`
//! reaches no row on any host.
//!
//! The emulator is found at `<target>/emu/lib` (`scripts/build-emulated-nic` builds it) or
//! `$IBGDA_EMU_LIB_DIR`. Without it every case is reported ignored, unless
//! `IBGDA_REQUIRE_EMU=1` (CI), which fails them. The doctor is cargo's build of it, or
//! `$IBGDA_DOCTOR_BIN` (doctor/gpu-run.sh runs this binary's `_on_a_gpu` cases on the GPU
//! machine that way).

#[path = "../../tests/case_report/mod.rs"]
mod case_report;
#[path = "../../tests/emulator_path/mod.rs"]
mod emulator_path;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use ibgda::nic::mlx5::{
    check_atomic_capabilities, Mlx5Error, CUDA_ERROR_NOT_PERMITTED, EPERM, IBVERBS, MLX5,
};
use ibgda::nic::prm::{opcode, CommandStatus, PrmError};
use ibgda::nic::{AtomicEndianness, DeviceCaps, SOFT_NIC_CAPS};
use serde_json::Value;

use emulator_path::{emulator_dir, library_path};

/// How long one doctor run may take.
const RUN_LIMIT: Duration = Duration::from_secs(60);

type Outcome = Result<(), String>;

/// One row's expectation.
struct Expect {
    id: &'static str,
    status: &'static str,
    /// Texts the result contains.
    result: Vec<String>,
    /// Texts the result does not contain.
    absent: Vec<String>,
    /// The remedy: exactly this text, or (with `~` first) containing the rest.
    remedy: Option<String>,
}

fn row(id: &'static str, status: &'static str) -> Expect {
    Expect {
        id,
        status,
        result: Vec::new(),
        absent: Vec::new(),
        remedy: None,
    }
}

impl Expect {
    fn shows(mut self, text: impl Into<String>) -> Self {
        self.result.push(text.into());
        self
    }
    fn hides(mut self, text: impl Into<String>) -> Self {
        self.absent.push(text.into());
        self
    }
    fn remedy(mut self, text: impl Into<String>) -> Self {
        self.remedy = Some(text.into());
        self
    }
    fn remedy_has(mut self, text: &str) -> Self {
        self.remedy = Some(format!("~{text}"));
        self
    }
}

/// The libraries on the loader path.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Libs {
    /// The emulator as `scripts/build-emulated-nic` builds it (rdma-core 56.1's exports).
    Emulator,
    /// The emulator exporting only what this rdma-core release exports.
    RdmaCore(u32),
    /// The emulator's `libibverbs.so.1` alone: `libmlx5.so.1` is whatever else the loader
    /// finds (the host's rdma-core, or nothing); the libraries row's expectation comes
    /// from what the loader says of that load (`loader_says`).
    IbverbsAlone,
}

/// The host a case belongs on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Host {
    Any,
    /// No CUDA driver (the GPU rows are the host's otherwise).
    WithoutGpu,
    /// A CUDA driver and a GPU: the GPU machine.
    WithGpu,
}

struct Case {
    name: &'static str,
    config: &'static str,
    args: Vec<&'static str>,
    env: Vec<(&'static str, &'static str)>,
    exit: i32,
    rows: Vec<Expect>,
    /// A sysfs tree to run on (`--root`), built by this function in the given directory.
    tree: Option<fn(&Path) -> std::io::Result<()>>,
    libs: Libs,
    host: Host,
}

fn case(name: &'static str, config: &'static str, exit: i32, rows: Vec<Expect>) -> Case {
    Case {
        name,
        config,
        args: Vec::new(),
        env: Vec::new(),
        exit,
        rows,
        tree: None,
        libs: Libs::Emulator,
        host: Host::Any,
    }
}

/// The rows after a failed device check, which cannot run.
fn skipped_after_devices(why: &str) -> Vec<Expect> {
    [
        "uar",
        "hca_caps",
        "cqe_version",
        "send_queue",
        "inline",
        "atomics",
        "dc",
        "umem",
        "port",
        "port_address",
    ]
    .into_iter()
    .map(|id| row(id, "skip").shows(format!("cannot run: {why}")))
    .collect()
}

fn caps_with(edit: impl FnOnce(&mut DeviceCaps)) -> DeviceCaps {
    let mut caps = SOFT_NIC_CAPS;
    edit(&mut caps);
    caps
}

fn atomics_error(caps: DeviceCaps) -> String {
    check_atomic_capabilities(&caps)
        .expect_err("the capabilities lack atomics")
        .to_string()
}

fn cases() -> Vec<Case> {
    let healthy_nic = vec![
        row("libraries", "ok").shows("is the emulated ConnectX, ibgda-emu"),
        row("rdma_devices", "ok").shows(
            "mlx5_0 (mlx5); checking mlx5_0 (the first mlx5 device) on the emulated ConnectX",
        ),
        row("devx_context", "ok").shows("opened mlx5_0 with DEVX"),
        row("uar", "ok").shows("allocated and freed a UAR page on mlx5_0 (non-cached, dedicated)"),
        row("hca_caps", "ok").shows("general page read and the atomic page"),
        row("cqe_version", "ok").shows("cqe_version 1"),
        row("send_queue", "ok").shows(format!(
            "RC supported, send queues up to 2^{0} = {1} WQEBBs, CQs up to 2^{2} CQEs",
            SOFT_NIC_CAPS.log_max_qp_size,
            1u32 << SOFT_NIC_CAPS.log_max_qp_size,
            SOFT_NIC_CAPS.log_max_cq_size
        )),
        row("inline", "ok").shows(format!(
            "send WQEs up to {} B: inline payloads up to {} B",
            SOFT_NIC_CAPS.max_send_wqe_bytes,
            SOFT_NIC_CAPS.max_inline()
        )),
        row("atomics", "ok")
            .shows("(4 and 8 bytes)")
            .shows("big-endian (network order)"),
        row("dc", "ok").shows("DC supported, compact (16 B) and full (48 B) address vectors"),
        row("umem", "ok").shows("registered and released 4 KiB of host queue memory on mlx5_0"),
        row("port", "ok").shows("ACTIVE, InfiniBand, active MTU 4096 B"),
        // The emulator's default: LID = device index + 1, GID 0 from the node GUID.
        row("port_address", "ok").shows("LID 0x0001, GID 0 fe80:0000:0000:0000:0c42:a103"),
        row("dmabuf_api", "ok").shows("both present"),
        row("iommu", "ok"),
    ];
    let no_device = Mlx5Error::NoDevice {
        requested: None,
        available: Vec::new(),
        errno: 0,
    };
    let absent = Mlx5Error::NoDevice {
        requested: Some("mlx5_9".into()),
        available: vec!["mlx5_0".into()],
        errno: 0,
    };
    let mut cases = vec![
        case("healthy", "[device mlx5_0]\n", 0, {
            let mut rows = healthy_nic;
            rows.push(row("doorbell_path", "ok").shows("host: no GPU"));
            rows
        }),
        case("no_device", "# no device section: no device\n", 1, {
            let mut rows = vec![
                row("libraries", "ok"),
                row("rdma_devices", "fail")
                    .shows("verbs lists no RDMA device")
                    .remedy(no_device.to_string()),
                row("devx_context", "skip").shows("no mlx5 device to open"),
                row("doorbell_path", "skip").shows("none: no usable mlx5 device"),
            ];
            rows.extend(skipped_after_devices("no mlx5 device to open"));
            rows
        }),
        Case {
            env: vec![("IBGDA_NIC", "mlx5_9")],
            ..case("a_device_that_does_not_exist", "[device mlx5_0]\n", 1, {
                vec![row("rdma_devices", "fail")
                    .shows("mlx5_0 (mlx5) (IBGDA_NIC/--device names mlx5_9)")
                    .remedy(absent.to_string())]
            })
        },
        Case {
            args: vec!["--device", "mlx5_1"],
            ..case(
                "the_device_named_on_the_command_line",
                "[device mlx5_0]\n[device mlx5_1]\nfault.alloc_uar = EPERM\n",
                1,
                vec![
                    row("rdma_devices", "ok").shows("mlx5_0 (mlx5), mlx5_1 (mlx5); checking mlx5_1"),
                    row("uar", "fail"),
                ],
            )
        },
        case(
            "a_device_that_is_not_mlx5",
            "[device erdma_0]\nprovider = erdma\nlink_layer = ethernet\n",
            1,
            vec![row("rdma_devices", "fail")
                .shows("erdma_0 (not mlx5) (the first mlx5 device)")
                .remedy(
                    Mlx5Error::NotMlx5 {
                        device: "erdma_0".into(),
                    }
                    .to_string(),
                )],
        ),
        case("devx_context_refused", "[device mlx5_0]\nfault.open_devx = EPERM\n", 1, {
            let mut rows = vec![
                row("rdma_devices", "ok").shows("checking mlx5_0"),
                row("devx_context", "fail")
                    .shows("the kernel refused DEVX on mlx5_0: EPERM (1)")
                    .remedy(
                        Mlx5Error::DevxUnavailable {
                            device: "mlx5_0".into(),
                            errno: EPERM,
                        }
                        .to_string(),
                    ),
            ];
            rows.extend(skipped_after_devices("no DEVX context on mlx5_0"));
            rows
        }),
        case(
            "uar_allocation_refused_in_an_unprivileged_container",
            "[device mlx5_0]\nfault.alloc_uar = EPERM\n",
            1,
            vec![
                row("uar", "fail")
                    .shows("no UAR page on mlx5_0: EPERM (1) as in an unprivileged container")
                    .remedy(Mlx5Error::UarAllocation { errno: EPERM }.to_string()),
                // The other checks still run.
                row("hca_caps", "ok"),
                row("umem", "ok"),
                row("port", "ok"),
            ],
        ),
        case(
            "capabilities_query_fails_in_firmware",
            "[device mlx5_0]\nfault.command = QUERY_HCA_CAP status=0x01 syndrome=0x7\n",
            1,
            vec![
                row("hca_caps", "fail")
                    .shows("QUERY_HCA_CAP failed in firmware: QUERY_HCA_CAP failed")
                    .remedy(
                        Mlx5Error::Command {
                            opcode: opcode::QUERY_HCA_CAP,
                            error: PrmError::CommandError {
                                command: "QUERY_HCA_CAP",
                                status: CommandStatus::from_byte(0x01),
                                syndrome: 0x7,
                            },
                        }
                        .to_string(),
                    ),
                row("cqe_version", "skip").shows("the capabilities could not be read"),
                row("dc", "skip"),
                row("umem", "ok"),
            ],
        ),
        case(
            "cqe_version_0",
            "[device mlx5_0]\ncap.cqe_version = 0\n",
            1,
            vec![
                row("cqe_version", "fail")
                    .shows("cqe_version 0: ibgda's CQ parser and device library read only version 1")
                    .remedy_has("update the NIC firmware"),
                row("send_queue", "skip")
                    .shows("the control plane refuses the device (its CQE version)"),
                // The checks that need no control plane still run.
                row("umem", "ok"),
                row("port", "ok"),
            ],
        ),
        case(
            "send_queues_smaller_than_ibgdas_largest_ring",
            "[device mlx5_0]\ncap.log_max_qp_size = 10\n",
            0,
            vec![row("send_queue", "warn")
                .shows("send queues up to 2^10 = 1024 WQEBBs")
                .remedy(
                    "rings above 1024 WQEBBs are refused with a typed error (ibgda allows up to \
                     32768); ask for at most 1024",
                )],
        ),
        case(
            "send_queues_smaller_than_the_largest_wqe",
            "[device mlx5_0]\ncap.log_max_qp_size = 3\n",
            1,
            vec![row("send_queue", "fail")
                .shows("send queues up to 2^3 = 8 WQEBBs")
                .remedy_has("a send queue must hold the largest WQE (16 WQEBBs)")],
        ),
        case(
            "send_wqes_smaller_than_a_basic_block",
            "[device mlx5_0]\ncap.max_send_wqe_bytes = 40\n",
            1,
            vec![row("inline", "fail")
                .shows("send WQEs up to 40 B: inline payloads up to 4 B")
                .remedy("the device takes no WQE of one basic block (64 B): use another device")],
        ),
        case(
            "send_wqes_of_one_basic_block",
            "[device mlx5_0]\ncap.max_send_wqe_bytes = 64\n",
            0,
            vec![row("inline", "ok").shows("send WQEs up to 64 B: inline payloads up to 28 B")],
        ),
        case(
            "no_atomics",
            "[device mlx5_0]\ncap.atomic = 0\n",
            0,
            vec![
                row("hca_caps", "ok").shows("the device reports no atomics: no atomic page"),
                row("atomics", "warn")
                    .shows("no atomics: atomic WQEs (compare-swap, fetch-add, the signals built on them) fail")
                    .remedy(atomics_error(caps_with(|c| {
                        c.atomic = false;
                        c.atomic_sizes = 0;
                        c.masked_atomics = false;
                    }))),
            ],
        ),
        case(
            "no_8_byte_atomics",
            "[device mlx5_0]\ncap.atomic_sizes = 0x4\n",
            0,
            vec![row("atomics", "warn")
                .shows("atomic_size_qp 0x4 (4 bytes only)")
                .remedy(atomics_error(caps_with(|c| c.atomic_sizes = 0x4)))],
        ),
        case(
            "host_endian_atomics",
            "[device mlx5_0]\ncap.atomic_endianness = host\n",
            0,
            vec![row("atomics", "ok").shows(match caps_with(|c| {
                c.atomic_endianness = AtomicEndianness::HostEndian
            })
            .atomic_endianness
            {
                AtomicEndianness::HostEndian => "host-endian 8-byte results",
                AtomicEndianness::BigEndian => unreachable!(),
            })],
        ),
        case(
            "no_dc",
            "[device mlx5_0]\ncap.dc = 0\n",
            0,
            vec![row("dc", "warn")
                .shows("no DC transport: RC queue pairs only")
                .remedy_has("use RC queue pairs, one per peer")],
        ),
        case(
            "umem_registration_refused",
            "[device mlx5_0]\nfault.umem_reg = ENOMEM\n",
            1,
            vec![row("umem", "fail")
                .shows("host queue memory cannot be registered on mlx5_0")
                .remedy(
                    Mlx5Error::UmemRegistration {
                        errno: libc::ENOMEM,
                        len: 4096,
                    }
                    .to_string(),
                )],
        ),
        case(
            "port_down",
            "[device mlx5_0]\nport_state = down\n",
            1,
            vec![row("port", "fail")
                .shows("DOWN, InfiniBand")
                .remedy_has("a subnet manager configures it")],
        ),
        case(
            "roce_port_down",
            "[device mlx5_0]\nlink_layer = ethernet\nport_state = down\n",
            1,
            vec![row("port", "fail")
                .shows("DOWN, Ethernet (RoCE)")
                .remedy_has("`ip link set <netdev> up`")],
        ),
        case(
            "empty_gid_table_on_roce",
            "[device mlx5_0]\nlink_layer = ethernet\ngids = none\n",
            1,
            vec![
                row("port", "ok").shows("ACTIVE, Ethernet (RoCE)"),
                row("port_address", "fail")
                    .shows("no GID: all")
                    .remedy_has("give the port's netdev an IPv4 or IPv6 address"),
            ],
        ),
        case(
            "roce_gid_types_unknown_without_sysfs",
            "[device mlx5_0]\nlink_layer = ethernet\n",
            0,
            vec![row("port_address", "warn").shows(
                "their types (RoCE v1 or v2) cannot be read: \
                 /sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types is missing",
            )],
        ),
        Case {
            args: vec!["--require", "gpu"],
            ..case(
                "a_gpu_path_required_without_a_gpu",
                "[device mlx5_0]\n",
                1,
                vec![row("doorbell_path", "fail").remedy_has("--require gpu is not met")],
            )
        },
    ];
    cases.extend(library_cases());
    cases.extend(gpu_fault_cases());
    cases.push(Case {
        tree: Some(sysfs_tree),
        host: Host::WithoutGpu,
        ..case(
            "sysfs_of_a_roce_host_with_a_gpu_and_no_cuda",
            "[device mlx5_0]\nlink_layer = ethernet\ngids = fe80::e42:a1ff:fe00:1,::ffff:10.0.0.1\n",
            0,
            vec![
                row("rdma_devices", "ok").shows("mlx5_0 (mlx5, kernel driver mlx5_core)"),
                row("port_address", "ok")
                    .shows("1 RoCE v2 GID (first: index 1 0000:0000:0000:0000:0000:ffff:0a00:0001)"),
                // The driver lists a GPU but CUDA cannot reach it (no libcuda.so.1 here).
                row("gpu", "warn").shows("the NVIDIA driver drives 0000:19:00.0 but libcuda.so.1 does not load"),
                row("gpu_memory_peer", "skip"),
                row("iommu", "warn")
                    .shows("DMA is translated by the IOMMU for 0000:19:00.0: DMA-FQ, mlx5_0: DMA-FQ; command line: intel_iommu=on")
                    .remedy_has("`iommu=pt`"),
                row("pcie_distance", "ok").shows(
                    "recommended pairing: 0000:19:00.0 -> mlx5_0 (PXB: below the same PCIe switch, 3 bridges)",
                ),
                row("doorbell_path", "ok").shows("host: no GPU"),
            ],
        )
    });
    cases
}

/// The rows after the libraries row when the libraries cannot be used.
fn skipped_after_libraries(why: &str) -> Vec<Expect> {
    let mut rows: Vec<Expect> = ["rdma_devices", "devx_context"]
        .into_iter()
        .map(|id| row(id, "skip").shows(format!("cannot run: {why}")))
        .collect();
    rows.extend(skipped_after_devices(why));
    rows.push(row("doorbell_path", "skip").shows("none: no usable mlx5 device"));
    rows
}

/// The `libraries` and `dmabuf_api` rows on older and mismatched rdma-core exports. Which
/// release introduced which entry point is Debian's symbols files' word (rdma-core 44.0's
/// debian/ibverbs-providers.symbols and libibverbs1.symbols):
/// `mlx5dv_is_supported@MLX5_1.8 22`, `ibv_reg_dmabuf_mr@IBVERBS_1.12 34`,
/// `mlx5dv_devx_umem_reg_ex@MLX5_1.19 35`.
fn library_cases() -> Vec<Case> {
    let no_umem_ex = Mlx5Error::Unsupported {
        symbol: "mlx5dv_devx_umem_reg_ex",
        library: MLX5,
    }
    .to_string();
    vec![
        Case {
            libs: Libs::IbverbsAlone,
            // The libraries row and its remedy come from what the loader says.
            ..case("libibverbs_without_its_libmlx5", "[device mlx5_0]\n", 1, {
                let mut rows =
                    skipped_after_libraries("rdma-core's libraries did not load (see above)");
                rows.push(
                    row("dmabuf_api", "skip")
                        .shows("cannot run: rdma-core's libraries did not load"),
                );
                rows
            })
        },
        Case {
            libs: Libs::RdmaCore(21),
            ..case(
                "rdma_core_21_lacks_an_entry_point",
                "[device mlx5_0]\n",
                1,
                {
                    let why = "libmlx5.so.1 lacks mlx5dv_is_supported, which the mlx5 backend needs (see above)";
                    let mut rows = vec![
                    row("libraries", "fail")
                        .shows("libmlx5.so.1 lacks mlx5dv_is_supported")
                        .remedy(
                            Mlx5Error::Unsupported {
                                symbol: "mlx5dv_is_supported",
                                library: MLX5,
                            }
                            .to_string(),
                        ),
                    row("dmabuf_api", "warn")
                        .shows(
                            "libmlx5.so.1 has no mlx5dv_devx_umem_reg_ex; libibverbs.so.1 has no \
                             ibv_reg_dmabuf_mr: GPU memory can reach the NIC only through the \
                             peer-memory module",
                        )
                        .remedy(no_umem_ex.clone()),
                ];
                    rows.extend(skipped_after_libraries(why));
                    rows
                },
            )
        },
        Case {
            libs: Libs::RdmaCore(33),
            ..case("rdma_core_33_has_no_dmabuf", "[device mlx5_0]\n", 0, {
                vec![
                    row("libraries", "ok").shows("is the emulated ConnectX"),
                    row("rdma_devices", "ok").shows("checking mlx5_0"),
                    row("umem", "ok"),
                    row("port", "ok"),
                    row("dmabuf_api", "warn")
                        .shows(
                            "libmlx5.so.1 has no mlx5dv_devx_umem_reg_ex; libibverbs.so.1 has no \
                             ibv_reg_dmabuf_mr: GPU memory can reach the NIC only through the \
                             peer-memory module",
                        )
                        .remedy(no_umem_ex.clone()),
                ]
            })
        },
        Case {
            libs: Libs::RdmaCore(34),
            ..case("rdma_core_34_has_no_dmabuf_umem", "[device mlx5_0]\n", 0, {
                vec![
                    row("libraries", "ok").shows("is the emulated ConnectX"),
                    row("dmabuf_api", "warn")
                        .shows(
                            "libmlx5.so.1 has no mlx5dv_devx_umem_reg_ex: GPU memory can reach \
                             the NIC only through the peer-memory module",
                        )
                        .hides("ibv_reg_dmabuf_mr")
                        .remedy(no_umem_ex),
                ]
            })
        },
    ]
}

/// The GPU rows without a usable GPU: each skipped, the first saying why.
fn gpu_rows_without_a_gpu() -> Vec<Expect> {
    let mut rows = vec![row("gpu", "skip").shows(
        "cannot run: no GPU (libcuda.so.1 does not load and /proc/driver/nvidia/gpus lists none)",
    )];
    for id in ["gpu_memory_dmabuf", "gpu_memory_peer", "uar_gpu_mapping"] {
        rows.push(row(id, "skip").shows("cannot run: no usable GPU (see the GPU row)"));
    }
    rows
}

/// Each GPU-row fault of the emulator: what the doctor says of it without a GPU (nothing:
/// no GPU row runs, and nothing else uses what the fault breaks), and on the GPU machine
/// what the row that meets it says.
fn gpu_fault_cases() -> Vec<Case> {
    let unchanged = |rows: &mut Vec<Expect>| {
        rows.extend([
            row("umem", "ok").shows("host queue memory"),
            // A symbol lookup: the fault configures a call, not an export.
            row("dmabuf_api", "ok").shows("both present"),
            row("doorbell_path", "ok").shows("host: no GPU"),
        ]);
    };
    let mut cases = Vec::new();
    for (name, config) in [
        (
            "dmabuf_umem_refused_without_a_gpu",
            "[device mlx5_0]\nfault.umem_reg_dmabuf = EFAULT\n",
        ),
        (
            "dmabuf_mr_refused_without_a_gpu",
            "[device mlx5_0]\nfault.reg_dmabuf_mr = EFAULT\n",
        ),
        (
            "uar_gpu_mapping_refused_without_a_gpu",
            "[device mlx5_0]\nfault.uar_gpu_mapping = 800\n",
        ),
    ] {
        let mut rows = gpu_rows_without_a_gpu();
        unchanged(&mut rows);
        cases.push(Case {
            host: Host::WithoutGpu,
            ..case(name, config, 0, rows)
        });
    }
    // On the GPU machine. The plain emulator's UMEMs never reach GPU memory: the DMA-BUF
    // registration fails with the configured errno (EFAULT, 14) where it would fail with
    // EOPNOTSUPP, and the peer-memory path with EFAULT (14).
    cases.push(Case {
        host: Host::WithGpu,
        ..case(
            "dmabuf_umem_refused_on_a_gpu",
            "[device mlx5_0]\nfault.umem_reg_dmabuf = EFAULT\n",
            0,
            vec![
                row("gpu", "ok"),
                row("gpu_memory_dmabuf", "warn")
                    .shows("GPU queue memory cannot be registered on mlx5_0")
                    .remedy_has("(code 14)) and the peer-memory path failed with EFAULT (14)"),
                row("doorbell_path", "warn").shows("proxy"),
            ],
        )
    });
    cases.push(Case {
        host: Host::WithGpu,
        ..case(
            "uar_gpu_mapping_refused_on_a_gpu",
            "[device mlx5_0]\nfault.uar_gpu_mapping = 800\n",
            0,
            vec![
                row("gpu", "ok"),
                row("uar_gpu_mapping", "warn")
                    .shows(format!(
                        "the CUDA driver refused to map a UAR page of mlx5_0 (CUDA error \
                         {CUDA_ERROR_NOT_PERMITTED}, not permitted)"
                    ))
                    .remedy(
                        Mlx5Error::UarMappingRefused {
                            cuda_error: CUDA_ERROR_NOT_PERMITTED,
                            message: "the emulated ConnectX is configured to refuse this \
                                      mapping (fault.uar_gpu_mapping)"
                                .into(),
                        }
                        .to_string(),
                    ),
            ],
        )
    });
    cases
}

/// A host's /proc and /sys as the kernel lays them out (see `src/host.rs` and
/// `src/pci.rs`): a GPU at 0000:19:00.0 and `mlx5_0` at 0000:18:00.0 below two downstream
/// ports of one switch, both in translated IOMMU groups, the NIC's GID table types.
fn sysfs_tree(root: &Path) -> std::io::Result<()> {
    use std::fs::{create_dir_all, write};
    use std::os::unix::fs::symlink;
    let bridge = "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0";
    let gpu = format!("{bridge}/0000:17:02.0/0000:19:00.0");
    let nic = format!("{bridge}/0000:17:01.0/0000:18:00.0");
    for dir in [
        gpu.as_str(),
        nic.as_str(),
        "sys/bus/pci/devices",
        "sys/bus/pci/drivers/mlx5_core",
        "sys/kernel/iommu_groups/30",
        "sys/kernel/iommu_groups/31",
        "sys/class/iommu/dmar0",
        "proc/driver/nvidia/gpus/0000:19:00.0",
        "proc/sys/kernel",
    ] {
        create_dir_all(root.join(dir))?;
    }
    let ib = format!("{nic}/infiniband/mlx5_0");
    let types = format!("{ib}/ports/1/gid_attrs/types");
    create_dir_all(root.join(&types))?;
    create_dir_all(root.join("sys/class/infiniband"))?;
    symlink(
        "../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:18:00.0/infiniband/mlx5_0",
        root.join("sys/class/infiniband/mlx5_0"),
    )?;
    // `device` of an infiniband class entry is its PCI function.
    symlink("../../../0000:18:00.0", root.join(format!("{ib}/device")))?;
    symlink(
        "../../../../../../bus/pci/drivers/mlx5_core",
        root.join(format!("{nic}/driver")),
    )?;
    symlink(
        "../../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:02.0/0000:19:00.0",
        root.join("sys/bus/pci/devices/0000:19:00.0"),
    )?;
    symlink(
        "../../../../../../kernel/iommu_groups/30",
        root.join(format!("{gpu}/iommu_group")),
    )?;
    symlink(
        "../../../../../../kernel/iommu_groups/31",
        root.join(format!("{nic}/iommu_group")),
    )?;
    write(root.join("sys/kernel/iommu_groups/30/type"), "DMA-FQ\n")?;
    write(root.join("sys/kernel/iommu_groups/31/type"), "DMA-FQ\n")?;
    write(root.join(format!("{gpu}/numa_node")), "0\n")?;
    write(root.join(format!("{nic}/numa_node")), "0\n")?;
    // The kernel's GID types: the link-local address as RoCE v1, the IPv4 one as RoCE v2.
    write(root.join(format!("{types}/0")), "IB/RoCE v1\n")?;
    write(root.join(format!("{types}/1")), "RoCE v2\n")?;
    write(
        root.join("proc/cmdline"),
        "BOOT_IMAGE=/vmlinuz ro intel_iommu=on quiet\n",
    )?;
    write(root.join("proc/sys/kernel/osrelease"), "6.8.0-45-generic\n")?;
    write(root.join("proc/modules"), "mlx5_ib 454656 0 - Live 0x0\n")?;
    Ok(())
}

/// Set in a child process of this binary: it loads `libibverbs.so.1` and then
/// `libmlx5.so.1` as `dlopen` finds them (`LD_LIBRARY_PATH` set by the parent), as the
/// mlx5 backend does, and prints what the loader said (`loader_says`).
const LOADER_PROBE: &str = "IBGDA_DOCTOR_TEST_LOADER_PROBE";

/// The child's side of [`LOADER_PROBE`]: `loaded`, or the library that failed and
/// `dlerror`'s message, tab-separated.
fn loader_probe() -> ExitCode {
    for name in [c"libibverbs.so.1", c"libmlx5.so.1"] {
        // SAFETY: loading rdma-core's libraries (or the emulator) runs initialisers that
        // only register providers and read the environment; the handle is never closed.
        let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
        if handle.is_null() {
            // SAFETY: dlerror's message after a failed dlopen, NUL-terminated, read before
            // any other loader call.
            let message = unsafe { std::ffi::CStr::from_ptr(libc::dlerror()) };
            print!("{}\t{}", name.to_string_lossy(), message.to_string_lossy());
            return ExitCode::SUCCESS;
        }
    }
    print!("loaded");
    ExitCode::SUCCESS
}

/// What the loader says of `libmlx5.so.1` loaded after `libibverbs.so.1` with `dir` first
/// on the loader path, from a process of its own.
fn loader_says(dir: &Path) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let output = Command::new(exe)
        .env(LOADER_PROBE, "1")
        .env("LD_LIBRARY_PATH", library_path(dir))
        .env("IBGDA_EMU_QUIET", "1")
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    match text.split_once('\t') {
        Some((library, message)) if library == MLX5 => Ok(message.to_owned()),
        Some((library, message)) => Err(format!("{library} does not load: {message}")),
        None => Err(format!(
            "{MLX5} loads over the emulator's {IBVERBS} here ({text:?}): no failing setup"
        )),
    }
}

/// The libraries row for `libmlx5.so.1` failing to load with the loader's `message`: a
/// library that does not fit the `libibverbs.so.1` before it (glibc: an undefined symbol,
/// or a symbol version not found), or one that is absent.
fn libraries_row_for(message: String) -> Expect {
    if message.contains("undefined symbol") || message.contains("not found (required by") {
        row("libraries", "fail")
            .shows(format!(
                "{MLX5} is not from the rdma-core of the {IBVERBS} loaded before it: {message}"
            ))
            .remedy(
                Mlx5Error::LibraryMismatch {
                    library: MLX5,
                    reason: message,
                }
                .to_string(),
            )
    } else {
        row("libraries", "fail")
            .shows(format!("{MLX5} could not be loaded: {message}"))
            .remedy(
                Mlx5Error::LibraryMissing {
                    library: MLX5,
                    reason: message,
                }
                .to_string(),
            )
    }
}

/// The doctor binary: cargo's, or `$IBGDA_DOCTOR_BIN` (on the GPU machine, which has no
/// cargo: doctor/gpu-run.sh carries both binaries there).
fn doctor_bin() -> PathBuf {
    std::env::var_os("IBGDA_DOCTOR_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_ibgda-doctor")),
        PathBuf::from,
    )
}

/// Runs the doctor for `case` with `dir` first on the loader path: its JSON report and
/// exit status.
fn run(case: &Case, dir: &Path, root: Option<&Path>) -> Result<(Value, i32, String), String> {
    let mut command = Command::new(doctor_bin());
    command
        .arg("--json")
        .args(&case.args)
        .env("LD_LIBRARY_PATH", library_path(dir))
        .env("IBGDA_EMU_CONFIG_TEXT", case.config)
        .env("IBGDA_EMU_QUIET", "1")
        .env_remove("IBGDA_EMU_CONFIG")
        .env_remove("IBGDA_EMU_LOG")
        .env_remove("IBGDA_NIC")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(root) = root {
        command.arg("--root").arg(root);
    }
    for (key, value) in &case.env {
        command.env(key, value);
    }
    let mut child = command.spawn().map_err(|e| e.to_string())?;
    let start = Instant::now();
    while child.try_wait().map_err(|e| e.to_string())?.is_none() {
        if start.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("the doctor did not finish within {RUN_LIMIT:?}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let report: Value = serde_json::from_str(&stdout)
        .map_err(|e| format!("the report is not JSON ({e}):\n{stdout}\n--- stderr\n{stderr}"))?;
    Ok((report, output.status.code().unwrap_or(-1), stderr))
}

fn check(case: &Case, expected: &[Expect], report: &Value, exit: i32) -> Outcome {
    let rows = report["checks"]
        .as_array()
        .ok_or("the report has no checks")?;
    let find = |id: &str| {
        rows.iter()
            .find(|r| r["id"] == id)
            .ok_or_else(|| format!("no row {id}"))
    };
    // Every run whose libraries load is on the emulator: the libraries row says so.
    let libraries = find("libraries")?;
    let loads = !expected
        .iter()
        .any(|e| e.id == "libraries" && e.status == "fail");
    if loads
        && !libraries["result"]
            .as_str()
            .is_some_and(|r| r.contains("is the emulated ConnectX"))
    {
        return Err(format!("not on the emulated ConnectX: {libraries}"));
    }
    let mut problems = Vec::new();
    for e in expected {
        let r = find(e.id)?;
        let text = |key: &str| r[key].as_str().unwrap_or_default().to_owned();
        if r["status"] != e.status {
            problems.push(format!(
                "{}: status {} (expected {})",
                e.id, r["status"], e.status
            ));
        }
        for needle in &e.result {
            if !text("result").contains(needle.as_str()) {
                problems.push(format!(
                    "{}: result lacks {needle:?}: {}",
                    e.id,
                    text("result")
                ));
            }
        }
        for needle in &e.absent {
            if text("result").contains(needle.as_str()) {
                problems.push(format!(
                    "{}: result has {needle:?}: {}",
                    e.id,
                    text("result")
                ));
            }
        }
        match e.remedy.as_deref() {
            None => {}
            Some(wanted) => {
                let remedy = text("remedy");
                let ok = match wanted.strip_prefix('~') {
                    Some(part) => remedy.contains(part),
                    None => remedy == wanted,
                };
                if !ok {
                    problems.push(format!("{}: remedy {remedy:?}, expected {wanted:?}", e.id));
                }
            }
        }
        // A failed row always says what to do.
        if e.status == "fail" && text("remedy").is_empty() {
            problems.push(format!("{}: fails without a remedy", e.id));
        }
    }
    // The exit status follows the needed rows, and the report says the same.
    let failed_needed = rows
        .iter()
        .any(|r| r["needed"] == true && r["status"] == "fail");
    if exit != case.exit || (exit == 0) == failed_needed || report["ok"] != (exit == 0) {
        problems.push(format!(
            "exit status {exit} (expected {}), ok {}, a needed row failed: {failed_needed}",
            case.exit, report["ok"]
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n    "))
    }
}

/// Where `case` runs: the emulator's directory, or the directory of the libraries the
/// case puts on the loader path (made under `scratch`); the inner `Err` says why when
/// those are not built.
fn library_dir(
    case: &Case,
    emulator: &Path,
    scratch: &Path,
) -> Result<Result<PathBuf, String>, String> {
    match case.libs {
        Libs::Emulator => Ok(Ok(emulator.to_path_buf())),
        Libs::RdmaCore(release) => {
            let dir = emulator
                .parent()
                .unwrap_or(emulator)
                .join(format!("rdma-core-{release}/lib"));
            Ok(if dir.join("libibverbs.so.1").is_file() {
                Ok(dir)
            } else {
                Err(format!(
                    "the emulator with rdma-core {release}'s exports is not built at {} \
                     (IBGDA_EMU_RDMA_CORE={release} scripts/build-emulated-nic)",
                    dir.display()
                ))
            })
        }
        Libs::IbverbsAlone => {
            let dir = scratch.join(format!("{}-libs", case.name));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            std::os::unix::fs::symlink(
                emulator.join("libibverbs.so.1"),
                dir.join("libibverbs.so.1"),
            )
            .map_err(|e| e.to_string())?;
            Ok(Ok(dir))
        }
    }
}

/// Runs `case`: `Ok(None)` when it passed, `Ok(Some(why))` when it cannot run here.
fn run_case(case: &Case, emulator: &Path, scratch: &Path) -> Result<Option<String>, String> {
    let dir = match library_dir(case, emulator, scratch)? {
        Ok(dir) => dir,
        Err(why) => return Ok(Some(why)),
    };
    let mut expected: Vec<Expect> = case
        .rows
        .iter()
        .map(|e| Expect {
            id: e.id,
            status: e.status,
            result: e.result.clone(),
            absent: e.absent.clone(),
            remedy: e.remedy.clone(),
        })
        .collect();
    if case.libs == Libs::IbverbsAlone {
        expected.push(libraries_row_for(loader_says(&dir)?));
    }
    let root = match case.tree {
        None => None,
        Some(build) => {
            let root = scratch.join(case.name);
            let _ = std::fs::remove_dir_all(&root);
            build(&root).map_err(|e| format!("building the sysfs tree: {e}"))?;
            Some(root)
        }
    };
    let result = run(case, &dir, root.as_deref()).and_then(|(report, exit, stderr)| {
        check(case, &expected, &report, exit).map_err(|e| format!("{e}\n--- stderr\n{stderr}"))
    });
    if let Some(root) = root {
        let _ = std::fs::remove_dir_all(root);
    }
    result.map(|()| None)
}

/// Why `case` belongs on another host than this one, if it does.
fn elsewhere(case: &Case, gpu: bool) -> Option<String> {
    match (case.host, gpu) {
        (Host::WithoutGpu, true) => Some(
            "a CUDA driver is present: the GPU rows would be this host's (the `_on_a_gpu` \
             cases check the faults there)"
                .into(),
        ),
        (Host::WithGpu, false) => {
            Some("needs a GPU (libcuda.so.1 does not load here): a case for the GPU machine".into())
        }
        _ => None,
    }
}

fn main() -> ExitCode {
    if std::env::var_os(LOADER_PROBE).is_some() {
        return loader_probe();
    }
    let dir = emulator_dir();
    let required = std::env::var("IBGDA_REQUIRE_EMU").is_ok_and(|v| v == "1");
    let gpu = ibgda_kernels::gpu::driver_present();
    let scratch =
        std::env::temp_dir().join(format!("ibgda-doctor-emulated-{}", std::process::id()));
    let code = case_report::run_selected_where(
        "emulated: ibgda-doctor on the emulated ConnectX, healthy and with each bring-up fault",
        &cases(),
        |c| c.name,
        required.then_some("IBGDA_REQUIRE_EMU=1"),
        |c| elsewhere(c, gpu),
        |case| match &dir {
            None => Ok(Some(
                "the emulated ConnectX is not built (scripts/build-emulated-nic)".to_owned(),
            )),
            Some(dir) => run_case(case, dir, &scratch),
        },
    );
    let _ = std::fs::remove_dir_all(&scratch);
    code
}
