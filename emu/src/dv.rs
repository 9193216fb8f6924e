//! The mlx5 direct-verbs and DEVX entry points of `libmlx5.so.1`.
//!
//! Every DEVX command goes to the device's [`SoftNic`](ibgda::nic::SoftNic), whose PRM
//! executor (the one the control plane's software backend runs) decodes it, checks it
//! against the NIC's tables and answers with the output bytes firmware would write. A
//! command the executor refuses leaves its status and syndrome in the output and the call
//! fails with `EREMOTEIO`, as rdma-core's DEVX calls report a failed command. UMEMs are
//! the caller's memory, UARs are 4 KiB pages whose doorbell (offset 0x800) the engine
//! watches.
//!
//! Every `unsafe extern "C"` function here has the contract of the rdma-core function of
//! the same name (`mlx5dv_*(3)` man pages).

#![allow(clippy::missing_safety_doc)]

use core::ffi::{c_char, c_int, c_void};
use std::ptr::NonNull;
use std::sync::Arc;

use ibgda::cq::Syndrome;
use ibgda::memory::DmaBuffer;
use ibgda::nic::prm::{
    AllocUar, AllocUarOutput, Command, CommandOutput, CommandStatus, DeallocUar, DestroyCq,
    DestroyDct, DestroyQp, PrmError,
};
use ibgda::nic::{Backend, NicError, SoftObject, UarPage, UmemId};

use crate::abi::*;
use crate::emulator::{DevxObject, Emulator, Owned, Uar, Umem};
use crate::entry::{
    self, caller_memory, find, input, not_ours, out_block, output, Failure, Outcome,
};
use crate::verbs::{context_of, open_context};

/// The vendor syndrome of an injected transport-retry-exceeded error CQE (this emulator's
/// own code; the software NIC's table in `ibgda::softnic` lists the others).
pub const RETRY_EXCEEDED_VENDOR_SYNDROME: u8 = 0x81;

/// Syndrome of a command the emulator cannot decode (a bit outside every field it knows,
/// a value with no meaning, a short buffer): status BAD_PARAMETER. The software NIC's own
/// syndromes (`ibgda::nic` soft_commands) are 0x01..0x0b.
pub const UNDECODABLE_SYNDROME: u32 = 0x0c;

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_is_supported(device: *mut ibv_device) -> bool {
    entry::run(
        "mlx5dv_is_supported",
        |_| false,
        |emulator| {
            let index = emulator
                .device_at(device)
                .ok_or_else(|| not_ours(device, "a device"))?;
            Ok(emulator.devices[index].config.mlx5)
        },
    )
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_open_device(
    device: *mut ibv_device,
    attr: *mut mlx5dv_context_attr,
) -> *mut ibv_context {
    entry::pointer("mlx5dv_open_device", |emulator| {
        let index = emulator
            .device_at(device)
            .ok_or_else(|| not_ours(device, "a device"))?;
        let config = &emulator.devices[index].config;
        if !config.mlx5 {
            return Err(Failure::new(
                libc::EOPNOTSUPP,
                format!("{} is not driven by the mlx5 provider", config.name),
            ));
        }
        let flags = if attr.is_null() {
            0
        } else {
            // SAFETY: a non-null `struct mlx5dv_context_attr *`.
            let attr = unsafe { &*attr };
            if attr.comp_mask != 0 {
                return Err(Failure::invalid(format!("comp_mask {:#x}", attr.comp_mask)));
            }
            attr.flags
        };
        if flags & !MLX5DV_CONTEXT_FLAGS_DEVX != 0 {
            return Err(Failure::new(libc::EOPNOTSUPP, format!("flags {flags:#x}")));
        }
        if flags & MLX5DV_CONTEXT_FLAGS_DEVX == 0 {
            // As ibv_open_device: DEVX when the kernel grants it, none otherwise.
            let devx = crate::verbs::devx_by_default(emulator, index);
            return Ok(open_context(emulator, index, devx));
        }
        if let Some(errno) = config.faults.open_devx {
            return Err(Failure::new(
                errno,
                "configured to refuse DEVX (fault.open_devx)",
            ));
        }
        Ok(open_context(emulator, index, true))
    })
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_query_device(
    context: *mut ibv_context,
    attrs: *mut mlx5dv_context_head,
) -> c_int {
    entry::status("mlx5dv_query_device", |emulator| {
        let device = context_of(&emulator.objects(), context)?.0;
        if attrs.is_null() {
            return Err(Failure::invalid("a null attribute block"));
        }
        let caps = &emulator.devices[device].config.caps;
        let mut flags = MLX5DV_CONTEXT_FLAGS_BLUEFLAME;
        if caps.cqe_version == 1 {
            flags |= MLX5DV_CONTEXT_FLAGS_CQE_V1;
        }
        // SAFETY: a non-null `struct mlx5dv_context *`, whose first fields these are; no
        // optional field is reported (comp_mask 0), so none past them is written.
        unsafe {
            (*attrs).version = 1;
            (*attrs).flags = flags;
            (*attrs).comp_mask = 0;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_init_obj(obj: *mut mlx5dv_obj, obj_type: u64) -> c_int {
    entry::status("mlx5dv_init_obj", |emulator| {
        if obj.is_null() {
            return Err(Failure::invalid("a null object block"));
        }
        let supported = MLX5DV_OBJ_PD | MLX5DV_OBJ_AH | MLX5DV_OBJ_CQ | MLX5DV_OBJ_SRQ;
        if obj_type & !supported != 0 {
            return Err(Failure::new(
                libc::EOPNOTSUPP,
                format!(
                    "object types {obj_type:#x}: the emulator answers for PDs, AHs, CQs and \
                     SRQs (verbs QPs, WQs and device memory are not implemented)"
                ),
            ));
        }
        // SAFETY: a non-null `struct mlx5dv_obj *`.
        let obj = unsafe { &mut *obj };
        let objects = emulator.objects();
        if obj_type & MLX5DV_OBJ_PD != 0 {
            let pd = find(&objects.pds, obj.pd.in_, "a PD")?;
            let out = out_block::<mlx5dv_pd>(obj.pd.out, "mlx5dv_pd")?;
            // SAFETY: a non-null `struct mlx5dv_pd *`.
            unsafe {
                (*out).pdn = pd.pdn;
                (*out).comp_mask = 0;
            }
        }
        if obj_type & MLX5DV_OBJ_CQ != 0 {
            crate::queues::cq_obj(&objects, &obj.cq)?;
        }
        if obj_type & MLX5DV_OBJ_SRQ != 0 {
            crate::queues::srq_obj(&objects, &obj.srq)?;
        }
        if obj_type & MLX5DV_OBJ_AH != 0 {
            let ah = find(&objects.ahs, obj.ah.in_, "an AH")?;
            let out = out_block::<mlx5dv_ah>(obj.ah.out, "mlx5dv_ah")?;
            // SAFETY: a non-null `struct mlx5dv_ah *`; the vector lives as long as the AH.
            unsafe {
                (*out).av = core::ptr::addr_of!(ah.block.get().av).cast_mut().cast();
                (*out).comp_mask = 0;
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_get_data_direct_sysfs_path(
    context: *mut ibv_context,
    _buf: *mut c_char,
    _buf_len: usize,
) -> c_int {
    // No emulated device has a data-direct DMA device: ENODEV, which callers read as
    // "none" (rdma-core answers the same for a ConnectX without one).
    entry::run(
        "mlx5dv_get_data_direct_sysfs_path",
        |e| e,
        |emulator| {
            context_of(&emulator.objects(), context)?;
            Ok(libc::ENODEV)
        },
    )
}

/// The context `ctx` as a DEVX context: its device index.
fn devx_context(emulator: &Emulator, ctx: *mut ibv_context) -> Outcome<usize> {
    let objects = emulator.objects();
    let (device, context) = context_of(&objects, ctx)?;
    if !context.devx {
        return Err(Failure::new(
            libc::EOPNOTSUPP,
            "DEVX on a context opened without MLX5DV_CONTEXT_FLAGS_DEVX",
        ));
    }
    Ok(device)
}

/// Opcodes the kernel's mlx5 driver lets any context send as general commands
/// (`devx_is_whitelist_cmd` in drivers/infiniband/hw/mlx5/devx.c): QUERY_HCA_CAP,
/// QUERY_HCA_VPORT_CONTEXT and QUERY_ESW_VPORT_CONTEXT. A context opened without DEVX
/// sends them under the device's own DEVX uid, which the driver makes at probe time
/// without the caller's CAP_NET_RAW (so an unprivileged container may send them too).
const WHITELISTED_GENERAL_COMMANDS: [u16; 3] =
    [ibgda::nic::prm::opcode::QUERY_HCA_CAP, 0x762, 0x752];

/// The context `ctx` for a general command: a DEVX context, or any context of the device
/// for the kernel's whitelisted queries (how NVSHMEM reads capabilities from a context
/// it opened with `ibv_open_device`).
fn general_command_context(
    emulator: &Emulator,
    ctx: *mut ibv_context,
    input: &[u8],
) -> Outcome<usize> {
    if WHITELISTED_GENERAL_COMMANDS.contains(&opcode_of(input)) {
        let objects = emulator.objects();
        let (device, _) = context_of(&objects, ctx)?;
        return Ok(device);
    }
    devx_context(emulator, ctx)
}

/// Writes a failed command's status and syndrome into its output header (the PRM's
/// `mbox_out`: status in byte 0, syndrome in bytes 4..8).
fn write_failure(output: &mut [u8], status: CommandStatus, syndrome: u32) {
    if let Some(header) = output.get_mut(..8) {
        header.fill(0);
        header[0] = status.byte();
        header[4..].copy_from_slice(&syndrome.to_be_bytes());
    }
}

fn opcode_of(input: &[u8]) -> u16 {
    match input.get(..2) {
        Some(b) => u16::from_be_bytes([b[0], b[1]]),
        None => 0,
    }
}

/// The errno for a command the executor did not complete, with the output's status set
/// where the executor did not set it.
fn command_failure(error: NicError, output: &mut [u8], opcode: u16) -> Failure {
    let name = ibgda::nic::prm::opcode::name(opcode);
    match error {
        NicError::Command(e @ PrmError::CommandError { .. }) => Failure::new(
            libc::EREMOTEIO,
            format!("{name} (opcode {opcode:#06x}) failed: {e}"),
        ),
        NicError::UnknownOpcode { .. } => {
            write_failure(output, CommandStatus::BadOpcode, 0);
            Failure::new(
                libc::EREMOTEIO,
                format!("{name} (opcode {opcode:#06x}) is not modelled by the emulated ConnectX"),
            )
        }
        NicError::Command(e) => {
            write_failure(output, CommandStatus::BadParameter, UNDECODABLE_SYNDROME);
            Failure::new(
                libc::EREMOTEIO,
                format!(
                    "{name} (opcode {opcode:#06x}) refused, status BAD_PARAMETER syndrome \
                     {UNDECODABLE_SYNDROME:#x}: the emulator decodes strictly and {e}"
                ),
            )
        }
        other => Failure::invalid(format!("{name} (opcode {opcode:#06x}): {other}")),
    }
}

/// Runs a command on device `device` through `execute`, after the configured command
/// faults, and logs it.
pub(crate) fn command<T>(
    emulator: &Emulator,
    call: &'static str,
    device: usize,
    input: &[u8],
    output: &mut [u8],
    execute: impl FnOnce(&[u8], &mut [u8]) -> Result<T, NicError>,
) -> Outcome<T> {
    let opcode = opcode_of(input);
    let result = match emulator.command_fault(device, opcode) {
        Some((status, syndrome)) => {
            write_failure(output, CommandStatus::from_byte(status), syndrome);
            Err(Failure::new(
                libc::EREMOTEIO,
                format!(
                    "{} (opcode {opcode:#06x}) configured to fail with status {status:#04x} \
                     syndrome {syndrome:#x} (fault.command)",
                    ibgda::nic::prm::opcode::name(opcode)
                ),
            ))
        }
        None => execute(input, output).map_err(|e| command_failure(e, output, opcode)),
    };
    #[cfg(feature = "cuda")]
    if result.is_ok() {
        crate::gpu::observe(emulator, device, input, output);
    }
    if let Some(log) = &emulator.log {
        let errno = result.as_ref().err().map_or(0, |f| f.errno);
        log.record(
            &emulator.devices[device].config.name,
            call,
            errno,
            input,
            output,
        );
    }
    result
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_devx_general_cmd(
    context: *mut ibv_context,
    in_: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> c_int {
    entry::status("mlx5dv_devx_general_cmd", |emulator| {
        // SAFETY: the caller's buffers of the given lengths (the function's contract).
        let (input, output) = unsafe { (input(in_, inlen)?, output(out, outlen)?) };
        let device = general_command_context(emulator, context, input)?;
        let nic = &emulator.devices[device].nic;
        command(
            emulator,
            "mlx5dv_devx_general_cmd",
            device,
            input,
            output,
            |i, o| nic.general_command(i, o),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_devx_obj_create(
    context: *mut ibv_context,
    in_: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> *mut c_void {
    entry::pointer("mlx5dv_devx_obj_create", |emulator| {
        let device = devx_context(emulator, context)?;
        // SAFETY: the caller's buffers of the given lengths (the function's contract).
        let (input, output) = unsafe { (input(in_, inlen)?, output(out, outlen)?) };
        let d = &emulator.devices[device];
        let object = command(
            emulator,
            "mlx5dv_devx_obj_create",
            device,
            input,
            output,
            |i, o| d.nic.create_object(i, o),
        )?;
        if let SoftObject::Qp(qpn) = object {
            inject_faults(emulator, device, qpn);
        }
        let block = Owned::new(0u64);
        let ptr = block.ptr().cast::<c_void>();
        emulator.objects().devx.insert(
            block.key(),
            DevxObject {
                _block: block,
                object,
                context: context as usize,
            },
        );
        Ok(ptr)
    })
}

/// Arms the configured data-path faults on a new queue pair.
fn inject_faults(emulator: &Emulator, device: usize, qpn: u32) {
    let faults = &emulator.devices[device].config.faults;
    let injection = match (
        faults.first_wqe_vendor_syndrome,
        faults.transport_retry_exceeded_at,
    ) {
        (Some(vendor), _) => Some((0, Syndrome::LocalQpOperation, vendor)),
        (None, Some(at)) => Some((
            at,
            Syndrome::TransportRetryExceeded,
            RETRY_EXCEEDED_VENDOR_SYNDROME,
        )),
        (None, None) => None,
    };
    if let Some((at, syndrome, vendor)) = injection {
        if let Err(e) = emulator.fabric.inject_fault(qpn, at, syndrome, vendor) {
            eprintln!("ibgda-emu: arming the configured fault on QP {qpn:#x}: {e}");
        }
    }
}

fn devx_object(objects: &crate::emulator::Objects, obj: *mut c_void) -> Outcome<&DevxObject> {
    find(&objects.devx, obj, "a DEVX object")
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_devx_obj_modify(
    obj: *mut c_void,
    in_: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> c_int {
    entry::status("mlx5dv_devx_obj_modify", |emulator| {
        let (object, context) = {
            let objects = emulator.objects();
            let o = devx_object(&objects, obj)?;
            (o.object, o.context)
        };
        let device = emulator.objects().contexts[&context].device;
        // SAFETY: the caller's buffers of the given lengths (the function's contract).
        let (input, output) = unsafe { (input(in_, inlen)?, output(out, outlen)?) };
        let nic = &emulator.devices[device].nic;
        command(
            emulator,
            "mlx5dv_devx_obj_modify",
            device,
            input,
            output,
            |i, o| nic.modify_object(&object, i, o),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_devx_obj_query(
    obj: *mut c_void,
    in_: *const c_void,
    inlen: usize,
    out: *mut c_void,
    outlen: usize,
) -> c_int {
    entry::status("mlx5dv_devx_obj_query", |emulator| {
        let context = devx_object(&emulator.objects(), obj)?.context;
        let device = emulator.objects().contexts[&context].device;
        // SAFETY: the caller's buffers of the given lengths (the function's contract).
        let (input, output) = unsafe { (input(in_, inlen)?, output(out, outlen)?) };
        // The executor answers no query command: BAD_OPCODE, reported as not modelled.
        command(
            emulator,
            "mlx5dv_devx_obj_query",
            device,
            input,
            output,
            |i, _| {
                Err::<(), _>(NicError::UnknownOpcode {
                    opcode: opcode_of(i),
                })
            },
        )
    })
}

/// The DESTROY command of `object` (what the kernel records when the object is created)
/// and the size of its output.
pub(crate) fn destroy_command(object: SoftObject) -> (Vec<u8>, usize) {
    let encoded = match object {
        SoftObject::Cq(cqn) => DestroyCq { uid: 0, cqn }.encode(),
        SoftObject::Qp(qpn) => DestroyQp { uid: 0, qpn }.encode(),
        SoftObject::Dct(dctn) => DestroyDct { uid: 0, dctn }.encode(),
    };
    // The numbers came from the executor, so they fit their fields.
    (encoded.unwrap_or_default(), 16)
}

/// Destroys `object` of device `device` with its DESTROY command `input`, as `call`
/// (logged, after the configured command faults).
pub(crate) fn destroy(
    emulator: &Emulator,
    call: &'static str,
    device: usize,
    object: SoftObject,
    input: &[u8],
) -> Outcome<()> {
    let mut output = vec![0u8; 16];
    let nic = &emulator.devices[device].nic;
    command(emulator, call, device, input, &mut output, |i, o| {
        nic.destroy_object(object, i).inspect_err(|e| {
            if let NicError::Command(PrmError::CommandError {
                status, syndrome, ..
            }) = e
            {
                write_failure(o, *status, *syndrome);
            }
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_devx_obj_destroy(obj: *mut c_void) -> c_int {
    entry::status("mlx5dv_devx_obj_destroy", |emulator| {
        let mut objects = emulator.objects();
        let o = devx_object(&objects, obj)?;
        let (object, device) = (o.object, objects.contexts[&o.context].device);
        let (input, _) = destroy_command(object);
        destroy(emulator, "mlx5dv_devx_obj_destroy", device, object, &input)?;
        objects.devx.remove(&(obj as usize));
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_devx_query_eqn(
    context: *mut ibv_context,
    vector: u32,
    eqn: *mut u32,
) -> c_int {
    entry::status("mlx5dv_devx_query_eqn", |emulator| {
        let device = devx_context(emulator, context)?;
        let vectors = emulator.devices[device].config.num_comp_vectors;
        if vector >= vectors {
            return Err(Failure::invalid(format!(
                "completion vector {vector}: the device has {vectors}"
            )));
        }
        if eqn.is_null() {
            return Err(Failure::invalid("a null eqn"));
        }
        // Every vector reports to the software NIC's one event queue (events are not
        // modelled).
        let number = emulator.devices[device]
            .nic
            .query_eqn(0)
            .map_err(|e| Failure::invalid(e.to_string()))?;
        // SAFETY: a non-null out-pointer.
        unsafe { eqn.write(number) };
        Ok(())
    })
}

/// Registers `[addr, addr + size)` as UMEM on `context`.
fn register_umem(
    emulator: &Emulator,
    context: *mut ibv_context,
    addr: u64,
    size: usize,
    access: u32,
) -> Outcome<*mut mlx5dv_devx_umem> {
    let device = devx_context(emulator, context)?;
    if let Some(errno) = emulator.devices[device].config.faults.umem_reg {
        return Err(Failure::new(errno, "configured to fail (fault.umem_reg)"));
    }
    // IBV_ACCESS_LOCAL_WRITE and the remote rights; the NIC writes CQs and records.
    if access & !0xf != 0 {
        return Err(Failure::invalid(format!("access {access:#x}")));
    }
    // GPU memory by address: what the peer-memory module resolves (NVSHMEM's fallback
    // when DMA-BUF fails).
    #[cfg(feature = "cuda")]
    if crate::gpu::is_gpu_memory(addr, size as u64) {
        let soft = crate::gpu::register_umem_at(emulator, device, addr, size)?;
        return Ok(umem_block(emulator, context, soft));
    }
    let (buffer, offset) = caller_memory(addr, size as u64)?;
    if offset != 0 || buffer.len() != size {
        return Err(Failure::new(
            libc::EOPNOTSUPP,
            format!(
                "{size} bytes at {addr:#x}: the emulator registers whole 8-byte words as UMEM \
                 (queue memory is)"
            ),
        ));
    }
    let soft = emulator.devices[device]
        .nic
        .register_umem_buffer(buffer)
        .map_err(|e| Failure::new(libc::ENOMEM, e.to_string()))?;
    Ok(umem_block(emulator, context, soft))
}

/// The C block of a new UMEM registration of `context`.
fn umem_block(
    emulator: &Emulator,
    context: *mut ibv_context,
    soft: ibgda::nic::SoftUmem,
) -> *mut mlx5dv_devx_umem {
    let block = Owned::new(mlx5dv_devx_umem {
        umem_id: soft.umem_id(),
    });
    let ptr = block.ptr();
    emulator.objects().umems.insert(
        block.key(),
        Umem {
            block,
            soft,
            context: context as usize,
        },
    );
    ptr
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_devx_umem_reg(
    context: *mut ibv_context,
    addr: *mut c_void,
    size: usize,
    access: u32,
) -> *mut mlx5dv_devx_umem {
    entry::pointer("mlx5dv_devx_umem_reg", |emulator| {
        register_umem(emulator, context, addr as u64, size, access)
    })
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_devx_umem_reg_ex(
    context: *mut ibv_context,
    umem_in: *mut mlx5dv_devx_umem_in,
) -> *mut mlx5dv_devx_umem {
    entry::pointer("mlx5dv_devx_umem_reg_ex", |emulator| {
        if umem_in.is_null() {
            return Err(Failure::invalid("a null mlx5dv_devx_umem_in"));
        }
        // SAFETY: a non-null `struct mlx5dv_devx_umem_in *`.
        let umem_in = unsafe { &*umem_in };
        let device = devx_context(emulator, context)?;
        if umem_in.comp_mask & !MLX5DV_UMEM_MASK_DMABUF != 0 {
            return Err(Failure::invalid(format!(
                "comp_mask {:#x}",
                umem_in.comp_mask
            )));
        }
        if umem_in.pgsz_bitmap & 4096 == 0 {
            return Err(Failure::invalid(format!(
                "page sizes {:#x} exclude 4 KiB, the emulator's page",
                umem_in.pgsz_bitmap
            )));
        }
        if umem_in.comp_mask & MLX5DV_UMEM_MASK_DMABUF != 0 {
            if let Some(errno) = emulator.devices[device].config.faults.umem_reg_dmabuf {
                return Err(Failure::new(
                    errno,
                    "configured to fail for DMA-BUF memory (fault.umem_reg_dmabuf)",
                ));
            }
            #[cfg(feature = "cuda")]
            {
                // With the DMA-BUF mask, `addr` is the offset into the DMA-BUF.
                let soft = crate::gpu::register_umem(
                    emulator,
                    device,
                    umem_in.dmabuf_fd,
                    umem_in.addr as u64,
                    umem_in.size,
                )?;
                return Ok(umem_block(emulator, context, soft));
            }
            #[cfg(not(feature = "cuda"))]
            return Err(Failure::new(
                libc::EOPNOTSUPP,
                format!(
                    "DMA-BUF fd {}: the CPU emulator cannot reach DMA-BUF memory (GPU queue \
                     memory needs the CUDA software NIC, see emu/README.md)",
                    umem_in.dmabuf_fd
                ),
            ));
        }
        register_umem(
            emulator,
            context,
            umem_in.addr as u64,
            umem_in.size,
            umem_in.access,
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_devx_umem_dereg(umem: *mut mlx5dv_devx_umem) -> c_int {
    entry::status("mlx5dv_devx_umem_dereg", |emulator| {
        let mut objects = emulator.objects();
        let u = find(&objects.umems, umem, "a UMEM")?;
        if u.soft.is_in_use() {
            return Err(Failure::new(
                libc::EBUSY,
                format!(
                    "UMEM {} is still used by a CQ or a queue pair",
                    u.block.get().umem_id
                ),
            ));
        }
        #[cfg(feature = "cuda")]
        crate::gpu::forget_umem(objects.contexts[&u.context].device, u.soft.umem_id());
        objects.umems.remove(&(umem as usize));
        Ok(())
    })
}

/// Where the doorbell register sits in a UAR page (`MLX5_BF_OFFSET`).
const DOORBELL_OFFSET: usize = 0x800;
/// A UAR page.
const UAR_PAGE_BYTES: usize = 4096;

/// A new UAR page of `nic`: the page, the device's handle of it, and its doorbell register
/// (offset 0x800), which the engine watches.
pub(crate) fn new_uar_page(
    nic: &ibgda::nic::SoftNic,
) -> Outcome<(Arc<DmaBuffer>, ibgda::nic::SoftUar, *mut u8)> {
    let nomem = |e: &dyn std::fmt::Display| Failure::new(libc::ENOMEM, e.to_string());
    let page = Arc::new(DmaBuffer::zeroed(UAR_PAGE_BYTES, UAR_PAGE_BYTES).map_err(|e| nomem(&e))?);
    let at = NonNull::new(page.as_ptr().wrapping_add(DOORBELL_OFFSET))
        .ok_or_else(|| Failure::new(libc::ENOMEM, "a null page"))?;
    // SAFETY: the 8 bytes at 0x800 lie inside the page (4096 bytes, 4096-aligned), which
    // the view's owner (a clone of the page's `Arc`) keeps allocated; the page is
    // accessed only atomically (by this view and by producers' 64-bit stores).
    let doorbell =
        unsafe { DmaBuffer::from_raw(at, 8, Box::new(page.clone())) }.map_err(|e| nomem(&e))?;
    // The view is handed over; the page stays shared with the programs ringing it (by
    // `reg_addr`), which is what a UAR page is for.
    let soft = nic.register_uar(doorbell).map_err(|e| nomem(&e))?;
    Ok((page, soft, at.as_ptr()))
}

/// Logs a UAR allocation as the ALLOC_UAR command the kernel sends for it, with the type
/// asked for (`uar_type=bf|nc|nc_dedicated`, or the flags in hex) and the page it got.
fn log_uar(
    emulator: &Emulator,
    device: usize,
    call: &str,
    errno: i32,
    flags: u32,
    page: Option<u32>,
) {
    let Some(log) = &emulator.log else { return };
    let kind = match flags {
        MLX5DV_UAR_ALLOC_TYPE_BF => "bf".to_owned(),
        MLX5DV_UAR_ALLOC_TYPE_NC => "nc".to_owned(),
        MLX5DV_UAR_ALLOC_TYPE_NC_DEDICATED => "nc_dedicated".to_owned(),
        other => format!("{other:#x}"),
    };
    let input = AllocUar.encode().unwrap_or_default();
    let output = page
        .and_then(|uar| AllocUarOutput { uar }.encode().ok())
        .unwrap_or_else(|| vec![0; 16]);
    log.record_with(
        &emulator.devices[device].config.name,
        call,
        errno,
        &[("uar_type", &kind)],
        &input,
        &output,
    );
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_devx_alloc_uar(
    context: *mut ibv_context,
    flags: u32,
) -> *mut mlx5dv_devx_uar {
    entry::pointer("mlx5dv_devx_alloc_uar", |emulator| {
        let device = devx_context(emulator, context)?;
        let faults = &emulator.devices[device].config.faults;
        if let Some(errno) = faults.alloc_uar {
            log_uar(
                emulator,
                device,
                "mlx5dv_devx_alloc_uar",
                errno,
                flags,
                None,
            );
            return Err(Failure::new(errno, "configured to fail (fault.alloc_uar)"));
        }
        if ![
            MLX5DV_UAR_ALLOC_TYPE_BF,
            MLX5DV_UAR_ALLOC_TYPE_NC,
            MLX5DV_UAR_ALLOC_TYPE_NC_DEDICATED,
        ]
        .contains(&flags)
        {
            return Err(Failure::invalid(format!("UAR type {flags:#x}")));
        }
        let (page, soft, at) = new_uar_page(&emulator.devices[device].nic)?;
        log_uar(
            emulator,
            device,
            "mlx5dv_devx_alloc_uar",
            0,
            flags,
            Some(soft.page_id()),
        );
        emulator
            .uar_pages()
            .insert((device, soft.page_id()), page.clone());
        let block = Owned::new(mlx5dv_devx_uar {
            reg_addr: at.cast(),
            base_addr: page.as_ptr().cast(),
            page_id: soft.page_id(),
            mmap_off: 0,
            comp_mask: 0,
        });
        let ptr = block.ptr();
        emulator.objects().uars.insert(
            block.key(),
            Uar {
                _block: block,
                soft,
                _page: page,
                context: context as usize,
            },
        );
        Ok(ptr)
    })
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_devx_free_uar(uar: *mut mlx5dv_devx_uar) {
    entry::run(
        "mlx5dv_devx_free_uar",
        |_| (),
        |emulator| {
            let mut objects = emulator.objects();
            let u = find(&objects.uars, uar, "a UAR")?;
            if u.soft.is_in_use() {
                // A queue still rings it: keep the page (and its doorbell) alive.
                return Err(Failure::new(
                    libc::EBUSY,
                    format!(
                        "UAR page {} is still rung by a queue pair: it stays allocated",
                        u.soft.page_id()
                    ),
                ));
            }
            let device = objects.contexts[&u.context].device;
            if let Some(log) = &emulator.log {
                let input = DeallocUar {
                    uar: u.soft.page_id(),
                }
                .encode()
                .unwrap_or_default();
                log.record(
                    &emulator.devices[device].config.name,
                    "mlx5dv_devx_free_uar",
                    0,
                    &input,
                    &[0; 16],
                );
            }
            emulator.uar_pages().remove(&(device, u.soft.page_id()));
            objects.uars.remove(&(uar as usize));
            Ok(())
        },
    )
}
