//! The generated CUDA header `cuda/ibgda_layout.h`: every layout and constant the device
//! library uses, taken from the Rust types (sizes and offsets through `offset_of!`, values
//! through the types' own constructors), with `static_assert`s so the C side fails to
//! compile if it ever disagrees.
//!
//! The header is committed. The test `layout_header` regenerates it and fails on any
//! difference; `IBGDA_BLESS=1 cargo test -p ibgda-kernels --test layout_header` (or
//! `cargo run -p ibgda-kernels --bin ibgda-layout-header`) rewrites it. The host build
//! of the CUDA software NIC (`build.rs`) compiles against the committed header; when a
//! change to its tables makes that fail, regenerate with `IBGDA_SKIP_HOST_ENGINE=1` set.

use core::fmt::Write as _;
use core::mem::{align_of, offset_of, size_of};

use ibgda::cq::{Cqe64, CqeOpcode, ErrorCqe64, Syndrome, CQE_BYTES};
use ibgda::order::{device_sequence, ScopeKind};
use ibgda::queue::{
    DeviceProducerState, DeviceQueueDescriptor, CQE_INIT_OP_OWN, SEND_DBREC_OFFSET,
};
use ibgda::wqe::segment::{
    AddressVectorSegment, AtomicSegment, CompactAddressVectorSegment, ControlSegment, DataSegment,
    InlineHeader, MaskedCompareSwap4Segment, MaskedCompareSwap8Segment, MaskedFetchAdd4Segment,
    MaskedFetchAdd8Segment, RemoteAddressSegment, EXTENDED_AV_FLAG, INLINE_SEGMENT_FLAG, MAX_DS,
    OCTOWORD_BYTES, WQEBB_BYTES,
};
use ibgda::wqe::{
    Atomic, AtomicWidth, Compact, CompletionMode, ControlFlags, Dc, Dump, FenceMode, FixedShape,
    Full, Gather, Nop, OneSegment, Opcode, Qpn, Rc, RdmaRead, RdmaWrite, Solicited, TwoSegments,
    WqeLimits,
};

use ibgda::softnic::{Access, Fault, FLUSH_VENDOR_SYNDROME};

use ibgda::nic::{DeviceWindow, DeviceWindowPeer};
use ibgda::wqe::MAX_SEGMENT_BYTES;

use crate::api::{
    ApiCall, ApiOp, DeviceComm, DeviceCounter, DeviceCounterSlot, DeviceStatus, SignalCmp,
    NO_COUNTER, PUT_INLINE_MAX,
};
use crate::request::{Shape, SinkStats, TransportForm, WqeRequest, REQUEST_INLINE_MAX};
use crate::softnic::tables::{
    self, NicCq, NicEngine, NicNode, NicQueue, NicRegion, NicResponder, NicStats, NIC_NONE,
    WRITE_COPY_CHUNK,
};

/// The header's path inside the kernels crate.
pub const LAYOUT_HEADER_PATH: &str = "cuda/ibgda_layout.h";

/// One field of a C struct: name, C type, offset and size from Rust.
struct Field {
    name: &'static str,
    c_type: &'static str,
    offset: usize,
    size: usize,
}

fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

macro_rules! fields {
    ($ty:ty { $($name:ident : $ctype:expr),* $(,)? }) => {
        [$(Field {
            name: stringify!($name),
            c_type: $ctype,
            offset: offset_of!($ty, $name),
            size: field_size::<$ty, _>(|v: &$ty| &v.$name),
        }),*]
    };
}

/// Emits a C struct with the Rust layout, explicit padding, and static asserts on the
/// size, the alignment and every offset.
fn c_struct(out: &mut String, name: &str, doc: &str, size: usize, align: usize, fields: &[Field]) {
    let _ = writeln!(out, "/* {doc} */");
    let _ = writeln!(out, "struct alignas({align}) {name} {{");
    let mut at = 0;
    let mut pad = 0;
    for f in fields {
        assert!(f.offset >= at, "{name}.{}: fields out of order", f.name);
        if f.offset > at {
            let _ = writeln!(out, "    unsigned char _pad{pad}[{}];", f.offset - at);
            pad += 1;
        }
        let (ty, array) = match f.c_type.split_once('[') {
            Some((ty, rest)) => (ty, format!("[{rest}")),
            None => (f.c_type, String::new()),
        };
        let _ = writeln!(out, "    {ty} {}{array};", f.name);
        at = f.offset + f.size;
    }
    if size > at {
        let _ = writeln!(out, "    unsigned char _pad{pad}[{}];", size - at);
    }
    let _ = writeln!(out, "}};");
    let _ = writeln!(
        out,
        "static_assert(sizeof({name}) == {size}, \"{name}: size\");"
    );
    let _ = writeln!(
        out,
        "static_assert(alignof({name}) == {align}, \"{name}: alignment\");"
    );
    for f in fields {
        let _ = writeln!(
            out,
            "static_assert(IBGDA_OFFSETOF({name}, {field}) == {off}, \"{name}.{field}: offset\");",
            field = f.name,
            off = f.offset
        );
        let _ = writeln!(
            out,
            "static_assert(sizeof((({name}*)0)->{field}) == {size}, \"{name}.{field}: size\");",
            field = f.name,
            size = f.size
        );
    }
    out.push('\n');
}

/// Emits `constexpr unsigned` constants for a segment's size and field offsets.
fn segment(out: &mut String, prefix: &str, doc: &str, size: usize, fields: &[(&str, usize)]) {
    let _ = writeln!(out, "/* {doc} */");
    let _ = writeln!(out, "constexpr unsigned {prefix}_BYTES = {size};");
    for (name, off) in fields {
        let _ = writeln!(out, "constexpr unsigned {prefix}_{name} = {off};");
    }
    out.push('\n');
}

fn constant(out: &mut String, name: &str, value: u64) {
    if value > u64::from(u32::MAX) {
        let _ = writeln!(out, "constexpr unsigned long long {name} = {value:#x}ull;");
    } else {
        let _ = writeln!(out, "constexpr unsigned {name} = {value:#x}u;");
    }
}

macro_rules! seg {
    ($out:expr, $prefix:expr, $ty:ty, $doc:expr, [$($field:ident => $cname:expr),* $(,)?]) => {
        segment($out, $prefix, $doc, size_of::<$ty>(), &[$(($cname, offset_of!($ty, $field))),*])
    };
}

/// The full text of `ibgda_layout.h`.
pub fn layout_header() -> String {
    let mut o = String::new();
    o.push_str(
        "/* ibgda_layout.h: GENERATED from the Rust types of the ibgda crate by\n \
         * ibgda_kernels::layout::layout_header(). Do not edit: a test fails on any\n \
         * difference. Regenerate with\n \
         *   IBGDA_BLESS=1 cargo test -p ibgda-kernels --test layout_header\n \
         * All multi-byte WQE and CQE fields are big-endian on the wire. */\n\
         #pragma once\n\n\
         /* offsetof in a constant expression: NVRTC (EDG) has no __builtin_offsetof but\n \
         * takes __INTADDR__; nvcc and host compilers have the builtin. */\n\
         #if defined(__CUDACC_RTC__)\n\
         #define IBGDA_OFFSETOF(type, member) ((unsigned long long)__INTADDR__(&(((type*)0)->member)))\n\
         #else\n\
         #define IBGDA_OFFSETOF(type, member) __builtin_offsetof(type, member)\n\
         #endif\n\n\
         namespace ibgda {\nnamespace layout {\n\n",
    );

    // --- basic geometry -----------------------------------------------------------------
    o.push_str("/* Geometry of send rings. */\n");
    constant(&mut o, "OCTOWORD_BYTES", OCTOWORD_BYTES as u64);
    constant(&mut o, "WQEBB_BYTES", WQEBB_BYTES as u64);
    constant(&mut o, "MAX_DS", MAX_DS.into());
    constant(&mut o, "MAX_WQEBBS", WqeLimits::MAX_WQEBBS.into());
    constant(&mut o, "INLINE_SEGMENT_FLAG", INLINE_SEGMENT_FLAG.into());
    constant(&mut o, "EXTENDED_AV_FLAG", EXTENDED_AV_FLAG.into());
    constant(&mut o, "QPN_MAX", Qpn::MAX.into());
    constant(&mut o, "SEND_DBREC_OFFSET", SEND_DBREC_OFFSET as u64);
    constant(&mut o, "CQE_INIT_OP_OWN", CQE_INIT_OP_OWN.into());
    o.push('\n');

    // --- segments -----------------------------------------------------------------------
    seg!(&mut o, "CTRL", ControlSegment, "mlx5_wqe_ctrl_seg", [
        opmod_idx_opcode => "OPMOD_IDX_OPCODE", qpn_ds => "QPN_DS", signature => "SIGNATURE",
        dci_stream_channel_id => "DCI_STREAM_CHANNEL_ID", fm_ce_se => "FM_CE_SE", imm => "IMM",
    ]);
    seg!(&mut o, "RADDR", RemoteAddressSegment, "mlx5_wqe_raddr_seg", [
        raddr => "RADDR", rkey => "RKEY", reserved => "RESERVED",
    ]);
    seg!(&mut o, "DATA", DataSegment, "mlx5_wqe_data_seg", [
        byte_count => "BYTE_COUNT", lkey => "LKEY", addr => "ADDR",
    ]);
    seg!(&mut o, "INLINE_HEADER", InlineHeader, "mlx5_wqe_inl_data_seg (payload follows)", [
        byte_count => "BYTE_COUNT",
    ]);
    seg!(&mut o, "ATOMIC", AtomicSegment, "mlx5_wqe_atomic_seg", [
        swap_add => "SWAP_ADD", compare => "COMPARE",
    ]);
    seg!(&mut o, "MASKED_FA4", MaskedFetchAdd4Segment, "masked fetch-add, 4 bytes", [
        add => "ADD", field_boundary => "FIELD_BOUNDARY", reserved => "RESERVED",
    ]);
    seg!(&mut o, "MASKED_CS4", MaskedCompareSwap4Segment, "masked compare-swap, 4 bytes", [
        swap => "SWAP", compare => "COMPARE", swap_mask => "SWAP_MASK",
        compare_mask => "COMPARE_MASK",
    ]);
    seg!(&mut o, "MASKED_FA8", MaskedFetchAdd8Segment, "masked fetch-add, 8 bytes", [
        add => "ADD", field_boundary => "FIELD_BOUNDARY",
    ]);
    seg!(&mut o, "MASKED_CS8", MaskedCompareSwap8Segment,
        "masked compare-swap, 8 bytes (two octowords)", [
        swap => "SWAP", compare => "COMPARE", swap_mask => "SWAP_MASK",
        compare_mask => "COMPARE_MASK",
    ]);
    seg!(&mut o, "AV_COMPACT", CompactAddressVectorSegment, "compact DC address vector", [
        dc_key => "DC_KEY", dqp_dct => "DQP_DCT", stat_rate_sl => "STAT_RATE_SL",
        fl_mlid => "FL_MLID", rlid => "RLID",
    ]);
    seg!(&mut o, "AV_FULL", AddressVectorSegment, "mlx5_wqe_av (full DC address vector)", [
        dc_key => "DC_KEY", dqp_dct => "DQP_DCT", stat_rate_sl => "STAT_RATE_SL",
        fl_mlid => "FL_MLID", rlid => "RLID", rmac => "RMAC", tclass => "TCLASS",
        hop_limit => "HOP_LIMIT", grh_gid_fl => "GRH_GID_FL", rgid => "RGID",
    ]);

    // --- opcodes, opmods, flags ---------------------------------------------------------
    o.push_str("/* Send opcodes (the control segment's low byte). */\n");
    for op in [
        Opcode::Nop,
        Opcode::RdmaWrite,
        Opcode::RdmaWriteImm,
        Opcode::RdmaRead,
        Opcode::AtomicCompareSwap,
        Opcode::AtomicFetchAdd,
        Opcode::AtomicMaskedCompareSwap,
        Opcode::AtomicMaskedFetchAdd,
        Opcode::Dump,
    ] {
        constant(&mut o, &format!("OPCODE_{}", op.name()), op.byte().into());
    }
    o.push_str("/* Opcode modifiers of masked atomics. */\n");
    constant(&mut o, "OPMOD_ATOMIC_4", AtomicWidth::Four.opmod().into());
    constant(&mut o, "OPMOD_ATOMIC_8", AtomicWidth::Eight.opmod().into());
    o.push_str("/* The fm_ce_se byte. */\n");
    let flags = |fence, completion, solicited| {
        ControlFlags {
            fence,
            completion,
            solicited,
        }
        .byte()
    };
    let cq_update = flags(FenceMode::None, CompletionMode::Always, Solicited::No);
    let ce_mask = flags(
        FenceMode::None,
        CompletionMode::AlwaysWithEvent,
        Solicited::No,
    );
    let fence_one = flags(
        FenceMode::InitiatorSmall,
        CompletionMode::OnError,
        Solicited::No,
    );
    constant(&mut o, "FM_CE_SE_CQ_UPDATE", cq_update.into());
    constant(&mut o, "FM_CE_SE_CE_MASK", ce_mask.into());
    constant(
        &mut o,
        "FM_CE_SE_SOLICITED",
        flags(FenceMode::None, CompletionMode::OnError, Solicited::Yes).into(),
    );
    constant(
        &mut o,
        "FM_CE_SE_FENCE_SHIFT",
        fence_one.trailing_zeros().into(),
    );
    for (name, mode) in [
        ("NONE", FenceMode::None),
        ("INITIATOR_SMALL", FenceMode::InitiatorSmall),
        ("FENCE", FenceMode::Fence),
        ("STRONG_ORDERING", FenceMode::StrongOrdering),
        ("SMALL_AND_FENCE", FenceMode::SmallAndFence),
    ] {
        constant(
            &mut o,
            &format!("FM_CE_SE_FENCE_{name}"),
            flags(mode, CompletionMode::OnError, Solicited::No).into(),
        );
    }
    constant(
        &mut o,
        "FM_CE_SE_RESERVED_BITS",
        ControlFlags::RESERVED_BITS.into(),
    );
    o.push('\n');

    // --- DS of the fixed shapes ----------------------------------------------------------
    o.push_str("/* DS (octowords) of the fixed shapes, from the builders' FixedShape::DS. */\n");
    type Sge1 = Gather<1>;
    for (name, ds) in [
        ("RC_WRITE_SGE", RdmaWrite::<'static, Rc, Sge1>::DS),
        ("DCC_WRITE_SGE", RdmaWrite::<'static, Dc<Compact>, Sge1>::DS),
        ("DCF_WRITE_SGE", RdmaWrite::<'static, Dc<Full>, Sge1>::DS),
        ("RC_READ_SGE", RdmaRead::<'static, Rc, Sge1>::DS),
        ("DCC_READ_SGE", RdmaRead::<'static, Dc<Compact>, Sge1>::DS),
        ("DCF_READ_SGE", RdmaRead::<'static, Dc<Full>, Sge1>::DS),
        ("RC_ATOMIC_1", Atomic::<Rc, OneSegment>::DS),
        ("DCC_ATOMIC_1", Atomic::<Dc<Compact>, OneSegment>::DS),
        ("DCF_ATOMIC_1", Atomic::<Dc<Full>, OneSegment>::DS),
        ("RC_ATOMIC_2", Atomic::<Rc, TwoSegments>::DS),
        ("DCC_ATOMIC_2", Atomic::<Dc<Compact>, TwoSegments>::DS),
        ("DCF_ATOMIC_2", Atomic::<Dc<Full>, TwoSegments>::DS),
        ("NOP", <Nop<Rc> as FixedShape>::DS),
        ("DUMP", <Dump<Rc> as FixedShape>::DS),
    ] {
        constant(&mut o, &format!("DS_{name}"), ds.into());
    }
    o.push('\n');

    // --- CQEs ---------------------------------------------------------------------------
    assert_eq!(size_of::<Cqe64>(), CQE_BYTES);
    seg!(&mut o, "CQE", Cqe64, "mlx5_cqe64", [
        wqe_id => "WQE_ID", slid => "SLID", flags_rqpn => "FLAGS_RQPN", srqn_uidx => "SRQN_UIDX",
        imm_inval_pkey => "IMM_INVAL_PKEY",
        byte_cnt => "BYTE_CNT", timestamp => "TIMESTAMP", sop_drop_qpn => "SOP_DROP_QPN",
        wqe_counter => "WQE_COUNTER", signature => "SIGNATURE", op_own => "OP_OWN",
    ]);
    seg!(&mut o, "ERR_CQE", ErrorCqe64, "mlx5_err_cqe", [
        srqn => "SRQN", hw_err_synd => "HW_ERR_SYND", hw_synd_type => "HW_SYND_TYPE",
        vendor_err_synd => "VENDOR_ERR_SYND", syndrome => "SYNDROME",
        s_wqe_opcode_qpn => "S_WQE_OPCODE_QPN", wqe_counter => "WQE_COUNTER",
        op_own => "OP_OWN",
    ]);
    o.push_str("/* CQE opcodes (op_own >> 4). */\n");
    for (name, op) in [
        ("REQ", CqeOpcode::Requester),
        ("RESP_WR_IMM", CqeOpcode::ResponderWriteImm),
        ("RESP_SEND", CqeOpcode::ResponderSend),
        ("RESP_SEND_IMM", CqeOpcode::ResponderSendImm),
        ("RESP_SEND_INV", CqeOpcode::ResponderSendInvalidate),
        ("RESIZE_CQ", CqeOpcode::ResizeCq),
        ("NO_PACKET", CqeOpcode::NoPacket),
        ("SIG_ERR", CqeOpcode::SignatureError),
        ("REQ_ERR", CqeOpcode::RequesterError),
        ("RESP_ERR", CqeOpcode::ResponderError),
        ("INVALID", CqeOpcode::Invalid),
    ] {
        constant(&mut o, &format!("CQE_OPCODE_{name}"), (op as u8).into());
    }
    o.push_str("/* Error CQE syndromes. */\n");
    for (name, s) in [
        ("LOCAL_LENGTH", Syndrome::LocalLength),
        ("LOCAL_QP_OPERATION", Syndrome::LocalQpOperation),
        ("LOCAL_PROTECTION", Syndrome::LocalProtection),
        ("WORK_REQUEST_FLUSHED", Syndrome::WorkRequestFlushed),
        ("MEMORY_WINDOW_BIND", Syndrome::MemoryWindowBind),
        ("BAD_RESPONSE", Syndrome::BadResponse),
        ("LOCAL_ACCESS", Syndrome::LocalAccess),
        ("REMOTE_INVALID_REQUEST", Syndrome::RemoteInvalidRequest),
        ("REMOTE_ACCESS", Syndrome::RemoteAccess),
        ("REMOTE_OPERATION", Syndrome::RemoteOperation),
        ("TRANSPORT_RETRY_EXCEEDED", Syndrome::TransportRetryExceeded),
        ("RNR_RETRY_EXCEEDED", Syndrome::RnrRetryExceeded),
        ("REMOTE_ABORTED", Syndrome::RemoteAborted),
    ] {
        constant(&mut o, &format!("SYNDROME_{name}"), (s as u8).into());
    }
    o.push('\n');

    // --- scopes -------------------------------------------------------------------------
    o.push_str("/* Ordering scopes (ibgda::order::ScopeKind) and the PTX each must become. */\n");
    for kind in ScopeKind::ALL {
        let name = format!("{kind:?}");
        let seq = device_sequence(kind);
        let _ = writeln!(
            o,
            "constexpr unsigned SCOPE_{} = {}u; /* {} */",
            upper_snake(&name),
            kind as u32,
            if seq.is_empty() { "host only" } else { seq }
        );
    }
    o.push('\n');

    // --- WQE shapes and transports of the test records ----------------------------------
    o.push_str("/* WQE shapes and transport forms of WqeRequest (ibgda_kernels::request). */\n");
    for shape in Shape::ALL {
        let _ = writeln!(
            o,
            "constexpr unsigned SHAPE_{} = {}u;",
            shape.c_name(),
            shape as u32
        );
    }
    for (name, t) in [
        ("RC", TransportForm::Rc),
        ("DC_COMPACT", TransportForm::DcCompact),
        ("DC_FULL", TransportForm::DcFull),
    ] {
        let _ = writeln!(o, "constexpr unsigned TRANSPORT_{name} = {}u;", t as u32);
    }
    constant(&mut o, "REQUEST_INLINE_MAX", REQUEST_INLINE_MAX as u64);
    o.push('\n');

    softnic_constants(&mut o);
    api_constants(&mut o);

    o.push_str("} /* namespace layout */\n\n");

    // --- structs ------------------------------------------------------------------------
    c_struct(
        &mut o,
        "DeviceQueueDescriptor",
        "ibgda::queue::DeviceQueueDescriptor: a queue pair as a kernel sees it (by value)",
        size_of::<DeviceQueueDescriptor>(),
        align_of::<DeviceQueueDescriptor>(),
        &fields!(DeviceQueueDescriptor {
            sq_ring: "unsigned long long",
            sq_dbrec: "unsigned long long",
            doorbell: "unsigned long long",
            cq_ring: "unsigned long long",
            cq_dbrec: "unsigned long long",
            state: "unsigned long long",
            qpn: "unsigned int",
            log_sq_wqebbs: "unsigned int",
            log_cq_entries: "unsigned int",
            max_inline: "unsigned int",
            cq_mode: "unsigned int",
            transport: "unsigned int",
            scope: "unsigned int",
            signal_interval: "unsigned int",
            wait_ns: "unsigned long long",
        }),
    );
    c_struct(
        &mut o,
        "DeviceProducerState",
        "ibgda::queue::DeviceProducerState: free-running WQEBB and CQE counters",
        size_of::<DeviceProducerState>(),
        align_of::<DeviceProducerState>(),
        &fields!(DeviceProducerState {
            reserved: "unsigned long long",
            ready: "unsigned long long",
            posted: "unsigned long long",
            retired: "unsigned long long",
            cq_consumer: "unsigned long long",
            doorbell_lock: "unsigned int",
            poll_lock: "unsigned int",
            collapsed_seen: "unsigned int",
            reserved_word: "unsigned int",
        }),
    );
    c_struct(
        &mut o,
        "WqeRequest",
        "ibgda_kernels::request::WqeRequest: one WQE for the device to build",
        size_of::<WqeRequest>(),
        align_of::<WqeRequest>(),
        &fields!(WqeRequest {
            shape: "unsigned int",
            transport: "unsigned int",
            index: "unsigned int",
            qpn: "unsigned int",
            fm_ce_se: "unsigned int",
            imm: "unsigned int",
            rkey: "unsigned int",
            lkey: "unsigned int",
            raddr: "unsigned long long",
            laddr: "unsigned long long",
            len: "unsigned int",
            stream_id: "unsigned int",
            op0: "unsigned long long",
            op1: "unsigned long long",
            op2: "unsigned long long",
            op3: "unsigned long long",
            av: "unsigned char[48]",
            inline_data: "unsigned char[128]",
        }),
    );
    c_struct(
        &mut o,
        "SinkStats",
        "ibgda_kernels::request::SinkStats: what the doorbell sink counts",
        size_of::<SinkStats>(),
        align_of::<SinkStats>(),
        &fields!(SinkStats {
            doorbells: "unsigned long long",
            wqes: "unsigned long long",
            cqes: "unsigned long long",
            bad_wqes: "unsigned long long",
            bad_payloads: "unsigned long long",
            bad_doorbells: "unsigned long long",
            stop: "unsigned int",
            queues: "unsigned int",
            reserved: "unsigned long long[1]",
        }),
    );
    softnic_structs(&mut o);
    api_structs(&mut o);
    o.push_str("} /* namespace ibgda */\n");
    o
}

/// The CUDA software NIC's constants: access rights, the syndrome and vendor syndrome of
/// every fault (from `ibgda::softnic::Fault` itself), table encodings.
fn softnic_constants(o: &mut String) {
    o.push_str(
        "/* CUDA software NIC (cuda/softnic.cuh): access rights (ibgda::softnic::Access). */\n",
    );
    for (name, a) in [
        ("LOCAL_WRITE", Access::LOCAL_WRITE),
        ("REMOTE_WRITE", Access::REMOTE_WRITE),
        ("REMOTE_READ", Access::REMOTE_READ),
        ("REMOTE_ATOMIC", Access::REMOTE_ATOMIC),
    ] {
        constant(o, &format!("NIC_ACCESS_{name}"), a.bits().into());
    }
    o.push_str("/* Faults: syndrome and vendor syndrome (ibgda::softnic::Fault). */\n");
    let parse = ibgda::wqe::ParseError::InvalidRing { len: 0 };
    for (name, f) in [
        ("MALFORMED_WQE", Fault::MalformedWqe(parse)),
        ("FOREIGN_QPN", Fault::ForeignQpn { found: 0 }),
        (
            "UNPUBLISHED",
            Fault::Unpublished {
                wqebbs: 0,
                published: 0,
            },
        ),
        ("MESSAGE_TOO_LONG", Fault::MessageTooLong { len: 0, max: 0 }),
        ("LOCAL_KEY", Fault::LocalKey { lkey: 0 }),
        (
            "LOCAL_BOUNDS",
            Fault::LocalBounds {
                lkey: 0,
                addr: 0,
                len: 0,
            },
        ),
        ("LOCAL_WRITE_DENIED", Fault::LocalWriteDenied { lkey: 0 }),
        ("UNKNOWN_LID", Fault::UnknownLid { lid: 0 }),
        ("UNKNOWN_DCT", Fault::UnknownDct { dct: 0 }),
        ("WRONG_DC_KEY", Fault::WrongDcKey { dct: 0 }),
        (
            "RESPONDER_UNAVAILABLE",
            Fault::ResponderUnavailable { responder: 0 },
        ),
        (
            "MISALIGNED_ATOMIC",
            Fault::MisalignedAtomic { addr: 0, align: 0 },
        ),
        ("REMOTE_KEY", Fault::RemoteKey { rkey: 0 }),
        (
            "REMOTE_BOUNDS",
            Fault::RemoteBounds {
                rkey: 0,
                addr: 0,
                len: 0,
            },
        ),
        (
            "REMOTE_ACCESS_DENIED",
            Fault::RemoteAccessDenied {
                rkey: 0,
                needed: Access::REMOTE_READ,
            },
        ),
        (
            "RECEIVER_NOT_READY",
            Fault::ReceiverNotReady { responder: 0 },
        ),
        (
            "RESPONDER_CQ_OVERRUN",
            Fault::ResponderCqOverrun { responder: 0 },
        ),
    ] {
        let _ = writeln!(
            o,
            "constexpr unsigned FAULT_{name} = {:#06x}u; /* syndrome << 8 | vendor syndrome */",
            u32::from(f.syndrome() as u8) << 8 | u32::from(f.vendor_syndrome())
        );
    }
    constant(o, "FLUSH_VENDOR_SYNDROME", FLUSH_VENDOR_SYNDROME.into());
    o.push_str("/* Table encodings (ibgda_kernels::softnic::tables). */\n");
    constant(o, "NIC_NONE", NIC_NONE.into());
    for (name, v) in [
        ("NIC_STATE_INIT", tables::state::INIT),
        ("NIC_STATE_READY", tables::state::READY),
        ("NIC_STATE_ERROR", tables::state::ERROR),
        ("NIC_ERROR_NONE", tables::error_kind::NONE),
        ("NIC_ERROR_WQE", tables::error_kind::WQE),
        ("NIC_ERROR_CQ", tables::error_kind::CQ),
        ("NIC_TRANSPORT_RC", tables::transport::RC),
        ("NIC_TRANSPORT_DC", tables::transport::DC),
        ("NIC_WATCH_POLL_RECORD", tables::watch::POLL_RECORD),
        ("NIC_WATCH_DOORBELL_ONLY", tables::watch::DOORBELL_ONLY),
        ("NIC_CQ_RING", tables::cq_mode::RING),
        ("NIC_CQ_COLLAPSED", tables::cq_mode::COLLAPSED),
    ] {
        constant(o, name, v.into());
    }
    constant(o, "NIC_WRITE_COPY_CHUNK", WRITE_COPY_CHUNK);
    constant(o, "NIC_CQ_INDEX_MASK", 0xff_ffff);
    o.push('\n');
}

/// The CUDA software NIC's tables as C structs.
fn softnic_structs(o: &mut String) {
    c_struct(
        o,
        "NicNode",
        "ibgda_kernels::softnic::NicNode: one node of the fabric",
        size_of::<NicNode>(),
        align_of::<NicNode>(),
        &fields!(NicNode {
            lid: "unsigned int",
            reserved: "unsigned int",
        }),
    );
    c_struct(
        o,
        "NicRegion",
        "ibgda_kernels::softnic::NicRegion: a registered memory region",
        size_of::<NicRegion>(),
        align_of::<NicRegion>(),
        &fields!(NicRegion {
            start: "unsigned long long",
            base: "unsigned long long",
            len: "unsigned long long",
            node: "unsigned int",
            lkey: "unsigned int",
            rkey: "unsigned int",
            access: "unsigned int",
        }),
    );
    c_struct(
        o,
        "NicCq",
        "ibgda_kernels::softnic::NicCq: a completion queue",
        size_of::<NicCq>(),
        align_of::<NicCq>(),
        &fields!(NicCq {
            ring: "unsigned long long",
            dbrec: "unsigned long long",
            entries: "unsigned int",
            log2_entries: "unsigned int",
            mode: "unsigned int",
            error: "unsigned int",
            producer: "unsigned int",
            reserved: "unsigned int",
        }),
    );
    c_struct(
        o,
        "NicResponder",
        "ibgda_kernels::softnic::NicResponder: the receive side of an RC QP or a DCT",
        size_of::<NicResponder>(),
        align_of::<NicResponder>(),
        &fields!(NicResponder {
            dc_key: "unsigned long long",
            credits: "unsigned long long",
            number: "unsigned int",
            node: "unsigned int",
            is_dct: "unsigned int",
            error: "unsigned int",
            received: "unsigned int",
            cq: "unsigned int",
        }),
    );
    c_struct(
        o,
        "NicQueue",
        "ibgda_kernels::softnic::NicQueue: a send queue and the NIC's state for it",
        size_of::<NicQueue>(),
        align_of::<NicQueue>(),
        &fields!(NicQueue {
            ring: "unsigned long long",
            dbrec: "unsigned long long",
            doorbell: "unsigned long long",
            max_message_bytes: "unsigned long long",
            consumer: "unsigned long long",
            executed: "unsigned long long",
            last_doorbell: "unsigned long long",
            inject_at: "unsigned long long",
            drop_cqe_at: "unsigned long long",
            qpn: "unsigned int",
            node: "unsigned int",
            transport: "unsigned int",
            log_wqebbs: "unsigned int",
            cq: "unsigned int",
            peer: "unsigned int",
            state: "unsigned int",
            watch: "unsigned int",
            armed: "unsigned int",
            armed_limit: "unsigned int",
            error_kind: "unsigned int",
            error_syndrome: "unsigned int",
            error_vendor: "unsigned int",
            error_detail: "unsigned int",
            inject_syndrome: "unsigned int",
            inject_vendor: "unsigned int",
            drop_cqe: "unsigned int",
            reserved: "unsigned int",
        }),
    );
    c_struct(
        o,
        "NicStats",
        "ibgda_kernels::softnic::NicStats: an engine's totals",
        size_of::<NicStats>(),
        align_of::<NicStats>(),
        &fields!(NicStats {
            doorbells: "unsigned long long",
            foreign_doorbells: "unsigned long long",
            wqes_executed: "unsigned long long",
            wqes_failed: "unsigned long long",
            wqes_flushed: "unsigned long long",
            bytes_written: "unsigned long long",
            bytes_read: "unsigned long long",
            atomics: "unsigned long long",
            cqes_written: "unsigned long long",
            responder_cqes: "unsigned long long",
            cqes_dropped: "unsigned long long",
            async_events: "unsigned long long",
        }),
    );
    c_struct(
        o,
        "NicEngine",
        "ibgda_kernels::softnic::NicEngine: one engine's tables, scratch and totals",
        size_of::<NicEngine>(),
        align_of::<NicEngine>(),
        &fields!(NicEngine {
            nodes: "unsigned long long",
            regions: "unsigned long long",
            cqs: "unsigned long long",
            responders: "unsigned long long",
            queues: "unsigned long long",
            scratch: "unsigned long long",
            scratch_len: "unsigned long long",
            n_nodes: "unsigned int",
            n_regions: "unsigned int",
            n_cqs: "unsigned int",
            n_responders: "unsigned int",
            n_queues: "unsigned int",
            status: "int",
            steps: "unsigned long long",
            cycles: "unsigned long long",
            ns: "unsigned long long",
            stats: "NicStats",
        }),
    );
}

/// The device API's constants (`cuda/ibgda_api.cuh`): status codes, signal comparisons,
/// the operations of the test records, the inline-put limit.
fn api_constants(o: &mut String) {
    o.push_str(
        "/* Device API (cuda/ibgda_api.cuh): status codes (ibgda_kernels::api::DeviceStatus). */\n",
    );
    for (name, status) in DeviceStatus::NAMED {
        let code = status.code();
        let sign = if code < 0 { "-" } else { "" };
        let _ = writeln!(
            o,
            "constexpr int STATUS_{name} = {sign}{:#x};",
            code.unsigned_abs()
        );
    }
    o.push_str("/* wait_signal comparisons (ibgda_kernels::api::SignalCmp). */\n");
    for (name, cmp) in SignalCmp::ALL {
        constant(o, &format!("SIGNAL_CMP_{name}"), cmp as u64);
    }
    o.push_str("/* Operations of ApiCall (ibgda_kernels::api::ApiOp). */\n");
    for (name, op) in ApiOp::ALL {
        constant(o, &format!("API_OP_{name}"), op as u64);
    }
    constant(o, "PUT_INLINE_MAX", PUT_INLINE_MAX as u64);
    constant(o, "NO_COUNTER", NO_COUNTER.into());
    constant(o, "MAX_SEGMENT_BYTES", MAX_SEGMENT_BYTES);
    o.push('\n');
}

/// The device API's structs: windows (`ibgda::nic::window`), the communicator and its
/// counters, the test records.
fn api_structs(o: &mut String) {
    c_struct(
        o,
        "DeviceWindowPeer",
        "ibgda::nic::DeviceWindowPeer: one peer's side of a window",
        size_of::<DeviceWindowPeer>(),
        align_of::<DeviceWindowPeer>(),
        &fields!(DeviceWindowPeer {
            base: "unsigned long long",
            len: "unsigned long long",
            rkey: "unsigned int",
            reserved: "unsigned int",
        }),
    );
    c_struct(
        o,
        "DeviceWindow",
        "ibgda::nic::DeviceWindow: a window as a kernel sees it (by value)",
        size_of::<DeviceWindow>(),
        align_of::<DeviceWindow>(),
        &fields!(DeviceWindow {
            peers: "unsigned long long",
            local_base: "unsigned long long",
            local_len: "unsigned long long",
            n_peers: "unsigned int",
            lkey: "unsigned int",
            id: "unsigned int",
            reserved: "unsigned int",
        }),
    );
    c_struct(
        o,
        "DeviceComm",
        "ibgda_kernels::api::DeviceComm: a communicator as a kernel sees it (by value)",
        size_of::<DeviceComm>(),
        align_of::<DeviceComm>(),
        &fields!(DeviceComm {
            queues: "unsigned long long",
            counters: "unsigned long long",
            counter_slots: "unsigned long long",
            scratch: "unsigned long long",
            wait_ns: "unsigned long long",
            n_peers: "unsigned int",
            rank: "unsigned int",
            scope: "unsigned int",
            scratch_lkey: "unsigned int",
            n_counters: "unsigned int",
            counter_capacity: "unsigned int",
            inline_max: "unsigned int",
            doorbell_batch: "unsigned int",
        }),
    );
    c_struct(
        o,
        "DeviceCounter",
        "ibgda_kernels::api::DeviceCounter: a local completion counter",
        size_of::<DeviceCounter>(),
        align_of::<DeviceCounter>(),
        &fields!(DeviceCounter {
            attached: "unsigned long long",
            completed: "unsigned long long",
            lock: "unsigned int",
            reserved: "unsigned int[3]",
        }),
    );
    c_struct(
        o,
        "DeviceCounterSlot",
        "ibgda_kernels::api::DeviceCounterSlot: one attached operation's ticket",
        size_of::<DeviceCounterSlot>(),
        align_of::<DeviceCounterSlot>(),
        &fields!(DeviceCounterSlot {
            ticket: "unsigned long long",
            peer: "unsigned int",
            seq: "unsigned int",
        }),
    );
    c_struct(
        o,
        "ApiCall",
        "ibgda_kernels::api::ApiCall: one device API call (the tests' records)",
        size_of::<ApiCall>(),
        align_of::<ApiCall>(),
        &fields!(ApiCall {
            op: "unsigned int",
            peer: "unsigned int",
            dst_window: "unsigned int",
            src_window: "unsigned int",
            signal_window: "unsigned int",
            len: "unsigned int",
            dst_offset: "unsigned long long",
            src_offset: "unsigned long long",
            signal_offset: "unsigned long long",
            value: "unsigned long long",
            compare: "unsigned long long",
            counter: "unsigned int",
            reserved: "unsigned int",
        }),
    );
}

fn upper_snake(camel: &str) -> String {
    let mut s = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            s.push('_');
        }
        s.push(c.to_ascii_uppercase());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structs_cover_every_byte_of_the_rust_types() {
        // Padding is emitted explicitly, so a field added on the Rust side without being
        // listed here shows up as a size mismatch in the C static_assert; check the Rust
        // side too: the listed fields plus explicit padding add up to the size.
        let h = layout_header();
        assert!(h.contains("static_assert(sizeof(DeviceQueueDescriptor) == 88"));
        assert!(h.contains("static_assert(sizeof(DeviceProducerState) == 64"));
        assert!(h.contains("struct alignas(64) DeviceProducerState"));
        assert!(h.contains("constexpr unsigned SCOPE_GPU_FENCE = 1u;"));
        assert!(!h.contains("WqeRequest {\n    unsigned char _pad"));
    }

    #[test]
    fn upper_snake_names() {
        assert_eq!(upper_snake("GpuFencedDbrec"), "GPU_FENCED_DBREC");
        assert_eq!(upper_snake("Unordered"), "UNORDERED");
    }
}
