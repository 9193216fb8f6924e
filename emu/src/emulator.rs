//! The emulator's state: one per process, made on the first call into either library.
//!
//! One software-NIC [`Fabric`] holds every device (a node each) and one engine thread
//! executes the WQEs of every queue on it. Each device is a [`SoftNic`] whose PRM
//! executor runs the DEVX commands. Every object handed to C (contexts, PDs, MRs, AHs,
//! UMEMs, UARs, DEVX objects, device lists) is a heap block this module owns, found again
//! by its address: a pointer C passes back is looked up before it is used, so a stale or
//! foreign pointer is an error with a message rather than undefined behaviour.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use ibgda::memory::DmaBuffer;
use ibgda::nic::prm::log::{self, CommandRecord};
use ibgda::nic::{SoftNic, SoftObject, SoftPd, SoftUar, SoftUmem, UarPage};
use ibgda::softnic::{EngineHandle, Fabric, MemoryRegion};
use ibgda::wqe::segment::AddressVectorSegment;

use crate::abi;
use crate::config::{Config, DeviceConfig};

/// The environment variable naming the command log.
pub const LOG_ENV: &str = "IBGDA_EMU_LOG";

/// The inode of the file `fd` names (`fstat`), if it is open.
pub(crate) fn inode_of(fd: i32) -> Option<u64> {
    // SAFETY: `stat` is plain data; all-zero is a valid value for `fstat` to overwrite.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: `fstat` writes only `st`; a closed descriptor is an error, not undefined.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st.st_ino)
}

/// A heap block handed to C: freed when dropped.
pub(crate) struct Owned<T>(NonNull<T>);

impl<T> Owned<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(NonNull::from(Box::leak(Box::new(value))))
    }
    /// The address C holds.
    pub(crate) fn ptr(&self) -> *mut T {
        self.0.as_ptr()
    }
    pub(crate) fn key(&self) -> usize {
        self.0.as_ptr() as usize
    }
    /// The block.
    pub(crate) fn get(&self) -> &T {
        // SAFETY: the block is alive while `self` is (freed only in `drop`); C only reads
        // it (the structures handed out are outputs), and every write from Rust goes
        // through `get_mut`, under the objects lock that `&mut self` implies.
        unsafe { self.0.as_ref() }
    }
    pub(crate) fn get_mut(&mut self) -> &mut T {
        // SAFETY: as `get`; `&mut self` is the only Rust access.
        unsafe { self.0.as_mut() }
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: made by `Box::leak` in `new`, freed once, here.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

// SAFETY: the blocks are plain C structures whose pointers name other blocks of this
// module (or are null); Rust writes them only through `&mut Owned` (under the objects
// lock), C only reads them.
unsafe impl<T> Send for Owned<T> {}
// SAFETY: as above: shared access is read-only.
unsafe impl<T> Sync for Owned<T> {}

/// An emulated device.
pub(crate) struct Device {
    pub(crate) config: DeviceConfig,
    /// `struct ibv_device`, for as long as the process lives (device lists point at it).
    pub(crate) ibv: Owned<abi::ibv_device>,
    pub(crate) nic: SoftNic,
    /// How many commands of each opcode it has received (for `fault.command nth=`).
    pub(crate) command_counts: Mutex<HashMap<u16, u32>>,
}

/// An open device context.
pub(crate) struct Context {
    /// The C block (freed with this).
    pub(crate) _block: Owned<abi::verbs_context>,
    pub(crate) device: usize,
    /// Opened by `mlx5dv_open_device` with `MLX5DV_CONTEXT_FLAGS_DEVX`.
    pub(crate) devx: bool,
}

pub(crate) struct Pd {
    /// The C block (freed with this).
    pub(crate) _block: Owned<abi::ibv_pd>,
    /// The device's PD (`None` for a parent domain, which stands for its parent's).
    pub(crate) _soft: Option<SoftPd>,
    pub(crate) pdn: u32,
    /// The PD a parent domain stands for.
    pub(crate) parent: Option<usize>,
    pub(crate) context: usize,
}

/// A verbs CQ: CREATE_CQ over memory the emulator allocated.
pub(crate) struct Cq {
    /// The C block (freed with this).
    pub(crate) _block: Owned<abi::ibv_cq>,
    pub(crate) cqn: u32,
    pub(crate) entries: u32,
    /// Where the ring and the doorbell record are (for `mlx5dv_init_obj`).
    pub(crate) ring: usize,
    pub(crate) dbrec: usize,
    pub(crate) uar_register: usize,
    /// The ring and record, owned by the device as UMEMs.
    pub(crate) _umems: [SoftUmem; 2],
    pub(crate) _uar: SoftUar,
    pub(crate) _page: Arc<DmaBuffer>,
    pub(crate) context: usize,
}

/// A shared receive queue: the device's SRQ, and the ring `mlx5dv_init_obj` reports.
pub(crate) struct Srq {
    /// The C block (freed with this).
    pub(crate) _block: Owned<abi::ibv_srq>,
    /// The device's SRQ (destroyed with this).
    pub(crate) soft: ibgda::nic::SoftSrq,
    pub(crate) srqn: u32,
    /// The receive WQEs it holds (its ring has one more).
    pub(crate) max_wr: u32,
    /// Receive WQEs posted over its life.
    pub(crate) posted: u64,
    /// The WQE buffer and record `mlx5dv_init_obj` reports.
    pub(crate) buffer: DmaBuffer,
    pub(crate) dbrec: DmaBuffer,
    pub(crate) pd: usize,
    pub(crate) context: usize,
}

/// A verbs queue pair: a DC target (`mlx5dv_create_qp`), created on the device at RTR.
pub(crate) struct Qp {
    pub(crate) block: Owned<abi::ibv_qp>,
    pub(crate) pd: usize,
    pub(crate) srq: usize,
    pub(crate) recv_cq: usize,
    pub(crate) send_cq: usize,
    pub(crate) access_key: u64,
    /// The verbs access flags RST2INIT gave.
    pub(crate) access: u32,
    /// The DCT number, once CREATE_DCT ran.
    pub(crate) dct: Option<u32>,
    pub(crate) context: usize,
}

/// What a memory region is on the device.
pub(crate) enum MrBacking {
    /// Host memory: a region of the software NIC's fabric.
    Host(#[allow(dead_code)] MemoryRegion),
    /// GPU memory: a region of the CUDA software NIC.
    #[cfg(feature = "cuda")]
    Gpu(#[allow(dead_code)] crate::gpu::RegionHandle),
}

pub(crate) struct Mr {
    /// The C block (freed with this).
    pub(crate) _block: Owned<abi::ibv_mr>,
    pub(crate) _region: MrBacking,
    pub(crate) pd: usize,
    pub(crate) context: usize,
}

/// `struct mlx5_ah`'s public part: the verbs AH and its address vector, which
/// `mlx5dv_init_obj` points at.
#[repr(C)]
pub(crate) struct AhBlock {
    pub(crate) ibv: abi::ibv_ah,
    pub(crate) av: AddressVectorSegment,
}

pub(crate) struct Ah {
    pub(crate) block: Owned<AhBlock>,
    pub(crate) pd: usize,
    pub(crate) context: usize,
}

pub(crate) struct Umem {
    pub(crate) block: Owned<abi::mlx5dv_devx_umem>,
    pub(crate) soft: SoftUmem,
    pub(crate) context: usize,
}

pub(crate) struct Uar {
    /// The C block (freed with this).
    pub(crate) _block: Owned<abi::mlx5dv_devx_uar>,
    pub(crate) soft: SoftUar,
    /// The 4 KiB page C stores doorbells to (its doorbell at offset 0x800).
    pub(crate) _page: Arc<DmaBuffer>,
    pub(crate) context: usize,
}

/// A DEVX object: an opaque block whose address is its handle.
pub(crate) struct DevxObject {
    /// The C block (freed with this).
    pub(crate) _block: Owned<u64>,
    pub(crate) object: SoftObject,
    pub(crate) context: usize,
}

/// A device list from `ibv_get_device_list` (null-terminated).
pub(crate) struct DeviceList {
    pub(crate) entries: Owned<Vec<*mut abi::ibv_device>>,
}

// SAFETY: the entries point at the devices' blocks, which live for the process.
unsafe impl Send for DeviceList {}

/// Every object handed to C, by the address C holds.
#[derive(Default)]
pub(crate) struct Objects {
    pub(crate) contexts: HashMap<usize, Context>,
    pub(crate) pds: HashMap<usize, Pd>,
    pub(crate) mrs: HashMap<usize, Mr>,
    pub(crate) ahs: HashMap<usize, Ah>,
    pub(crate) umems: HashMap<usize, Umem>,
    pub(crate) uars: HashMap<usize, Uar>,
    pub(crate) devx: HashMap<usize, DevxObject>,
    pub(crate) cqs: HashMap<usize, Cq>,
    pub(crate) srqs: HashMap<usize, Srq>,
    pub(crate) qps: HashMap<usize, Qp>,
    pub(crate) lists: HashMap<usize, DeviceList>,
}

/// The command log (`IBGDA_EMU_LOG`).
pub(crate) struct CommandLog {
    file: Mutex<File>,
    seq: AtomicU64,
}

impl CommandLog {
    fn open(path: &std::ffi::OsStr) -> std::io::Result<Self> {
        let mut file = File::create(path)?;
        log::write_header(&mut file)?;
        Ok(Self {
            file: Mutex::new(file),
            seq: AtomicU64::new(0),
        })
    }

    /// Appends one record (a write failure is reported once per record on stderr: the log
    /// is a diagnostic, the command's result stands).
    pub(crate) fn record(&self, device: &str, call: &str, errno: i32, input: &[u8], output: &[u8]) {
        self.record_with(device, call, errno, &[], input, output);
    }

    /// Appends one record with the call's `key=value` attributes (words without
    /// whitespace) that the command bytes do not carry.
    pub(crate) fn record_with(
        &self,
        device: &str,
        call: &str,
        errno: i32,
        attributes: &[(&str, &str)],
        input: &[u8],
        output: &[u8],
    ) {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let record = CommandRecord {
            seq,
            device: device.to_owned(),
            call: call.to_owned(),
            errno,
            attributes: attributes
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            input: input.to_vec(),
            output: output.to_vec(),
        };
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = log::write_record(&mut *file, &record).and_then(|()| file.flush()) {
            eprintln!("ibgda-emu: writing {LOG_ENV}: {e}");
        }
    }
}

/// What a DMA-BUF descriptor an exporter announced covers (read by the GPU path)
/// (`ibgda_emu_register_dmabuf`): the device range, and the DMA-BUF's inode, so that a
/// descriptor number the process reused for another file is not taken for it.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) struct DmabufExport {
    pub(crate) inode: u64,
    pub(crate) start: u64,
    pub(crate) len: u64,
}

/// The process's emulator.
pub(crate) struct Emulator {
    pub(crate) fabric: Fabric,
    _engine: EngineHandle,
    pub(crate) devices: Vec<Device>,
    pub(crate) log: Option<CommandLog>,
    objects: Mutex<Objects>,
    /// DMA-BUF exports announced, by descriptor.
    dmabufs: Mutex<HashMap<i32, DmabufExport>>,
    /// Every DEVX UAR page by device and page number (readable without the objects lock:
    /// the GPU path looks pages up while a command runs).
    uar_pages: Mutex<HashMap<(usize, u32), Arc<DmaBuffer>>>,
}

fn fill(dst: &mut [core::ffi::c_char], text: &str) {
    let room = dst.len() - 1;
    for (d, s) in dst.iter_mut().zip(text.bytes().take(room)) {
        *d = s as core::ffi::c_char;
    }
}

impl Emulator {
    fn new() -> Result<Self, String> {
        let config = Config::from_env().map_err(|e| e.to_string())?;
        let fabric = Fabric::new();
        let mut devices = Vec::with_capacity(config.devices.len());
        for (index, device) in config.devices.into_iter().enumerate() {
            // InfiniBand devices are nodes the fabric reaches by LID; Ethernet (RoCE) ones
            // are nodes with a MAC and the port's GIDs (RoCE v2), reached by GID through
            // the MAC, as the software NIC's RoCE ports are.
            let nic = match device.link_layer {
                ibgda::nic::LinkLayer::InfiniBand => SoftNic::open(&fabric, device.lid),
                ibgda::nic::LinkLayer::Ethernet => SoftNic::open_roce(
                    &fabric,
                    device.ethernet_mac(),
                    device
                        .gids
                        .iter()
                        .map(|gid| ibgda::nic::GidEntry {
                            gid: ibgda::nic::Gid(*gid),
                            kind: ibgda::nic::GidType::RoceV2,
                        })
                        .collect(),
                ),
            }
            .map_err(|e| format!("device {}: {e}", device.name))?
            .with_caps(device.caps)
            .with_mtu(device.mtu);
            let mut ibv = abi::ibv_device {
                _ops: abi::_ibv_device_ops {
                    _dummy1: None,
                    _dummy2: None,
                },
                node_type: abi::IBV_NODE_CA,
                transport_type: abi::IBV_TRANSPORT_IB,
                name: [0; abi::IBV_SYSFS_NAME_MAX],
                dev_name: [0; abi::IBV_SYSFS_NAME_MAX],
                dev_path: [0; abi::IBV_SYSFS_PATH_MAX],
                ibdev_path: [0; abi::IBV_SYSFS_PATH_MAX],
            };
            fill(&mut ibv.name, &device.name);
            fill(&mut ibv.dev_name, &format!("uverbs{index}"));
            fill(
                &mut ibv.dev_path,
                &format!("/sys/class/infiniband_verbs/uverbs{index}"),
            );
            fill(
                &mut ibv.ibdev_path,
                &format!("/sys/class/infiniband/{}", device.name),
            );
            devices.push(Device {
                config: device,
                ibv: Owned::new(ibv),
                nic,
                command_counts: Mutex::new(HashMap::new()),
            });
        }
        let log = match std::env::var_os(LOG_ENV).filter(|p| !p.is_empty()) {
            Some(path) => Some(
                CommandLog::open(&path)
                    .map_err(|e| format!("{LOG_ENV}={}: {e}", path.to_string_lossy()))?,
            ),
            None => None,
        };
        let engine = fabric.spawn_engine();
        Ok(Self {
            fabric,
            _engine: engine,
            devices,
            log,
            objects: Mutex::new(Objects::default()),
            dmabufs: Mutex::new(HashMap::new()),
            uar_pages: Mutex::new(HashMap::new()),
        })
    }

    /// The DMA-BUF exports announced, by descriptor.
    pub(crate) fn dmabufs(&self) -> MutexGuard<'_, HashMap<i32, DmabufExport>> {
        self.dmabufs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What the DMA-BUF `fd` covers, if an exporter announced it and `fd` is still that
    /// DMA-BUF.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn dmabuf(&self, fd: i32) -> Option<DmabufExport> {
        let known = *self.dmabufs().get(&fd)?;
        (inode_of(fd)? == known.inode).then_some(known)
    }

    /// The DEVX UAR pages, by device and page number.
    pub(crate) fn uar_pages(&self) -> MutexGuard<'_, HashMap<(usize, u32), Arc<DmaBuffer>>> {
        self.uar_pages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The process's emulator, made on first use; a configuration error is returned to
    /// every call (and printed by each).
    pub(crate) fn get() -> Result<&'static Self, String> {
        static EMULATOR: OnceLock<Result<Emulator, String>> = OnceLock::new();
        EMULATOR
            .get_or_init(Self::new)
            .as_ref()
            .map_err(Clone::clone)
    }

    pub(crate) fn objects(&self) -> MutexGuard<'_, Objects> {
        self.objects.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The device whose `struct ibv_device` is at `ptr`.
    pub(crate) fn device_at(&self, ptr: *const abi::ibv_device) -> Option<usize> {
        self.devices
            .iter()
            .position(|d| core::ptr::eq(d.ibv.ptr(), ptr))
    }

    /// Counts a command to `device` and returns the configured failure for it, if any:
    /// `(status, syndrome)`.
    pub(crate) fn command_fault(&self, device: usize, opcode: u16) -> Option<(u8, u32)> {
        let d = &self.devices[device];
        let count = {
            let mut counts = d
                .command_counts
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let n = counts.entry(opcode).or_insert(0);
            *n += 1;
            *n
        };
        d.config
            .faults
            .commands
            .iter()
            .find(|f| f.opcode == opcode && f.nth.is_none_or(|nth| nth == count))
            .map(|f| (f.status, f.syndrome))
    }
}

impl Objects {
    /// Releases everything `context` still holds, in the order the device needs (queue
    /// pairs and DC targets, then CQs, then UMEMs, UARs, address handles, memory regions and
    /// protection domains), as the kernel does when a context closes.
    pub(crate) fn release_context(&mut self, emulator: &Emulator, context: usize, device: usize) {
        let nic = &emulator.devices[device].nic;
        let release = |object: SoftObject| {
            let (input, _) = crate::dv::destroy_command(object);
            if let Err(e) = nic.destroy_object(object, &input) {
                eprintln!(
                    "ibgda-emu: ibv_close_device: destroying {object:?} left by the context failed: {e}"
                );
            }
        };
        // Queue pairs and DCTs (DEVX and verbs) before the CQs they complete to.
        let mut objects: Vec<usize> = self
            .devx
            .iter()
            .filter(|(_, o)| o.context == context)
            .map(|(k, _)| *k)
            .collect();
        objects.sort_by_key(|k| matches!(self.devx[k].object, SoftObject::Cq(_)));
        let (queues, cqs): (Vec<usize>, Vec<usize>) = objects
            .into_iter()
            .partition(|k| !matches!(self.devx[k].object, SoftObject::Cq(_)));
        for key in queues {
            if let Some(object) = self.devx.remove(&key) {
                release(object.object);
            }
        }
        let verbs_qps: Vec<usize> = self
            .qps
            .iter()
            .filter(|(_, q)| q.context == context)
            .map(|(k, _)| *k)
            .collect();
        for key in verbs_qps {
            if let Some(dct) = self.qps.remove(&key).and_then(|q| q.dct) {
                release(SoftObject::Dct(dct));
            }
        }
        for key in cqs {
            if let Some(object) = self.devx.remove(&key) {
                release(object.object);
            }
        }
        let verbs_cqs: Vec<usize> = self
            .cqs
            .iter()
            .filter(|(_, c)| c.context == context)
            .map(|(k, _)| *k)
            .collect();
        for key in verbs_cqs {
            if let Some(cq) = self.cqs.remove(&key) {
                release(SoftObject::Cq(cq.cqn));
            }
        }
        self.srqs.retain(|_, s| s.context != context);
        self.umems.retain(|_, u| u.context != context);
        let mut pages = emulator.uar_pages();
        for u in self.uars.values().filter(|u| u.context == context) {
            pages.remove(&(device, u.soft.page_id()));
        }
        drop(pages);
        self.uars.retain(|_, u| u.context != context);
        self.ahs.retain(|_, a| a.context != context);
        self.mrs.retain(|_, m| m.context != context);
        // Parent domains before the PDs they stand for.
        self.pds
            .retain(|_, p| p.context != context || p.parent.is_none());
        self.pds.retain(|_, p| p.context != context);
    }
}
