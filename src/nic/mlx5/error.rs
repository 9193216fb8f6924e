//! The typed errors of the mlx5 backend. Every failure users of GPU-initiated RDMA stacks
//! commonly meet has its own variant, and each message says what to do about it.

use core::fmt;

use super::dv::IBVERBS;

use crate::cq::{ErrorCompletion, Syndrome};
use crate::nic::gpu_access::{DmaBufExportError, IoMapError};
use crate::nic::prm::{check_status, PrmError};
use crate::queue::CompletionError;

/// `EREMOTEIO`: a DEVX call whose command reached the firmware and failed there; the
/// command's output then holds the firmware's status and syndrome.
pub const EREMOTEIO: i32 = 121;
/// `ENOSYS`: what `ibv_get_device_list` reports when the kernel has no verbs support.
pub const ENOSYS: i32 = 38;
/// `EOPNOTSUPP`.
pub const EOPNOTSUPP: i32 = 95;
/// `EPERM`.
pub const EPERM: i32 = 1;
/// `EFAULT`.
pub const EFAULT: i32 = 14;
/// CUDA's `CUDA_ERROR_NOT_PERMITTED` (800), what `cuMemHostRegister` with the I/O-memory
/// flag returns when the driver refuses to map a PCI BAR page into the GPU.
pub const CUDA_ERROR_NOT_PERMITTED: i32 = 800;
/// CUDA's `CUDA_ERROR_NOT_SUPPORTED` (801).
pub const CUDA_ERROR_NOT_SUPPORTED: i32 = 801;

/// The PRM name of a command opcode the control plane sends (`"unknown command"`
/// otherwise).
pub fn command_name(opcode: u16) -> &'static str {
    crate::nic::prm::opcode::name(opcode)
}

/// The name of an errno value the backend meets, for messages.
pub fn errno_name(errno: i32) -> &'static str {
    match errno {
        1 => "EPERM",
        2 => "ENOENT",
        5 => "EIO",
        11 => "EAGAIN",
        12 => "ENOMEM",
        13 => "EACCES",
        14 => "EFAULT",
        16 => "EBUSY",
        19 => "ENODEV",
        22 => "EINVAL",
        38 => "ENOSYS",
        95 => "EOPNOTSUPP",
        121 => "EREMOTEIO",
        _ => "errno",
    }
}

/// Why the mlx5 backend failed. Every message names the values involved and says what to
/// do.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mlx5Error {
    /// A shared library could not be loaded (`libibverbs.so.1`, `libmlx5.so.1`).
    LibraryMissing {
        /// The library's file name.
        library: &'static str,
        /// The loader's message.
        reason: String,
    },
    /// A shared library was found but does not load over the libraries loaded before it
    /// (the loader reports an undefined symbol or a missing symbol version): a
    /// `libmlx5.so.1` of one rdma-core installation with the `libibverbs.so.1` of
    /// another, whose private symbols differ.
    LibraryMismatch {
        /// The library's file name.
        library: &'static str,
        /// The loader's message.
        reason: String,
    },
    /// The loaded library lacks an entry point the backend needs (an rdma-core too old).
    Unsupported {
        /// The missing symbol.
        symbol: &'static str,
        /// The library it was looked up in.
        library: &'static str,
    },
    /// No RDMA device (or not the one asked for).
    NoDevice {
        /// The device asked for (`IBGDA_NIC`), if any.
        requested: Option<String>,
        /// The devices that do exist.
        available: Vec<String>,
        /// The errno of `ibv_get_device_list` when it failed (`ENOSYS`: no kernel verbs
        /// support), 0 when it succeeded with no match.
        errno: i32,
    },
    /// The device exists but is not driven by mlx5 (no DEVX): e.g. `erdma_0`, `rxe0`.
    NotMlx5 {
        /// The device.
        device: String,
    },
    /// The kernel refused a DEVX context for the device.
    DevxUnavailable {
        /// The device.
        device: String,
        /// `errno` of `mlx5dv_open_device`.
        errno: i32,
    },
    /// A verbs call failed.
    Verbs {
        /// The call (`ibv_alloc_pd`, ...).
        call: &'static str,
        /// Its errno.
        errno: i32,
    },
    /// A DEVX command reached the firmware and failed: its status and syndrome, decoded
    /// from the command's output by the PRM decoder ([`PrmError::CommandError`]).
    Command {
        /// The command's opcode (the first 16 bits of its input).
        opcode: u16,
        /// The decoded failure.
        error: PrmError,
    },
    /// A DEVX command was refused before it reached the firmware (bad length, no
    /// permission, object in use).
    DevxCall {
        /// The DEVX entry point.
        call: &'static str,
        /// The command's name.
        command: &'static str,
        /// Its errno.
        errno: i32,
    },
    /// A command's input or output buffer is too short to hold its header.
    CommandBuffer {
        /// Which buffer (`"input"` or `"output"`).
        which: &'static str,
        /// Its length.
        len: usize,
        /// The least length a command needs.
        min: usize,
    },
    /// The device lacks atomic capabilities the queues need.
    MissingAtomics {
        /// What is missing (e.g. "8-byte compare-and-swap", "host-endian atomic replies").
        missing: String,
    },
    /// No UAR page could be allocated (tried non-cached dedicated, non-cached, then
    /// BlueFlame).
    UarAllocation {
        /// `errno` of the last try.
        errno: i32,
    },
    /// The CUDA driver refused to map the NIC's doorbell page into the GPU.
    UarMappingRefused {
        /// The CUDA error code (800: not permitted).
        cuda_error: i32,
        /// The driver's message.
        message: String,
    },
    /// GPU memory could be registered neither by DMA-BUF nor through the peer-memory module.
    GpuMemoryRegistration {
        /// Why DMA-BUF did not work (export or registration).
        dmabuf: String,
        /// `errno` of the peer-memory registration (`mlx5dv_devx_umem_reg` on the GPU
        /// address), or 0 when it was not tried.
        peer_memory_errno: i32,
    },
    /// Registering host memory as UMEM failed.
    UmemRegistration {
        /// Its errno.
        errno: i32,
        /// Length of the memory.
        len: usize,
    },
    /// A GID could not be read.
    Gid {
        /// The port (1-based).
        port: u8,
        /// The GID index.
        index: u32,
        /// Its errno.
        errno: i32,
    },
    /// An address handle could not be made (for a DC peer's address vector).
    AddressHandle {
        /// The port.
        port: u8,
        /// Whether a GRH (GID) was given.
        global: bool,
        /// Its errno.
        errno: i32,
    },
    /// A queue pair failed on its first WQE: the error completion it reported.
    FirstWqeFailed {
        /// The error completion.
        completion: ErrorCompletion,
    },
    /// A value out of the range the backend or device accepts.
    OutOfRange {
        /// What.
        what: &'static str,
        /// The value given.
        value: u64,
        /// The limit.
        limit: u64,
    },
}

impl Mlx5Error {
    /// The error for a failed DEVX call that was handed `input` and filled `output`: the
    /// firmware's status and syndrome when the call failed with [`EREMOTEIO`], the errno
    /// otherwise.
    pub fn from_devx(call: &'static str, errno: i32, input: &[u8], output: &[u8]) -> Self {
        let opcode = input
            .get(0..2)
            .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
        if errno == EREMOTEIO {
            if let Err(error @ PrmError::CommandError { .. }) =
                check_status(command_name(opcode), output)
            {
                return Self::Command { opcode, error };
            }
        }
        Self::DevxCall {
            call,
            command: command_name(opcode),
            errno,
        }
    }

    /// The error for a failed `cuMemHostRegister` of the UAR page: error 800 is the
    /// driver's refusal to map I/O memory, which has a known remedy.
    pub fn from_uar_mapping(e: IoMapError) -> Self {
        Self::UarMappingRefused {
            cuda_error: e.code,
            message: e.message,
        }
    }

    /// The error when neither DMA-BUF nor peer memory could register GPU memory.
    pub fn gpu_registration(dmabuf: &DmaBufExportError, peer_memory_errno: i32) -> Self {
        Self::GpuMemoryRegistration {
            dmabuf: dmabuf.to_string(),
            peer_memory_errno,
        }
    }

    /// The typed error for an error completion of a queue pair's first WQE (index 0): the
    /// failure a wrongly created DEVX queue pair shows (e.g. an RQ it cannot use, vendor
    /// syndrome 0x68), with advice. `None` for later WQEs, whose errors are ordinary
    /// error completions.
    pub fn first_wqe_failure(completion: &ErrorCompletion) -> Option<Self> {
        (completion.wqe_counter == 0).then_some(Self::FirstWqeFailed {
            completion: *completion,
        })
    }

    /// [`first_wqe_failure`](Self::first_wqe_failure) for the error a host queue pair's
    /// poll or wait reports ([`PollError::Completion`](crate::queue::PollError)).
    pub fn first_wqe_failed(error: &CompletionError) -> Option<Self> {
        Self::first_wqe_failure(&ErrorCompletion {
            requester: true,
            qpn: error.qpn,
            wqe_counter: error.wqe_index,
            syndrome_byte: error.syndrome_byte,
            syndrome: error.syndrome,
            vendor_syndrome: error.vendor_syndrome,
            hw_syndrome: 0,
            hw_syndrome_type: 0,
            send_opcode: 0,
        })
    }

    /// Whether this is the "no device" error (no RDMA device at all, or not the one asked
    /// for): what a machine without a NIC reports, where hardware tests are skipped.
    pub fn is_no_device(&self) -> bool {
        matches!(
            self,
            Self::NoDevice { .. } | Self::LibraryMissing { .. } | Self::LibraryMismatch { .. }
        )
    }
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

impl fmt::Display for Mlx5Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::LibraryMissing { library, reason } => write!(
                f,
                "{library} could not be loaded ({reason}): install rdma-core's user-space \
                 libraries (Debian/Ubuntu: `apt install libibverbs1 ibverbs-providers`; \
                 RHEL: `dnf install libibverbs`) or add their directory to LD_LIBRARY_PATH"
            ),
            Self::LibraryMismatch { library, reason } => write!(
                f,
                "{library} could not be loaded ({reason}): it is from another rdma-core \
                 installation than the {IBVERBS} loaded before it (each provider needs the \
                 private symbols of its own libibverbs); make both come from one: point \
                 LD_LIBRARY_PATH at a directory holding both libraries of one rdma-core, or \
                 at neither"
            ),
            Self::Unsupported { symbol, library } => write!(
                f,
                "{library} has no `{symbol}`: the installed rdma-core is too old for the \
                 mlx5 DEVX control plane (DEVX needs rdma-core >= 22, \
                 mlx5dv_devx_umem_reg_ex >= 35, DMA-BUF UMEM >= 43, the dedicated \
                 non-cached UAR >= 45); upgrade rdma-core (libibverbs1, ibverbs-providers)"
            ),
            Self::NoDevice {
                requested,
                available,
                errno,
            } => {
                match requested {
                    Some(name) => write!(f, "no RDMA device named `{name}`")?,
                    None => f.write_str("no RDMA device")?,
                }
                write!(f, " (devices present: {})", list(available))?;
                if *errno == ENOSYS {
                    f.write_str(
                        "; the kernel has no verbs support (ib_uverbs not loaded, \
                         /sys/class/infiniband_verbs missing): load mlx5_ib and ib_uverbs",
                    )?;
                } else if *errno != 0 {
                    write!(
                        f,
                        "; ibv_get_device_list failed with {} ({errno})",
                        errno_name(*errno)
                    )?;
                }
                f.write_str(
                    "; check `ibv_devices`, that the mlx5_ib module is loaded, that \
                     /dev/infiniband is visible (containers need it passed through), and \
                     that IBGDA_NIC names a listed device",
                )
            }
            Self::NotMlx5 { device } => write!(
                f,
                "RDMA device `{device}` is not an mlx5 (ConnectX/BlueField) device: \
                 GPU-initiated RDMA needs mlx5 DEVX; pick an mlx5_* device from \
                 `ibv_devices` (IBGDA_NIC=mlx5_0) or use the software NIC (--nic soft)"
            ),
            Self::DevxUnavailable { device, errno } => write!(
                f,
                "the kernel refused a DEVX context on `{device}` ({} ({errno})): DEVX needs \
                 mlx5_ib with DEVX support (Linux >= 5.1 or MLNX_OFED) and, for some \
                 commands, CAP_NET_RAW; a VF may need its trust setting enabled",
                errno_name(*errno)
            ),
            Self::Verbs { call, errno } => write!(
                f,
                "{call} failed with {} ({errno}); run `ibv_devinfo -v` to check the device",
                errno_name(*errno)
            ),
            Self::Command { opcode, error } => write!(
                f,
                "DEVX command (opcode {opcode:#06x}) failed in firmware: {error}; the \
                 syndrome names the failed check (NVIDIA's PRM, or `dmesg` with mlx5_core \
                 debug), usually a field out of the device's range"
            ),
            Self::DevxCall {
                call,
                command,
                errno,
            } if *errno == EREMOTEIO => write!(
                f,
                "{call} for {command} failed in firmware (EREMOTEIO; rdma-core returns no \
                 status for it): the object may still be in use by the device"
            ),
            Self::DevxCall {
                call,
                command,
                errno,
            } => write!(
                f,
                "{call} for {command} was refused by the kernel with {} ({errno}) before \
                 reaching the firmware: a bad command length, a missing permission \
                 (CAP_NET_RAW), or an object still in use",
                errno_name(*errno)
            ),
            Self::CommandBuffer { which, len, min } => write!(
                f,
                "a DEVX command's {which} buffer has {len} bytes; it needs at least {min}"
            ),
            Self::MissingAtomics { missing } => write!(
                f,
                "the device lacks {missing}: post no atomic WQEs on it, or use a ConnectX \
                 with the atomic capabilities (`ibv_devinfo -v`: atomic_cap)"
            ),
            Self::UarAllocation { errno } => {
                write!(
                    f,
                    "no UAR doorbell page could be allocated (non-cached dedicated, which \
                     needs rdma-core >= 45, non-cached and BlueFlame all failed; last {} \
                     ({errno}))",
                    errno_name(*errno)
                )?;
                if *errno == EPERM || *errno == 13 {
                    f.write_str(
                        ": the kernel refused DEVX to this process, as in an unprivileged \
                         container: run privileged (or with CAP_NET_RAW and the \
                         /dev/infiniband devices passed through)",
                    )
                } else {
                    f.write_str(": too many open contexts or queues on the device")
                }
            }
            Self::UarMappingRefused {
                cuda_error,
                message,
            } => {
                write!(
                    f,
                    "the CUDA driver refused to map the NIC doorbell (UAR) page into the GPU \
                     (cuMemHostRegister with the I/O-memory flag: CUDA error {cuda_error}, \
                     {message})"
                )?;
                if *cuda_error == CUDA_ERROR_NOT_PERMITTED {
                    f.write_str(
                        ": the NVIDIA driver maps PCI BAR pages for non-root users only \
                         with its peer-mapping override: load nvidia with \
                         `NVreg_RegistryDwords=\"PeerMappingOverride=1;\"` (modprobe \
                         option), run as root, or use a CPU-assisted doorbell",
                    )
                } else {
                    f.write_str(
                        ": the kernel or driver cannot map I/O memory into the GPU (needs a \
                         recent NVIDIA driver and kernel); use a CPU-assisted doorbell",
                    )
                }
            }
            Self::GpuMemoryRegistration {
                dmabuf,
                peer_memory_errno,
            } => write!(
                f,
                "GPU memory could not be registered with the NIC: DMA-BUF failed ({dmabuf}) \
                 and the peer-memory path failed with {} ({peer_memory_errno}); for DMA-BUF \
                 use the NVIDIA open kernel modules with Linux >= 5.12 and rdma-core >= 43; \
                 the peer-memory path needs a kernel with the peer-memory client API \
                 (MLNX_OFED or DOCA-OFED; upstream kernels have none) and the module \
                 loaded (`modprobe nvidia_peermem`; the old nv_peer_mem must be replaced by \
                 it)",
                errno_name(*peer_memory_errno)
            ),
            Self::UmemRegistration { errno, len } => write!(
                f,
                "registering {len} bytes of queue memory as UMEM failed with {} ({errno}): \
                 check the locked-memory limit (`ulimit -l`)",
                errno_name(*errno)
            ),
            Self::Gid { port, index, errno } => write!(
                f,
                "GID index {index} of port {port} could not be read ({} ({errno})): list the \
                 table with `show_gids` and choose an index that exists (RoCE needs one \
                 with an IP address, RoCE v2 for routed networks)",
                errno_name(*errno)
            ),
            Self::AddressHandle {
                port,
                global,
                errno,
            } => {
                write!(
                    f,
                    "an address handle on port {port} could not be created ({} ({errno}))",
                    errno_name(*errno)
                )?;
                if *global {
                    f.write_str(": check that the GID index exists and has an address")
                } else {
                    f.write_str(
                        ": the port needs a global route header (RoCE, or a routed \
                         InfiniBand fabric): give the peer's GID and a GID index",
                    )
                }
            }
            Self::FirstWqeFailed { completion } => {
                write!(
                    f,
                    "queue pair {:#x} failed on its first WQE (index {}): syndrome {:#04x}",
                    completion.qpn, completion.wqe_counter, completion.syndrome_byte
                )?;
                if let Some(s) = completion.syndrome {
                    write!(f, " ({s:?})")?;
                }
                write!(f, ", vendor syndrome {:#04x}", completion.vendor_syndrome)?;
                match completion.syndrome {
                    Some(Syndrome::LocalQpOperation) => f.write_str(
                        ": the QP rejected the WQE itself: a QP created with a receive \
                         queue it cannot use (create it with a zero-size RQ or an SRQ), a \
                         WQE index out of step with the doorbell record, or a WQE the QP \
                         type does not take",
                    ),
                    Some(Syndrome::LocalProtection) => f.write_str(
                        ": the local key does not cover the buffer with the needed rights \
                         (register it in the QP's protection domain)",
                    ),
                    Some(Syndrome::RemoteAccess) => f.write_str(
                        ": the peer rejected the remote key or address (check the rkey, \
                         the range and the remote access rights given at RST2INIT)",
                    ),
                    Some(Syndrome::TransportRetryExceeded) => f.write_str(
                        ": the peer never answered: check the address path (LID or GID, \
                         MTU), that the peer QP is in RTR, and the cabling",
                    ),
                    _ => f.write_str(": see the syndrome's meaning in the PRM"),
                }
            }
            Self::OutOfRange { what, value, limit } => {
                write!(f, "{what} is {value}, over the limit {limit}")
            }
        }
    }
}

impl std::error::Error for Mlx5Error {}
