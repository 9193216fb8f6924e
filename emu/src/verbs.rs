//! The verbs entry points of `libibverbs.so.1`: the device list, contexts, queries, PDs,
//! memory regions and address handles, with rdma-core's return conventions (documented
//! per function in its man pages) and its static-inline wrappers' operations in the
//! context (`query_port`, `query_device_ex`).
//!
//! Every `unsafe extern "C"` function here has the contract of the rdma-core function of
//! the same name: its pointer arguments are what that function's man page says (a live
//! object from this library, an attribute block of the documented type, a buffer of the
//! given size).

#![allow(clippy::missing_safety_doc)]

use core::ffi::{c_char, c_int, c_void, CStr};
use std::sync::Arc;

use ibgda::nic::{Backend, LinkLayer};
use ibgda::softnic::Access;
use ibgda::wqe::segment::AddressVectorSegment;
use zerocopy::byteorder::{U16, U32};

use crate::abi::*;
use crate::emulator::{Ah, AhBlock, Context, DeviceList, Emulator, Mr, Objects, Owned, Pd};
use crate::entry::{self, caller_memory, find, not_ours, release, Failure, Outcome};

/// The context `ctx` points at, and its device.
pub(crate) fn context_of(objects: &Objects, ctx: *mut ibv_context) -> Outcome<(usize, &Context)> {
    objects
        .contexts
        .get(&(ctx as usize))
        .map(|c| (c.device, c))
        .ok_or_else(|| not_ours(ctx, "an open context"))
}

fn device_index(emulator: &Emulator, dev: *mut ibv_device) -> Outcome<usize> {
    emulator
        .device_at(dev)
        .ok_or_else(|| not_ours(dev, "a device"))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
    entry::pointer("ibv_get_device_list", |emulator| {
        let mut entries: Vec<*mut ibv_device> =
            emulator.devices.iter().map(|d| d.ibv.ptr()).collect();
        let count = entries.len();
        entries.push(core::ptr::null_mut());
        let mut owned = Owned::new(entries);
        let array = owned.get_mut().as_mut_ptr();
        if !num_devices.is_null() {
            // SAFETY: a non-null out-pointer of the documented type.
            unsafe { *num_devices = count as c_int };
        }
        emulator
            .objects()
            .lists
            .insert(array as usize, DeviceList { entries: owned });
        Ok(array)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    entry::run(
        "ibv_free_device_list",
        |_| (),
        |emulator| {
            emulator
                .objects()
                .lists
                .remove(&(list as usize))
                .map(|l| drop(l.entries))
                .ok_or_else(|| not_ours(list, "a device list"))
        },
    )
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_name(device: *mut ibv_device) -> *const c_char {
    entry::pointer("ibv_get_device_name", |emulator| {
        let index = device_index(emulator, device)?;
        Ok(emulator.devices[index].ibv.get().name.as_ptr().cast_mut())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_guid(device: *mut ibv_device) -> u64 {
    entry::run(
        "ibv_get_device_guid",
        |_| 0,
        |emulator| {
            let index = device_index(emulator, device)?;
            // `__be64`: the GUID's bytes in network order.
            Ok(emulator.devices[index].config.identity.node_guid.to_be())
        },
    )
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_index(device: *mut ibv_device) -> c_int {
    entry::run(
        "ibv_get_device_index",
        |_| -1,
        |emulator| Ok(device_index(emulator, device)? as c_int),
    )
}

/// Opens a context on device `index` (with DEVX when `devx`).
pub(crate) fn open_context(emulator: &Emulator, index: usize, devx: bool) -> *mut ibv_context {
    let device = &emulator.devices[index];
    let ops = ibv_context_ops {
        _compat_query_device: None,
        _compat_query_port: None,
        _compat_alloc_pd: None,
        _compat_dealloc_pd: None,
        _compat_reg_mr: None,
        _compat_rereg_mr: None,
        _compat_dereg_mr: None,
        alloc_mw: None,
        bind_mw: None,
        dealloc_mw: None,
        _compat_create_cq: None,
        poll_cq: Some(crate::stubs::op_poll_cq),
        req_notify_cq: Some(crate::stubs::op_req_notify_cq),
        _compat_cq_event: None,
        _compat_resize_cq: None,
        _compat_destroy_cq: None,
        _compat_create_srq: None,
        _compat_modify_srq: None,
        _compat_query_srq: None,
        _compat_destroy_srq: None,
        post_srq_recv: Some(crate::queues::op_post_srq_recv),
        _compat_create_qp: None,
        _compat_query_qp: None,
        _compat_modify_qp: None,
        _compat_destroy_qp: None,
        post_send: Some(crate::stubs::op_post_send),
        post_recv: Some(crate::stubs::op_post_recv),
        _compat_create_ah: None,
        _compat_destroy_ah: None,
        _compat_attach_mcast: None,
        _compat_detach_mcast: None,
        _compat_async_event: None,
    };
    let block = Owned::new(verbs_context {
        query_port: Some(op_query_port),
        advise_mr: None,
        alloc_null_mr: None,
        read_counters: None,
        attach_counters_point_flow: None,
        create_counters: None,
        destroy_counters: None,
        reg_dm_mr: None,
        alloc_dm: None,
        free_dm: None,
        modify_flow_action_esp: None,
        destroy_flow_action: None,
        create_flow_action_esp: None,
        modify_qp_rate_limit: None,
        alloc_parent_domain: Some(crate::queues::op_alloc_parent_domain),
        dealloc_td: None,
        alloc_td: None,
        modify_cq: None,
        post_srq_ops: None,
        destroy_rwq_ind_table: None,
        create_rwq_ind_table: None,
        destroy_wq: None,
        modify_wq: None,
        create_wq: None,
        query_rt_values: None,
        create_cq_ex: None,
        priv_: core::ptr::null_mut(),
        query_device_ex: Some(op_query_device_ex),
        ibv_destroy_flow: None,
        abi_placeholder2: None,
        ibv_create_flow: None,
        abi_placeholder1: None,
        open_qp: None,
        create_qp_ex: None,
        get_srq_num: None,
        create_srq_ex: None,
        open_xrcd: None,
        close_xrcd: None,
        _abi_placeholder3: 0,
        sz: core::mem::size_of::<verbs_context>(),
        context: ibv_context {
            device: device.ibv.ptr(),
            ops,
            cmd_fd: -1,
            async_fd: -1,
            num_comp_vectors: device.config.num_comp_vectors as c_int,
            mutex: Default::default(),
            abi_compat: VERBS_ABI_IS_EXTENDED,
        },
    });
    let mut block = block;
    let ctx: *mut ibv_context = &mut block.get_mut().context;
    emulator.objects().contexts.insert(
        ctx as usize,
        Context {
            _block: block,
            device: index,
            devx,
        },
    );
    ctx
}

/// Whether a context opened without asking for DEVX gets it anyway: rdma-core's mlx5
/// provider asks the kernel for a DEVX context on every open and, when the kernel refuses
/// (no CAP_NET_RAW: an unprivileged container, here `fault.open_devx`), opens one without
/// (providers/mlx5/mlx5.c, `mlx5_alloc_context`, rdma-core 56.1). NVSHMEM's IBGDA
/// transport relies on it: it registers UMEMs on a context from `ibv_open_device`.
pub(crate) fn devx_by_default(emulator: &Emulator, index: usize) -> bool {
    let config = &emulator.devices[index].config;
    config.mlx5 && config.faults.open_devx.is_none()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context {
    entry::pointer("ibv_open_device", |emulator| {
        let index = device_index(emulator, device)?;
        Ok(open_context(
            emulator,
            index,
            devx_by_default(emulator, index),
        ))
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(context: *mut ibv_context) -> c_int {
    entry::status("ibv_close_device", |emulator| {
        let mut objects = emulator.objects();
        let (device, _) = context_of(&objects, context)?;
        objects.release_context(emulator, context as usize, device);
        objects.contexts.remove(&(context as usize));
        Ok(())
    })
}

fn device_attr(emulator: &Emulator, device: usize) -> ibv_device_attr {
    let d = &emulator.devices[device].config;
    let l = &d.limits;
    let mut fw_ver = [0 as c_char; 64];
    for (dst, src) in fw_ver.iter_mut().zip(d.identity.fw_ver.bytes().take(63)) {
        *dst = src as c_char;
    }
    ibv_device_attr {
        fw_ver,
        node_guid: d.identity.node_guid.to_be(),
        sys_image_guid: d.identity.sys_image_guid.to_be(),
        max_mr_size: l.max_mr_size,
        page_size_cap: l.page_size_cap,
        vendor_id: d.identity.vendor_id,
        vendor_part_id: d.identity.vendor_part_id,
        hw_ver: d.identity.hw_ver,
        max_qp: l.max_qp,
        max_qp_wr: d.max_qp_wr(),
        device_cap_flags: l.device_cap_flags,
        max_sge: l.max_sge,
        max_sge_rd: l.max_sge,
        max_cq: l.max_cq,
        max_cqe: d.max_cqe(),
        max_mr: l.max_mr,
        max_pd: l.max_pd,
        max_qp_rd_atom: l.max_qp_rd_atom,
        max_ee_rd_atom: 0,
        max_res_rd_atom: l.max_res_rd_atom,
        max_qp_init_rd_atom: l.max_qp_rd_atom,
        max_ee_init_rd_atom: 0,
        // IBV_ATOMIC_HCA (1) with atomics, IBV_ATOMIC_NONE (0) without.
        atomic_cap: c_int::from(d.caps.atomic),
        max_ee: 0,
        max_rdd: 0,
        max_mw: 0,
        max_raw_ipv6_qp: 0,
        max_raw_ethy_qp: 0,
        max_mcast_grp: 0,
        max_mcast_qp_attach: 0,
        max_total_mcast_qp_attach: 0,
        max_ah: l.max_ah,
        max_fmr: 0,
        max_map_per_fmr: 0,
        max_srq: l.max_srq,
        max_srq_wr: l.max_srq_wr,
        max_srq_sge: l.max_srq_sge,
        max_pkeys: l.max_pkeys,
        local_ca_ack_delay: l.local_ca_ack_delay,
        phys_port_cnt: 1,
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_device(
    context: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    entry::status("ibv_query_device", |emulator| {
        let device = context_of(&emulator.objects(), context)?.0;
        if attr.is_null() {
            return Err(Failure::invalid("a null attribute block"));
        }
        // SAFETY: a non-null out-pointer of the documented type.
        unsafe { attr.write(device_attr(emulator, device)) };
        Ok(())
    })
}

/// Copies the first `len` bytes of `value` to `dst` (attribute blocks grow with rdma-core;
/// a caller compiled against an older header passes its smaller size).
///
/// # Safety
///
/// `dst` must be valid for writes of `len` bytes.
unsafe fn write_prefix<T: Copy>(dst: *mut T, value: &T, len: usize) {
    let len = len.min(core::mem::size_of::<T>());
    // SAFETY: `value` is `size_of::<T>()` readable bytes; `dst` has `len` writable ones
    // (the caller's contract); they do not overlap (`value` is a local of the caller).
    unsafe {
        core::ptr::copy_nonoverlapping((value as *const T).cast::<u8>(), dst.cast::<u8>(), len)
    };
}

unsafe extern "C" fn op_query_device_ex(
    context: *mut ibv_context,
    input: *const c_void,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    entry::status("ibv_query_device_ex", |emulator| {
        let device = context_of(&emulator.objects(), context)?.0;
        if !input.is_null() {
            // `struct ibv_query_device_ex_input { uint32_t comp_mask; }`: no field exists.
            // SAFETY: a non-null input of the documented type.
            let comp_mask = unsafe { *input.cast::<u32>() };
            if comp_mask != 0 {
                return Err(Failure::invalid(format!("input comp_mask {comp_mask:#x}")));
            }
        }
        if attr.is_null() {
            return Err(Failure::invalid("a null attribute block"));
        }
        let ex = ibv_device_attr_ex {
            orig_attr: device_attr(emulator, device),
            comp_mask: 0,
            odp_caps: Default::default(),
            completion_timestamp_mask: 0,
            hca_core_clock: 0,
            device_cap_flags_ex: 0,
            tso_caps: Default::default(),
            rss_caps: Default::default(),
            max_wq_type_rq: 0,
            packet_pacing_caps: Default::default(),
            raw_packet_caps: 0,
            tm_caps: Default::default(),
            cq_mod_caps: Default::default(),
            max_dm_size: 0,
            pci_atomic_caps: Default::default(),
            xrc_odp_caps: 0,
            phys_port_cnt_ex: 1,
        };
        // SAFETY: `attr` holds `attr_size` bytes (the static-inline wrapper passes the size
        // of the caller's block).
        unsafe { write_prefix(attr, &ex, attr_size) };
        Ok(())
    })
}

fn port_attr(emulator: &Emulator, device: usize, port: u8) -> Outcome<ibv_port_attr> {
    if port != 1 {
        return Err(Failure::invalid(format!(
            "port {port}: the device has port 1 only"
        )));
    }
    let d = &emulator.devices[device].config;
    let mtu = u32::from(d.mtu.code());
    Ok(ibv_port_attr {
        state: d.port_state.code(),
        max_mtu: mtu,
        active_mtu: mtu,
        gid_tbl_len: d.gids.len() as c_int,
        port_cap_flags: d.limits.port_cap_flags,
        max_msg_sz: d.limits.max_msg_sz,
        bad_pkey_cntr: 0,
        qkey_viol_cntr: 0,
        pkey_tbl_len: d.limits.max_pkeys,
        lid: d.reported_lid(),
        sm_lid: match d.link_layer {
            LinkLayer::InfiniBand => 1,
            LinkLayer::Ethernet => 0,
        },
        lmc: 0,
        max_vl_num: 4,
        sm_sl: 0,
        subnet_timeout: 18,
        init_type_reply: 0,
        // 4X (IBV_WIDTH_4X = 2) at NDR (IBV_SPEED_NDR = 128): a 400 Gb/s ConnectX-7 port.
        active_width: 2,
        active_speed: 128,
        // IBV_PORT_PHYS_STATE_LINK_UP (5), or DISABLED (3) for a port that is down.
        phys_state: if d.port_state == crate::config::PortState::Down {
            3
        } else {
            5
        },
        link_layer: match d.link_layer {
            LinkLayer::InfiniBand => IBV_LINK_LAYER_INFINIBAND,
            LinkLayer::Ethernet => IBV_LINK_LAYER_ETHERNET,
        },
        flags: 0,
        port_cap_flags2: 0,
        active_speed_ex: 0,
    })
}

/// Writes port `port`'s attributes, `len` bytes of them, to `attr`.
///
/// # Safety
///
/// `attr` must be null or valid for writes of `len` bytes.
unsafe fn query_port(
    context: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
    len: usize,
) -> c_int {
    entry::status("ibv_query_port", |emulator| {
        let device = context_of(&emulator.objects(), context)?.0;
        let value = port_attr(emulator, device, port)?;
        if attr.is_null() {
            return Err(Failure::invalid("a null attribute block"));
        }
        // SAFETY: the caller's contract.
        unsafe { write_prefix(attr, &value, len) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_port(
    context: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
) -> c_int {
    // SAFETY: the exported ibv_query_port takes rdma-core's `_compat_ibv_port_attr`, the
    // block up to `flags`.
    unsafe { query_port(context, port, attr, COMPAT_PORT_ATTR_BYTES) }
}

unsafe extern "C" fn op_query_port(
    context: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
    attr_len: usize,
) -> c_int {
    // SAFETY: the static-inline ibv_query_port passes the size of the caller's block.
    unsafe { query_port(context, port, attr, attr_len) }
}

/// GID `index` of device `device`'s port `port`, and its type.
fn gid(emulator: &Emulator, device: usize, port: u32, index: u32) -> Outcome<([u8; 16], u32)> {
    if port != 1 {
        return Err(Failure::invalid(format!(
            "port {port}: the device has port 1 only"
        )));
    }
    let d = &emulator.devices[device].config;
    let gid = *d.gids.get(index as usize).ok_or_else(|| {
        Failure::invalid(format!(
            "GID index {index}: the table has {} entries",
            d.gids.len()
        ))
    })?;
    let kind = match d.link_layer {
        LinkLayer::InfiniBand => IBV_GID_TYPE_IB,
        // Every RoCE GID of the emulator is a RoCE v2 GID.
        LinkLayer::Ethernet => IBV_GID_TYPE_ROCE_V2,
    };
    Ok((gid, kind))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid(
    context: *mut ibv_context,
    port: u8,
    index: c_int,
    out: *mut [u8; 16],
) -> c_int {
    entry::minus_one("ibv_query_gid", |emulator| {
        let device = context_of(&emulator.objects(), context)?.0;
        let index = u32::try_from(index).map_err(|_| Failure::invalid("a negative GID index"))?;
        let (value, _) = gid(emulator, device, port.into(), index)?;
        if out.is_null() {
            return Err(Failure::invalid("a null GID"));
        }
        // SAFETY: a non-null `union ibv_gid *` (16 bytes).
        unsafe { out.write(value) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid_type(
    context: *mut ibv_context,
    port: u8,
    index: u32,
    out: *mut u32,
) -> c_int {
    entry::status("ibv_query_gid_type", |emulator| {
        let device = context_of(&emulator.objects(), context)?.0;
        let (_, kind) = gid(emulator, device, port.into(), index)?;
        if out.is_null() {
            return Err(Failure::invalid("a null type"));
        }
        let sysfs = match kind {
            IBV_GID_TYPE_ROCE_V2 => IBV_GID_TYPE_SYSFS_ROCE_V2,
            _ => IBV_GID_TYPE_SYSFS_IB_ROCE_V1,
        };
        // SAFETY: a non-null `enum ibv_gid_type_sysfs *`.
        unsafe { out.write(sysfs) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn _ibv_query_gid_ex(
    context: *mut ibv_context,
    port: u32,
    index: u32,
    entry_out: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    entry::status("ibv_query_gid_ex", |emulator| {
        let device = context_of(&emulator.objects(), context)?.0;
        if flags != 0 {
            return Err(Failure::invalid(format!("flags {flags:#x}")));
        }
        let (value, kind) = gid(emulator, device, port, index)?;
        if entry_out.is_null() {
            return Err(Failure::invalid("a null entry"));
        }
        let entry = ibv_gid_entry {
            gid: ibv_gid(value),
            gid_index: index,
            port_num: port,
            gid_type: kind,
            ndev_ifindex: 0,
        };
        // SAFETY: `entry_out` holds `entry_size` bytes.
        unsafe { write_prefix(entry_out, &entry, entry_size) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn _ibv_query_gid_table(
    context: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    entry::run(
        "ibv_query_gid_table",
        |e| -(e as isize),
        |emulator| {
            let device = context_of(&emulator.objects(), context)?.0;
            if flags != 0 || entry_size < core::mem::size_of::<ibv_gid_entry>() {
                return Err(Failure::invalid(format!(
                    "flags {flags:#x}, entry size {entry_size}"
                )));
            }
            let table = &emulator.devices[device].config.gids;
            if table.len() > max_entries {
                return Err(Failure::invalid(format!(
                    "{} GIDs do not fit {max_entries} entries",
                    table.len()
                )));
            }
            for index in 0..table.len() as u32 {
                let (value, kind) = gid(emulator, device, 1, index)?;
                let entry = ibv_gid_entry {
                    gid: ibv_gid(value),
                    gid_index: index,
                    port_num: 1,
                    gid_type: kind,
                    ndev_ifindex: 0,
                };
                // SAFETY: `entries` holds `max_entries` entries of `entry_size` bytes each.
                unsafe {
                    let slot = entries.cast::<u8>().add(index as usize * entry_size);
                    write_prefix(slot.cast::<ibv_gid_entry>(), &entry, entry_size);
                }
            }
            Ok(table.len() as isize)
        },
    )
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_pkey(
    context: *mut ibv_context,
    port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    entry::minus_one("ibv_query_pkey", |emulator| {
        context_of(&emulator.objects(), context)?;
        if port != 1 || index != 0 || pkey.is_null() {
            return Err(Failure::invalid(format!(
                "port {port} index {index}: the table holds the default P_Key at index 0 of port 1"
            )));
        }
        // SAFETY: a non-null `__be16 *`: the default full-membership P_Key.
        unsafe { pkey.write(0xffffu16.to_be()) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_pkey_index(
    context: *mut ibv_context,
    port: u8,
    pkey: u16,
) -> c_int {
    entry::run(
        "ibv_get_pkey_index",
        |_| -1,
        |emulator| {
            context_of(&emulator.objects(), context)?;
            if port == 1 && u16::from_be(pkey) == 0xffff {
                Ok(0)
            } else {
                Err(Failure::new(
                    libc::ENOENT,
                    format!("P_Key {:#06x} on port {port}", u16::from_be(pkey)),
                ))
            }
        },
    )
}

#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    entry::pointer("ibv_alloc_pd", |emulator| {
        let mut objects = emulator.objects();
        let device = context_of(&objects, context)?.0;
        let soft = emulator.devices[device]
            .nic
            .alloc_pd()
            .map_err(|e| Failure::new(libc::ENOMEM, e.to_string()))?;
        let pdn = ibgda::nic::ProtectionDomainId::pdn(&soft);
        let block = Owned::new(ibv_pd {
            context,
            handle: pdn,
        });
        let ptr = block.ptr();
        objects.pds.insert(
            block.key(),
            Pd {
                _block: block,
                _soft: Some(soft),
                pdn,
                parent: None,
                context: context as usize,
            },
        );
        Ok(ptr)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    entry::status("ibv_dealloc_pd", |emulator| {
        let mut objects = emulator.objects();
        let key = pd as usize;
        if !objects.pds.contains_key(&key) {
            return Err(not_ours(pd, "a PD"));
        }
        let users = objects.mrs.values().filter(|m| m.pd == key).count()
            + objects.ahs.values().filter(|a| a.pd == key).count()
            + objects.srqs.values().filter(|s| s.pd == key).count()
            + objects.qps.values().filter(|q| q.pd == key).count()
            + objects
                .pds
                .values()
                .filter(|p| p.parent == Some(key))
                .count();
        if users > 0 {
            return Err(Failure::new(
                libc::EBUSY,
                format!(
                    "the PD still has {users} memory regions, address handles, SRQs, queue \
                     pairs or parent domains"
                ),
            ));
        }
        objects.pds.remove(&key);
        Ok(())
    })
}

/// The access rights of verbs flags `access`: the optional range (relaxed ordering, ...)
/// is a hint a device may ignore; a mandatory flag the emulator does not model is refused.
fn access_rights(access: u32) -> Outcome<Access> {
    /// `IBV_ACCESS_OPTIONAL_RANGE`: bits 20..29.
    const OPTIONAL: u32 = ((1 << 29) - 1) & !((1 << 20) - 1);
    /// `IBV_ACCESS_MW_BIND`: memory windows are not modelled, and none can be bound.
    const MW_BIND: u32 = 1 << 4;
    let mandatory = access & !OPTIONAL & !MW_BIND;
    Access::from_bits(mandatory).ok_or_else(|| {
        Failure::new(
            libc::EOPNOTSUPP,
            format!(
                "access flags {access:#x}: only local write, remote write, remote read and remote \
                 atomic are modelled (and the optional range, ignored)"
            ),
        )
    })
}

/// Registers `[addr, addr + len)` of host memory in `pd`.
fn register(
    emulator: &Emulator,
    pd: *mut ibv_pd,
    addr: u64,
    len: usize,
    access: u32,
) -> Outcome<*mut ibv_mr> {
    let mut objects = emulator.objects();
    let p = find(&objects.pds, pd, "a PD")?;
    let context = p.context;
    let device = objects.contexts[&context].device;
    let rights = access_rights(access)?;
    // GPU memory by address: a region of the CUDA software NIC (the peer-memory path).
    #[cfg(feature = "cuda")]
    if crate::gpu::is_gpu_memory(addr, len as u64) {
        drop(objects);
        let (handle, lkey, rkey) =
            crate::gpu::register_region_at(emulator, device, addr, len, access)?;
        return Ok(insert_gpu_region(
            emulator, pd, context, addr, len, handle, lkey, rkey,
        ));
    }
    let (buffer, offset) = caller_memory(addr, len as u64)?;
    let nic = &emulator.devices[device].nic;
    let region = emulator
        .fabric
        .register(nic.node(), Arc::new(buffer), offset, len, rights)
        .map_err(|e| Failure::invalid(e.to_string()))?;
    let block = Owned::new(ibv_mr {
        context: context as *mut ibv_context,
        pd,
        addr: addr as usize as *mut c_void,
        length: len,
        handle: region.lkey().0,
        lkey: region.lkey().0,
        rkey: region.rkey().0,
    });
    let ptr = block.ptr();
    objects.mrs.insert(
        block.key(),
        Mr {
            _block: block,
            _region: crate::emulator::MrBacking::Host(region),
            pd: pd as usize,
            context,
        },
    );
    Ok(ptr)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    entry::pointer("ibv_reg_mr", |emulator| {
        register(emulator, pd, addr as u64, length, access as u32)
    })
}

fn same_iova(addr: *mut c_void, iova: u64) -> Outcome<()> {
    if addr as u64 != iova {
        return Err(Failure::new(
            libc::EOPNOTSUPP,
            format!(
                "iova {iova:#x} differs from the address {addr:p}: the emulator addresses \
                 regions by virtual address"
            ),
        ));
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    entry::pointer("ibv_reg_mr_iova", |emulator| {
        same_iova(addr, iova)?;
        register(emulator, pd, addr as u64, length, access as u32)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: u32,
) -> *mut ibv_mr {
    entry::pointer("ibv_reg_mr_iova2", |emulator| {
        same_iova(addr, iova)?;
        register(emulator, pd, addr as u64, length, access)
    })
}

/// The C block of a GPU memory region of the CUDA software NIC.
#[cfg(feature = "cuda")]
#[allow(clippy::too_many_arguments)]
fn insert_gpu_region(
    emulator: &Emulator,
    pd: *mut ibv_pd,
    context: usize,
    addr: u64,
    length: usize,
    handle: crate::gpu::RegionHandle,
    lkey: u32,
    rkey: u32,
) -> *mut ibv_mr {
    let block = Owned::new(ibv_mr {
        context: context as *mut ibv_context,
        pd,
        addr: addr as usize as *mut c_void,
        length,
        handle: lkey,
        lkey,
        rkey,
    });
    let ptr = block.ptr();
    emulator.objects().mrs.insert(
        block.key(),
        Mr {
            _block: block,
            _region: crate::emulator::MrBacking::Gpu(handle),
            pd: pd as usize,
            context,
        },
    );
    ptr
}

/// `ibv_reg_dmabuf_mr`: the CPU emulator cannot map a DMA-BUF, so it reaches the region
/// through `iova` when that is host memory of this process (a test stand-in for GPU
/// memory); GPU memory itself needs the CUDA software NIC (see emu/README.md).
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_dmabuf_mr(
    pd: *mut ibv_pd,
    offset: u64,
    length: usize,
    iova: u64,
    fd: c_int,
    access: c_int,
) -> *mut ibv_mr {
    entry::pointer("ibv_reg_dmabuf_mr", |emulator| {
        let device = {
            let objects = emulator.objects();
            let p = find(&objects.pds, pd, "a PD")?;
            objects.contexts[&p.context].device
        };
        if let Some(errno) = emulator.devices[device].config.faults.reg_dmabuf_mr {
            return Err(Failure::new(
                errno,
                "configured to fail (fault.reg_dmabuf_mr)",
            ));
        }
        if fd < 0 {
            return Err(Failure::invalid(format!("DMA-BUF fd {fd}")));
        }
        #[cfg(feature = "cuda")]
        if let Some(made) =
            crate::gpu::register_region(emulator, device, fd, offset, length, iova, access as u32)
        {
            let (handle, lkey, rkey) = made?;
            let context = find(&emulator.objects().pds, pd, "a PD")?.context;
            return Ok(insert_gpu_region(
                emulator, pd, context, iova, length, handle, lkey, rkey,
            ));
        }
        let _ = offset;
        register(emulator, pd, iova, length, access as u32)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    entry::status("ibv_dereg_mr", |emulator| {
        release(&mut emulator.objects().mrs, mr, "a memory region")
    })
}

/// The address vector `mlx5_create_ah` builds for `attr` on a port of `link_layer`; on
/// Ethernet, the destination MAC comes from `fabric` as the kernel's neighbour lookup gives
/// it (from a link-local GID itself, else from the node that has the GID).
fn address_vector(
    attr: &ibv_ah_attr,
    link_layer: LinkLayer,
    fabric: &ibgda::softnic::Fabric,
) -> Outcome<AddressVectorSegment> {
    if attr.static_rate != 0 {
        return Err(Failure::new(
            libc::EOPNOTSUPP,
            format!(
                "static rate {}: only 0 (the port's rate) is modelled",
                attr.static_rate
            ),
        ));
    }
    let mut av = AddressVectorSegment::default();
    let grh = match link_layer {
        LinkLayer::Ethernet => {
            if attr.is_global == 0 {
                return Err(Failure::invalid(
                    "a RoCE address handle needs a GRH (is_global)",
                ));
            }
            av.stat_rate_sl = (attr.sl & 0x7) << 1;
            // The destination MAC, which rdma-core asks the kernel for (its neighbour
            // table): here the fabric's.
            av.rmac = fabric.resolve_mac(attr.grh.dgid.0).map_err(|e| {
                Failure::new(
                    libc::EHOSTUNREACH,
                    format!("no neighbour has the destination GID: {e}"),
                )
            })?;
            0
        }
        LinkLayer::InfiniBand => {
            av.fl_mlid = attr.src_path_bits & 0x7f;
            av.rlid = U16::new(attr.dlid);
            av.stat_rate_sl = attr.sl & 0xf;
            1u32
        }
    };
    if attr.is_global != 0 {
        av.tclass = attr.grh.traffic_class;
        av.hop_limit = attr.grh.hop_limit;
        av.grh_gid_fl = U32::new(
            grh << 30 | u32::from(attr.grh.sgid_index) << 20 | (attr.grh.flow_label & 0xf_ffff),
        );
        av.rgid = attr.grh.dgid.0;
    }
    Ok(av)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    entry::pointer("ibv_create_ah", |emulator| {
        let mut objects = emulator.objects();
        let p = find(&objects.pds, pd, "a PD")?;
        let context = p.context;
        let device = objects.contexts[&context].device;
        if attr.is_null() {
            return Err(Failure::invalid("a null attribute block"));
        }
        // SAFETY: a non-null `struct ibv_ah_attr *`.
        let attr = unsafe { &*attr };
        if attr.port_num != 1 {
            return Err(Failure::invalid(format!(
                "port {}: the device has port 1 only",
                attr.port_num
            )));
        }
        let av = address_vector(
            attr,
            emulator.devices[device].config.link_layer,
            &emulator.fabric,
        )?;
        let block = Owned::new(AhBlock {
            ibv: ibv_ah {
                context: context as *mut ibv_context,
                pd,
                handle: 0,
            },
            av,
        });
        let ptr = block.ptr().cast::<ibv_ah>();
        objects.ahs.insert(
            block.key(),
            Ah {
                block,
                pd: pd as usize,
                context,
            },
        );
        Ok(ptr)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    entry::status("ibv_destroy_ah", |emulator| {
        release(&mut emulator.objects().ahs, ah, "an address handle")
    })
}

static FORK_INITIALIZED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[no_mangle]
pub extern "C" fn ibv_fork_init() -> c_int {
    // Registered memory is never remapped by the emulator: nothing to protect from fork.
    FORK_INITIALIZED.store(true, std::sync::atomic::Ordering::Relaxed);
    0
}

#[no_mangle]
pub extern "C" fn ibv_is_fork_initialized() -> c_int {
    // `IBV_FORK_DISABLED` (0) or `IBV_FORK_ENABLED` (1).
    c_int::from(FORK_INITIALIZED.load(std::sync::atomic::Ordering::Relaxed))
}

#[no_mangle]
pub extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    c"/sys".as_ptr()
}

/// The sysfs files of an emulated device that rdma-core tools read.
fn emulated_sysfs(emulator: &Emulator, dir: &str, file: &str) -> Option<String> {
    let device = emulator.devices.iter().find(|d| {
        dir.trim_end_matches('/') == format!("/sys/class/infiniband/{}", d.config.name)
    })?;
    let id = &device.config.identity;
    Some(match file {
        "board_id" => id.board_id.clone(),
        "fw_ver" => id.fw_ver.clone(),
        "hca_type" => format!("MT{}", id.vendor_part_id),
        "hw_rev" => format!("{:#x}", id.hw_ver),
        "node_type" => "1: CA".to_owned(),
        "node_desc" => format!("{} ibgda emulated ConnectX", device.config.name),
        _ => return None,
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    entry::run(
        "ibv_read_sysfs_file",
        |_| -1,
        |emulator| {
            if dir.is_null() || file.is_null() || buf.is_null() || size == 0 {
                return Err(Failure::invalid("a null directory, file or buffer"));
            }
            // SAFETY: NUL-terminated strings (the function's contract).
            let (dir, file) = unsafe { (CStr::from_ptr(dir), CStr::from_ptr(file)) };
            let (dir, file) = (dir.to_string_lossy(), file.to_string_lossy());
            let text = match emulated_sysfs(emulator, &dir, &file) {
                Some(text) => text,
                None => std::fs::read_to_string(format!("{dir}/{file}"))
                    .map_err(|e| {
                        Failure::new(
                            e.raw_os_error().unwrap_or(libc::EIO),
                            format!("{dir}/{file}: {e}"),
                        )
                    })?
                    .trim_end_matches('\n')
                    .to_owned(),
            };
            let n = text.len().min(size - 1);
            // SAFETY: `buf` holds `size` bytes; `n + 1 <= size`.
            unsafe {
                core::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
            Ok(n as c_int)
        },
    )
}

fn static_str(text: &'static CStr) -> *const c_char {
    text.as_ptr()
}

#[no_mangle]
pub extern "C" fn ibv_node_type_str(node_type: c_int) -> *const c_char {
    static_str(match node_type {
        1 => c"InfiniBand channel adapter",
        2 => c"InfiniBand switch",
        3 => c"InfiniBand router",
        4 => c"iWARP NIC",
        5 => c"usNIC",
        6 => c"usNIC UDP",
        7 => c"unspecified",
        _ => c"unknown",
    })
}

#[no_mangle]
pub extern "C" fn ibv_port_state_str(state: u32) -> *const c_char {
    static_str(match state {
        0 => c"PORT_NOP",
        1 => c"PORT_DOWN",
        2 => c"PORT_INIT",
        3 => c"PORT_ARMED",
        4 => c"PORT_ACTIVE",
        5 => c"PORT_ACTIVE_DEFER",
        _ => c"invalid state",
    })
}

#[no_mangle]
pub extern "C" fn ibv_event_type_str(event: u32) -> *const c_char {
    static_str(match event {
        0 => c"CQ error",
        1 => c"local work queue catastrophic error",
        2 => c"invalid request local work queue error",
        3 => c"local access violation work queue error",
        4 => c"communication established",
        5 => c"send queue drained",
        6 => c"path migrated",
        7 => c"path migration request error",
        8 => c"local catastrophic error",
        9 => c"port active",
        10 => c"port error",
        11 => c"LID change",
        12 => c"P_Key change",
        13 => c"SM change",
        14 => c"SRQ catastrophic error",
        15 => c"SRQ limit reached",
        16 => c"last WQE reached",
        17 => c"client reregistration",
        18 => c"GID table change",
        19 => c"WQ fatal",
        _ => c"unknown",
    })
}

#[no_mangle]
pub extern "C" fn ibv_wc_status_str(status: u32) -> *const c_char {
    static_str(match status {
        0 => c"success",
        1 => c"local length error",
        2 => c"local QP operation error",
        3 => c"local EE context operation error",
        4 => c"local protection error",
        5 => c"Work Request Flushed Error",
        6 => c"memory management operation error",
        7 => c"bad response error",
        8 => c"local access error",
        9 => c"remote invalid request error",
        10 => c"remote access error",
        11 => c"remote operation error",
        12 => c"transport retry counter exceeded",
        13 => c"RNR retry counter exceeded",
        14 => c"local RDD violation error",
        15 => c"remote invalid RD request",
        16 => c"aborted error",
        17 => c"invalid EE context number",
        18 => c"invalid EE context state",
        19 => c"fatal error",
        20 => c"response timeout error",
        21 => c"general error",
        22 => c"TM error",
        23 => c"TM RNDV incomplete",
        _ => c"unknown",
    })
}
