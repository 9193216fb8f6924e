//! The verbs objects of a DC target, as NVSHMEM's IBGDA transport makes them: completion
//! queues (`ibv_create_cq`), shared receive queues (`ibv_create_srq`), parent domains, and
//! the DC target itself (`mlx5dv_create_qp` with `MLX5DV_DCTYPE_DCT`, moved to INIT and RTR
//! with `ibv_modify_qp`).
//!
//! Like the kernel's mlx5 driver, the emulator turns them into PRM commands for the device:
//! a verbs CQ is CREATE_CQ over a ring and doorbell record the emulator allocates (and
//! registers as UMEM), and a DCT is CREATE_DCT, sent when it reaches RTR (as the kernel
//! creates a DCT in firmware only then, with the access rights and path of its
//! transitions). The commands go through the same path as DEVX commands: the software NIC's
//! PRM executor, the command faults, the command log (with the verbs entry point as the
//! call). SRQs are the device's (the executor's SRQs, whose numbers CREATE_DCT's `srqn` and
//! CREATE_QP's `srqn_rmpn_xrqn` name); receives posted to them with `ibv_post_srq_recv`
//! become the device's receive WQEs.
//!
//! Every `unsafe extern "C"` function here has the contract of the rdma-core function of
//! the same name.

#![allow(clippy::missing_safety_doc)]

use core::ffi::{c_int, c_void};

use ibgda::memory::DmaBuffer;
use ibgda::nic::prm::{
    AtomicMode, Command, CommandOutput, CqContext, CqeSize, CreateCq, CreateCqOutput, CreateDct,
    CreateDctOutput, DctContext, DestroyCq, DestroyDct, Mtu, RemoteAccess,
};
use ibgda::nic::{Backend, SharedReceiveQueueId, SoftObject, UarPage, UmemId};
use ibgda::queue::CQE_INIT_OP_OWN;

use crate::abi::*;
use crate::dv::{command, destroy, new_uar_page};
use crate::emulator::{Cq, Owned, Pd, Qp, Srq};
use crate::entry::{self, find, not_ours, out_block, Failure, Outcome};
use crate::verbs::context_of;

/// A CQE.
const CQE_BYTES: usize = 64;
/// The bytes of an SRQ receive WQE with one scatter entry (next segment and data segment).
const SRQ_STRIDE: u32 = 32;

#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut c_void,
    comp_vector: c_int,
) -> *mut ibv_cq {
    entry::pointer("ibv_create_cq", |emulator| {
        let device = context_of(&emulator.objects(), context)?.0;
        let d = &emulator.devices[device];
        if !channel.is_null() {
            return Err(Failure::new(
                libc::EOPNOTSUPP,
                "completion channels are not modelled",
            ));
        }
        if comp_vector < 0 || comp_vector as u32 >= d.config.num_comp_vectors {
            return Err(Failure::invalid(format!("completion vector {comp_vector}")));
        }
        // As mlx5: room for `cqe` completions, rounded up to a power of two.
        let entries = u32::try_from(cqe)
            .ok()
            .filter(|&n| n > 0)
            .and_then(|n| n.checked_add(1))
            .and_then(u32::checked_next_power_of_two)
            .filter(|n| n.trailing_zeros() <= u32::from(d.config.caps.log_max_cq_size))
            .ok_or_else(|| Failure::invalid(format!("{cqe} CQEs")))?;
        let nomem = |e: &dyn std::fmt::Display| Failure::new(libc::ENOMEM, e.to_string());
        let ring = DmaBuffer::zeroed(entries as usize * CQE_BYTES, 4096).map_err(|e| nomem(&e))?;
        for entry in 0..entries as usize {
            ring.write((entry + 1) * CQE_BYTES - 1, &[CQE_INIT_OP_OWN])
                .map_err(|e| nomem(&e))?;
        }
        let dbrec = DmaBuffer::zeroed(8, 64).map_err(|e| nomem(&e))?;
        let (ring_addr, dbrec_addr) = (ring.as_ptr() as usize, dbrec.as_ptr() as usize);
        let ring = d.nic.register_umem_buffer(ring).map_err(|e| nomem(&e))?;
        let dbrec = d.nic.register_umem_buffer(dbrec).map_err(|e| nomem(&e))?;
        let (page, uar, reg) = new_uar_page(&d.nic)?;
        let eqn = d
            .nic
            .query_eqn(0)
            .map_err(|e| Failure::invalid(e.to_string()))?;
        let input = CreateCq {
            uid: 0,
            cqc: CqContext {
                dbr_umem_valid: true,
                dbr_umem_id: dbrec.umem_id(),
                dbr_addr: 0,
                cqe_size: CqeSize::Bytes64,
                collapsed: false,
                overrun_ignore: false,
                log_cq_size: entries.trailing_zeros() as u8,
                uar_page: uar.page_id(),
                c_eqn: eqn as u8,
                log_page_size: 0,
                page_offset: 0,
            },
            cq_umem_offset: 0,
            cq_umem_id: ring.umem_id(),
            cq_umem_valid: true,
        }
        .encode()
        .map_err(|e| Failure::invalid(e.to_string()))?;
        let mut output = vec![0u8; CreateCqOutput::OUTPUT_BYTES];
        command(
            emulator,
            "ibv_create_cq",
            device,
            &input,
            &mut output,
            |i, o| d.nic.create_object(i, o),
        )?;
        let cqn = CreateCqOutput::decode(&output)
            .map_err(|e| Failure::invalid(e.to_string()))?
            .cqn;
        let block = Owned::new(ibv_cq {
            context,
            channel,
            cq_context,
            handle: cqn,
            cqe: (entries - 1) as c_int,
            mutex: Default::default(),
            cond: Default::default(),
            comp_events_completed: 0,
            async_events_completed: 0,
        });
        let ptr = block.ptr();
        emulator.objects().cqs.insert(
            block.key(),
            Cq {
                _block: block,
                cqn,
                entries,
                ring: ring_addr,
                dbrec: dbrec_addr,
                uar_register: reg as usize,
                _umems: [ring, dbrec],
                _uar: uar,
                _page: page,
                context: context as usize,
            },
        );
        Ok(ptr)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    entry::status("ibv_destroy_cq", |emulator| {
        let mut objects = emulator.objects();
        let c = find(&objects.cqs, cq, "a CQ")?;
        let device = objects.contexts[&c.context].device;
        let key = cq as usize;
        if objects
            .qps
            .values()
            .any(|q| q.send_cq == key || q.recv_cq == key)
        {
            return Err(Failure::new(libc::EBUSY, "a DC target still uses the CQ"));
        }
        let input = DestroyCq { uid: 0, cqn: c.cqn }
            .encode()
            .map_err(|e| Failure::invalid(e.to_string()))?;
        destroy(
            emulator,
            "ibv_destroy_cq",
            device,
            SoftObject::Cq(c.cqn),
            &input,
        )?;
        objects.cqs.remove(&(cq as usize));
        Ok(())
    })
}

/// The PD (or parent domain) `pd` points at, and its context.
fn pd_of(objects: &crate::emulator::Objects, pd: *mut ibv_pd) -> Outcome<&Pd> {
    find(&objects.pds, pd, "a PD")
}

/// The `alloc_parent_domain` operation of the context (the static-inline
/// `ibv_alloc_parent_domain`): a protection domain standing for its parent (no thread
/// domain, no custom allocator: neither is modelled).
pub(crate) unsafe extern "C" fn op_alloc_parent_domain(
    context: *mut ibv_context,
    attr: *mut ibv_parent_domain_init_attr,
) -> *mut ibv_pd {
    entry::pointer("ibv_alloc_parent_domain", |emulator| {
        let mut objects = emulator.objects();
        context_of(&objects, context)?;
        if attr.is_null() {
            return Err(Failure::invalid("a null attribute block"));
        }
        // SAFETY: a non-null `struct ibv_parent_domain_init_attr *`.
        let attr = unsafe { &*attr };
        if !attr.td.is_null() || attr.comp_mask != 0 {
            return Err(Failure::new(
                libc::EOPNOTSUPP,
                "thread domains and custom allocators are not modelled",
            ));
        }
        let parent = pd_of(&objects, attr.pd)?;
        if parent.context != context as usize || parent.parent.is_some() {
            return Err(Failure::invalid("the parent is not a PD of this context"));
        }
        let pdn = parent.pdn;
        let block = Owned::new(ibv_pd {
            context,
            handle: pdn,
        });
        let ptr = block.ptr();
        objects.pds.insert(
            block.key(),
            Pd {
                _block: block,
                _soft: None,
                pdn,
                parent: Some(attr.pd as usize),
                context: context as usize,
            },
        );
        Ok(ptr)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_srq(
    pd: *mut ibv_pd,
    attr: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
    entry::pointer("ibv_create_srq", |emulator| {
        let mut objects = emulator.objects();
        let context = pd_of(&objects, pd)?.context;
        let device = objects.contexts[&context].device;
        let d = &emulator.devices[device];
        if attr.is_null() {
            return Err(Failure::invalid("a null attribute block"));
        }
        // SAFETY: a non-null `struct ibv_srq_init_attr *`.
        let attr = unsafe { &mut *attr };
        let limit = d.config.limits.max_srq_wr as u32;
        if attr.attr.max_wr == 0 || attr.attr.max_wr > limit || attr.attr.max_sge > 1 {
            return Err(Failure::invalid(format!(
                "{} receive WQEs of {} scatter entries (the emulator's SRQs hold up to {limit} of 1)",
                attr.attr.max_wr, attr.attr.max_sge
            )));
        }
        // As mlx5: a ring of the next power of two above `max_wr`, one WQE of which stays
        // the free list's end, so `max_wr` reported is that size minus one.
        let ring = (attr.attr.max_wr + 1).next_power_of_two();
        let max_wr = ring - 1;
        let nomem = |e: &dyn std::fmt::Display| Failure::new(libc::ENOMEM, e.to_string());
        let buffer =
            DmaBuffer::zeroed((ring * SRQ_STRIDE) as usize, 4096).map_err(|e| nomem(&e))?;
        let dbrec = DmaBuffer::zeroed(8, 64).map_err(|e| nomem(&e))?;
        // The device's SRQ, in the PD this one stands for (a parent domain's parent).
        let soft_pd = own_pd(&objects, pd)?;
        let soft = d
            .nic
            .create_srq(soft_pd, max_wr)
            .map_err(|e| Failure::new(libc::ENOMEM, e.to_string()))?;
        let srqn = soft.srqn();
        // rdma-core reports what it made.
        attr.attr.max_wr = max_wr;
        attr.attr.max_sge = 1;
        let block = Owned::new(ibv_srq {
            context: context as *mut ibv_context,
            srq_context: attr.srq_context,
            pd,
            handle: srqn,
            mutex: Default::default(),
            cond: Default::default(),
            events_completed: 0,
        });
        let ptr = block.ptr();
        objects.srqs.insert(
            block.key(),
            Srq {
                _block: block,
                soft,
                srqn,
                max_wr,
                posted: 0,
                buffer,
                dbrec,
                pd: pd as usize,
                context,
            },
        );
        Ok(ptr)
    })
}

/// The device PD behind `pd` (a parent domain stands for its parent's).
fn own_pd(objects: &crate::emulator::Objects, pd: *mut ibv_pd) -> Outcome<&ibgda::nic::SoftPd> {
    let p = pd_of(objects, pd)?;
    let owner = match p.parent {
        Some(parent) => find(&objects.pds, parent as *const ibv_pd, "a PD")?,
        None => p,
    };
    owner
        ._soft
        .as_ref()
        .ok_or_else(|| Failure::invalid("a parent domain of a parent domain"))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int {
    entry::status("ibv_destroy_srq", |emulator| {
        let mut objects = emulator.objects();
        let s = find(&objects.srqs, srq, "an SRQ")?;
        // A DC target or a DEVX queue pair naming it: the device refuses, as the kernel
        // does (EBUSY).
        if objects.qps.values().any(|q| q.srq == srq as usize) || s.soft.is_in_use() {
            return Err(Failure::new(
                libc::EBUSY,
                format!("SRQ {:#x} is still named by a queue", s.srqn),
            ));
        }
        objects.srqs.remove(&(srq as usize));
        Ok(())
    })
}

/// The `post_srq_recv` operation of the context (the static-inline `ibv_post_srq_recv`):
/// each request becomes a receive WQE of the device's SRQ, which a WRITE_WITH_IMM to a
/// queue receiving from it consumes (scatter entries are accepted and not used: the
/// emulator carries no SEND). As rdma-core, the SRQ's free list gets a WQE back only when
/// `ibv_poll_cq` reports the completion that used it, which the emulator does not
/// implement: over its life an SRQ takes `max_wr` receives, and a request past them fails
/// with `ENOMEM`, as rdma-core's does when its ring is full.
pub(crate) unsafe extern "C" fn op_post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    let mut failed: *mut ibv_recv_wr = wr;
    let rc = entry::status("ibv_post_srq_recv", |emulator| {
        let mut objects = emulator.objects();
        let device = {
            let s = find(&objects.srqs, srq, "an SRQ")?;
            objects.contexts[&s.context].device
        };
        let s = objects
            .srqs
            .get_mut(&(srq as usize))
            .ok_or_else(|| not_ours(srq, "an SRQ"))?;
        let mut next = wr;
        while !next.is_null() {
            failed = next;
            // SAFETY: a non-null `struct ibv_recv_wr *` of the caller's list.
            let request = unsafe { &*next };
            if request.num_sge < 0 || request.num_sge > 1 {
                return Err(Failure::invalid(format!(
                    "{} scatter entries: the SRQ takes up to 1",
                    request.num_sge
                )));
            }
            if s.posted >= u64::from(s.max_wr) {
                return Err(Failure::new(
                    libc::ENOMEM,
                    format!(
                        "SRQ {:#x} has no free receive WQE: its {} were posted, and WQEs come \
                         back only through ibv_poll_cq, which the emulator does not implement",
                        s.srqn, s.max_wr
                    ),
                ));
            }
            emulator.devices[device]
                .nic
                .post_srq_receives(&s.soft, 1)
                .map_err(|e| Failure::new(libc::ENOMEM, e.to_string()))?;
            s.posted += 1;
            next = request.next;
        }
        failed = core::ptr::null_mut();
        Ok(())
    });
    if rc != 0 && !bad_wr.is_null() {
        // SAFETY: a non-null out-pointer (the function's contract).
        unsafe { *bad_wr = failed };
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn mlx5dv_create_qp(
    context: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
    dv_attr: *mut mlx5dv_qp_init_attr,
) -> *mut ibv_qp {
    entry::pointer("mlx5dv_create_qp", |emulator| {
        let mut objects = emulator.objects();
        let (device, _) = context_of(&objects, context)?;
        if !emulator.devices[device].config.mlx5 {
            return Err(Failure::new(libc::EOPNOTSUPP, "not an mlx5 device"));
        }
        if attr.is_null() || dv_attr.is_null() {
            return Err(Failure::invalid("a null attribute block"));
        }
        // SAFETY: non-null blocks of the documented types.
        let (attr, dv) = unsafe { (&*attr, &*dv_attr) };
        let dct = attr.qp_type == IBV_QPT_DRIVER
            && dv.comp_mask & MLX5DV_QP_INIT_ATTR_MASK_DC != 0
            && dv.dc_init_attr.dc_type == MLX5DV_DCTYPE_DCT;
        if !dct {
            return Err(Failure::new(
                libc::EOPNOTSUPP,
                format!(
                    "QP type {:#x}, mlx5dv comp_mask {:#x}: the emulator makes DC targets \
                     through mlx5dv_create_qp (other queue pairs are made with DEVX)",
                    attr.qp_type, dv.comp_mask
                ),
            ));
        }
        if attr.comp_mask & IBV_QP_INIT_ATTR_PD == 0 {
            return Err(Failure::invalid(
                "a DC target needs a PD (IBV_QP_INIT_ATTR_PD)",
            ));
        }
        let pd = pd_of(&objects, attr.pd)?;
        let srq = objects
            .srqs
            .get(&(attr.srq as usize))
            .ok_or_else(|| Failure::invalid("a DC target needs an SRQ of this library"))?;
        for cq in [attr.send_cq, attr.recv_cq] {
            if !objects.cqs.contains_key(&(cq as usize)) {
                return Err(not_ours(cq, "a CQ"));
            }
        }
        if pd.context != context as usize || srq.context != context as usize {
            return Err(Failure::invalid("the PD and SRQ must be of this context"));
        }
        let block = Owned::new(ibv_qp {
            context,
            qp_context: attr.qp_context,
            pd: attr.pd,
            send_cq: attr.send_cq,
            recv_cq: attr.recv_cq,
            srq: attr.srq,
            handle: 0,
            // The DCT number is known once CREATE_DCT runs, at RTR (as with the kernel).
            qp_num: 0,
            state: IBV_QPS_RESET,
            qp_type: IBV_QPT_DRIVER,
            mutex: Default::default(),
            cond: Default::default(),
            events_completed: 0,
        });
        let ptr = block.ptr();
        objects.qps.insert(
            block.key(),
            Qp {
                block,
                pd: attr.pd as usize,
                srq: attr.srq as usize,
                recv_cq: attr.recv_cq as usize,
                send_cq: attr.send_cq as usize,
                access_key: dv.dc_init_attr.dct_access_key,
                access: 0,
                dct: None,
                context: context as usize,
            },
        );
        Ok(ptr)
    })
}

/// The atomic mode the kernel's mlx5 driver gives a DC target with remote atomics: with
/// the extended (masked) atomics, the largest operand size DC offers (`atomic_size_dc`, at
/// least 8 bytes: mode 3); else InfiniBand-compatible (mode 1) with compare-swap and
/// fetch-add; else none (the driver refuses the access flag).
fn kernel_atomic_mode(caps: &ibgda::nic::DeviceCaps) -> Option<AtomicMode> {
    if !caps.atomic {
        return None;
    }
    let sizes = caps.atomic_sizes_dc & 0x1ff;
    if caps.masked_atomics && sizes != 0 {
        let log_max = 15 - sizes.leading_zeros() as u64;
        return AtomicMode::from_wire("CREATE_DCT", log_max.max(3)).ok();
    }
    caps.standard_atomics.then_some(AtomicMode::IbCompatible)
}

/// `IBV_ACCESS_REMOTE_WRITE`, `_READ`, `_ATOMIC`.
const REMOTE_WRITE: u32 = 1 << 1;
const REMOTE_READ: u32 = 1 << 2;
const REMOTE_ATOMIC: u32 = 1 << 3;

#[no_mangle]
pub unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
) -> c_int {
    entry::status("ibv_modify_qp", |emulator| {
        let mut objects = emulator.objects();
        let q = find(&objects.qps, qp, "a queue pair")?;
        if attr.is_null() {
            return Err(Failure::invalid("a null attribute block"));
        }
        // SAFETY: a non-null `struct ibv_qp_attr *`.
        let attr = unsafe { &*attr };
        let state = q.block.get().state;
        let device = objects.contexts[&q.context].device;
        let d = &emulator.devices[device];
        match (state, attr.qp_state) {
            (IBV_QPS_RESET, IBV_QPS_INIT) => {
                let needed = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
                if mask & needed != needed || attr.port_num != 1 || attr.pkey_index != 0 {
                    return Err(Failure::invalid(format!(
                        "RST2INIT of a DC target: mask {mask:#x}, port {}, P_Key index {}",
                        attr.port_num, attr.pkey_index
                    )));
                }
                let access = attr.qp_access_flags;
                let q = objects
                    .qps
                    .get_mut(&(qp as usize))
                    .expect("looked up above");
                q.access = access;
                q.block.get_mut().state = IBV_QPS_INIT;
                Ok(())
            }
            (IBV_QPS_INIT, IBV_QPS_RTR) => {
                let needed = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_MIN_RNR_TIMER;
                if mask & needed != needed {
                    return Err(Failure::invalid(format!(
                        "INIT2RTR of a DC target: mask {mask:#x}"
                    )));
                }
                let mtu = u8::try_from(attr.path_mtu)
                    .ok()
                    .and_then(|m| Mtu::from_wire("CREATE_DCT", m.into()).ok())
                    .ok_or_else(|| Failure::invalid(format!("path MTU {}", attr.path_mtu)))?;
                let ah = &attr.ah_attr;
                let global = ah.is_global != 0;
                let atomic = q.access & REMOTE_ATOMIC != 0;
                let dctc = DctContext {
                    user_index: 0,
                    cqn: objects.cqs[&q.recv_cq].cqn,
                    atomic_mode: if atomic {
                        kernel_atomic_mode(&d.config.caps).ok_or_else(|| {
                            Failure::new(
                                libc::EOPNOTSUPP,
                                "IBV_ACCESS_REMOTE_ATOMIC on a device without atomics",
                            )
                        })?
                    } else {
                        AtomicMode::NotSet
                    },
                    access: RemoteAccess {
                        read: q.access & REMOTE_READ != 0,
                        write: q.access & REMOTE_WRITE != 0,
                        atomic,
                    },
                    min_rnr_nak: attr.min_rnr_timer & 0x1f,
                    srqn: objects.srqs[&q.srq].srqn,
                    pd: objects.pds[&q.pd].pdn,
                    tclass: if global { ah.grh.traffic_class } else { 0 },
                    flow_label: if global {
                        ah.grh.flow_label & 0xf_ffff
                    } else {
                        0
                    },
                    dc_access_key: q.access_key,
                    mtu,
                    port: 1,
                    pkey_index: 0,
                    my_addr_index: if global { ah.grh.sgid_index } else { 0 },
                    hop_limit: if global { ah.grh.hop_limit } else { 0 },
                    eth_prio: 0,
                    dscp: 0,
                };
                let input = CreateDct { uid: 0, dctc }
                    .encode()
                    .map_err(|e| Failure::invalid(e.to_string()))?;
                let mut output = vec![0u8; CreateDctOutput::OUTPUT_BYTES];
                command(
                    emulator,
                    "ibv_modify_qp",
                    device,
                    &input,
                    &mut output,
                    |i, o| d.nic.create_object(i, o),
                )?;
                let dctn = CreateDctOutput::decode(&output)
                    .map_err(|e| Failure::invalid(e.to_string()))?
                    .dctn;
                let q = objects
                    .qps
                    .get_mut(&(qp as usize))
                    .expect("looked up above");
                q.dct = Some(dctn);
                let block = q.block.get_mut();
                block.qp_num = dctn;
                block.handle = dctn;
                block.state = IBV_QPS_RTR;
                Ok(())
            }
            (from, to) => Err(Failure::new(
                libc::EOPNOTSUPP,
                format!(
                    "transition {from} -> {to} of a DC target: the emulator models RESET -> \
                     INIT -> RTR (a DCT's life)"
                ),
            )),
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    entry::status("ibv_destroy_qp", |emulator| {
        let mut objects = emulator.objects();
        let q = find(&objects.qps, qp, "a queue pair")?;
        if let Some(dctn) = q.dct {
            let device = objects.contexts[&q.context].device;
            let input = DestroyDct { uid: 0, dctn }
                .encode()
                .map_err(|e| Failure::invalid(e.to_string()))?;
            destroy(
                emulator,
                "ibv_destroy_qp",
                device,
                SoftObject::Dct(dctn),
                &input,
            )?;
        }
        objects.qps.remove(&(qp as usize));
        Ok(())
    })
}

/// `mlx5dv_init_obj` for a verbs CQ: its ring, record, size, UAR and number.
pub(crate) fn cq_obj(objects: &crate::emulator::Objects, pair: &mlx5dv_obj_pair) -> Outcome<()> {
    let cq = find(&objects.cqs, pair.in_, "a CQ")?;
    let out = out_block::<mlx5dv_cq>(pair.out, "mlx5dv_cq")?;
    // SAFETY: a non-null `struct mlx5dv_cq *`; the ring and record live as long as the CQ.
    unsafe {
        out.write(mlx5dv_cq {
            buf: cq.ring as *mut c_void,
            dbrec: cq.dbrec as *mut u32,
            cqe_cnt: cq.entries,
            cqe_size: CQE_BYTES as u32,
            cq_uar: cq.uar_register as *mut c_void,
            cqn: cq.cqn,
            comp_mask: 0,
        })
    };
    Ok(())
}

/// `mlx5dv_init_obj` for an SRQ: its buffer, record, stride, and (when asked) number.
pub(crate) fn srq_obj(objects: &crate::emulator::Objects, pair: &mlx5dv_obj_pair) -> Outcome<()> {
    let srq = find(&objects.srqs, pair.in_, "an SRQ")?;
    let out = out_block::<mlx5dv_srq>(pair.out, "mlx5dv_srq")?;
    // SAFETY: a non-null `struct mlx5dv_srq *`; `comp_mask` is its input (what is asked).
    unsafe {
        let asked = (*out).comp_mask;
        out.write(mlx5dv_srq {
            buf: srq.buffer.as_ptr().cast(),
            dbrec: srq.dbrec.as_ptr().cast(),
            stride: SRQ_STRIDE,
            head: 0,
            tail: srq.max_wr,
            comp_mask: asked & MLX5DV_SRQ_MASK_SRQN,
            srqn: if asked & MLX5DV_SRQ_MASK_SRQN != 0 {
                srq.srqn
            } else {
                0
            },
        })
    };
    Ok(())
}
