//! The PRM command oracle: rdma-core 56.1's `mlx5_ifc.h` layouts and `DEVX_SET` macros,
//! its `dr_devx_*` command builders with the DEVX calls captured (`shim/prm.c`), and its
//! `tests/mlx5_prm_structs.py` scapy definitions (`shim/scapy_prm.py`).

use std::ffi::{c_char, c_int, CStr, CString};
#[cfg(ibgda_scapy)]
use std::io::{BufRead, BufReader, Write};
#[cfg(ibgda_scapy)]
use std::process::{Command, Stdio};

#[repr(C)]
struct RawField {
    structure: *const c_char,
    field: *const c_char,
    bit_offset: u32,
    bit_width: u32,
}

#[repr(C)]
struct RawDrCreateQp {
    page_id: u32,
    pdn: u32,
    cqn: u32,
    pm_state: u32,
    service_type: u32,
    buff_umem_id: u32,
    db_umem_id: u32,
    sq_wqe_cnt: u32,
    rq_wqe_cnt: u32,
    rq_wqe_shift: u32,
    isolate_vl_tc: u32,
    qp_ts_format: u32,
}

#[repr(C)]
struct RawDrRtr {
    gid: [u8; 16],
    mac: [u8; 6],
    roce_v2: u8,
    fl: u8,
    mtu: u32,
    qp_num: u32,
    port_num: u16,
    min_rnr_timer: u8,
    sgid_index: u8,
}

#[repr(C)]
struct RawConstant {
    name: *const c_char,
    value: u64,
}

extern "C" {
    fn ibgda_prm_constants(count: *mut u32) -> *const RawConstant;
    fn ibgda_prm_fields(count: *mut u32) -> *const RawField;
    fn ibgda_prm_structs(count: *mut u32) -> *const RawField;
    fn ibgda_prm_set(
        structure: *const c_char,
        field: *const c_char,
        buf: *mut u8,
        len: usize,
        value: u64,
    ) -> c_int;
    fn ibgda_prm_set_bytes(
        structure: *const c_char,
        field: *const c_char,
        buf: *mut u8,
        len: usize,
        value: *const u8,
        value_len: usize,
    ) -> c_int;
    fn ibgda_prm_get(
        structure: *const c_char,
        field: *const c_char,
        buf: *const u8,
        len: usize,
        value: *mut u64,
    ) -> c_int;
    fn ibgda_prm_dr_create_qp(
        args: *const RawDrCreateQp,
        out: *mut u8,
        out_len: usize,
        written: *mut usize,
    ) -> c_int;
    fn ibgda_prm_dr_rst2init(
        qpn: u32,
        port: u16,
        out: *mut u8,
        out_len: usize,
        written: *mut usize,
    ) -> c_int;
    fn ibgda_prm_dr_init2rtr(
        qpn: u32,
        args: *const RawDrRtr,
        out: *mut u8,
        out_len: usize,
        written: *mut usize,
    ) -> c_int;
    fn ibgda_prm_dr_rtr2rts(
        qpn: u32,
        timeout: u8,
        retry_cnt: u8,
        rnr_retry: u8,
        out: *mut u8,
        out_len: usize,
        written: *mut usize,
    ) -> c_int;
    fn ibgda_prm_dr_chunk_size_max() -> u32;
}

/// A field (or, with an empty `field`, a whole structure) as rdma-core's `mlx5_ifc.h`
/// lays it out: `__devx_bit_off` and `__devx_bit_sz` (`__devx_st_sz_bits` for structures).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfcField {
    /// The `mlx5_ifc_<structure>_bits` name.
    pub structure: String,
    /// The member path (`qpc.primary_address_path.rlid`); empty for a structure.
    pub field: String,
    /// Bit offset from the structure's most significant bit.
    pub bit_offset: u32,
    /// Width in bits.
    pub bit_width: u32,
}

fn collect(raw: *const RawField, count: u32) -> Vec<IfcField> {
    (0..count as usize)
        .map(|i| {
            // SAFETY: the shim returns a static array of `count` entries whose strings are
            // static NUL-terminated literals.
            let entry = unsafe { &*raw.add(i) };
            // SAFETY: as above, both pointers are static C strings.
            let (structure, field) =
                unsafe { (CStr::from_ptr(entry.structure), CStr::from_ptr(entry.field)) };
            IfcField {
                structure: structure.to_string_lossy().into_owned(),
                field: field.to_string_lossy().into_owned(),
                bit_offset: entry.bit_offset,
                bit_width: entry.bit_width,
            }
        })
        .collect()
}

/// The `mlx5_ifc.h` constants (opcodes, op_mods, statuses, QPC values) the shim exports,
/// by name.
pub fn ifc_constants() -> Vec<(String, u64)> {
    let mut count = 0;
    // SAFETY: the shim writes the entry count and returns its static table.
    let raw = unsafe { ibgda_prm_constants(&mut count) };
    (0..count as usize)
        .map(|i| {
            // SAFETY: `count` entries, each name a static C string.
            let entry = unsafe { &*raw.add(i) };
            // SAFETY: as above.
            let name = unsafe { CStr::from_ptr(entry.name) };
            (name.to_string_lossy().into_owned(), entry.value)
        })
        .collect()
}

/// Every field the shim's tables name, with rdma-core's offset and width.
pub fn ifc_fields() -> Vec<IfcField> {
    let mut count = 0;
    // SAFETY: the shim writes the entry count and returns its static table.
    let raw = unsafe { ibgda_prm_fields(&mut count) };
    collect(raw, count)
}

/// Every structure the shim's tables name, with rdma-core's size in bits.
pub fn ifc_structs() -> Vec<IfcField> {
    let mut count = 0;
    // SAFETY: as for `ifc_fields`.
    let raw = unsafe { ibgda_prm_structs(&mut count) };
    collect(raw, count)
}

/// Why a shim call failed: the errno-style code it returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShimError(pub i32);

fn c(text: &str) -> CString {
    CString::new(text).expect("names have no NUL")
}

fn status(rc: c_int) -> Result<(), ShimError> {
    if rc == 0 {
        Ok(())
    } else {
        Err(ShimError(rc))
    }
}

/// `DEVX_SET` (or `DEVX_SET64` for 64-bit fields) of `structure`'s `field` in `buf`.
pub fn devx_set(structure: &str, field: &str, buf: &mut [u8], value: u64) -> Result<(), ShimError> {
    let (s, f) = (c(structure), c(field));
    // SAFETY: the shim checks `len` against the structure's size before writing.
    status(unsafe { ibgda_prm_set(s.as_ptr(), f.as_ptr(), buf.as_mut_ptr(), buf.len(), value) })
}

/// Copies `value` to `DEVX_ADDR_OF(structure, buf, field)` (a byte-string field).
pub fn devx_set_bytes(
    structure: &str,
    field: &str,
    buf: &mut [u8],
    value: &[u8],
) -> Result<(), ShimError> {
    let (s, f) = (c(structure), c(field));
    // SAFETY: the shim checks both lengths against the layout before copying.
    status(unsafe {
        ibgda_prm_set_bytes(
            s.as_ptr(),
            f.as_ptr(),
            buf.as_mut_ptr(),
            buf.len(),
            value.as_ptr(),
            value.len(),
        )
    })
}

/// `DEVX_GET` (or `DEVX_GET64`) of `structure`'s `field` in `buf`.
pub fn devx_get(structure: &str, field: &str, buf: &[u8]) -> Result<u64, ShimError> {
    let (s, f) = (c(structure), c(field));
    let mut value = 0;
    // SAFETY: the shim checks `len` against the structure's size before reading.
    status(unsafe { ibgda_prm_get(s.as_ptr(), f.as_ptr(), buf.as_ptr(), buf.len(), &mut value) })?;
    Ok(value)
}

/// The parameters of rdma-core's `dr_devx_create_qp` (`struct dr_devx_qp_create_attr`).
#[derive(Debug, Clone, Copy, Default)]
pub struct DrCreateQp {
    /// `page_id` (the UAR page).
    pub page_id: u32,
    /// `pdn`.
    pub pdn: u32,
    /// `cqn` (both send and receive).
    pub cqn: u32,
    /// `pm_state`.
    pub pm_state: u32,
    /// `service_type`.
    pub service_type: u32,
    /// `buff_umem_id`.
    pub buff_umem_id: u32,
    /// `db_umem_id`.
    pub db_umem_id: u32,
    /// `sq_wqe_cnt` (a power of two).
    pub sq_wqe_cnt: u32,
    /// `rq_wqe_cnt` (a power of two).
    pub rq_wqe_cnt: u32,
    /// `rq_wqe_shift` (at least 4).
    pub rq_wqe_shift: u32,
    /// `isolate_vl_tc`.
    pub isolate_vl_tc: bool,
    /// `qp_ts_format`.
    pub qp_ts_format: u8,
}

/// The parameters of rdma-core's `dr_devx_modify_qp_init2rtr` (`struct dr_devx_qp_rtr_attr`).
#[derive(Debug, Clone, Copy, Default)]
pub struct DrRtr {
    /// `dgid_attr.gid`.
    pub gid: [u8; 16],
    /// `dgid_attr.mac`.
    pub mac: [u8; 6],
    /// `dgid_attr.roce_ver == MLX5_ROCE_VERSION_2` (sets the UDP source port).
    pub roce_v2: bool,
    /// `fl` (force loopback: no address fields).
    pub fl: bool,
    /// `mtu` (`enum ibv_mtu`).
    pub mtu: u32,
    /// `qp_num` (the remote QPN).
    pub qp_num: u32,
    /// `port_num`.
    pub port_num: u16,
    /// `min_rnr_timer` (which rdma-core 56.1 ignores: it always sets 1).
    pub min_rnr_timer: u8,
    /// `sgid_index`.
    pub sgid_index: u8,
}

fn captured(call: impl FnOnce(*mut u8, usize, *mut usize) -> c_int) -> Result<Vec<u8>, ShimError> {
    let mut out = vec![0u8; 4096];
    let mut written = 0usize;
    status(call(out.as_mut_ptr(), out.len(), &mut written))?;
    out.truncate(written);
    Ok(out)
}

/// The CREATE_QP input rdma-core's `dr_devx_create_qp` sends for `args`.
pub fn dr_create_qp(args: &DrCreateQp) -> Result<Vec<u8>, ShimError> {
    let raw = RawDrCreateQp {
        page_id: args.page_id,
        pdn: args.pdn,
        cqn: args.cqn,
        pm_state: args.pm_state,
        service_type: args.service_type,
        buff_umem_id: args.buff_umem_id,
        db_umem_id: args.db_umem_id,
        sq_wqe_cnt: args.sq_wqe_cnt,
        rq_wqe_cnt: args.rq_wqe_cnt,
        rq_wqe_shift: args.rq_wqe_shift,
        isolate_vl_tc: u32::from(args.isolate_vl_tc),
        qp_ts_format: u32::from(args.qp_ts_format),
    };
    // SAFETY: `raw` outlives the call; the shim writes at most `len` bytes to `out`.
    captured(|out, len, written| unsafe { ibgda_prm_dr_create_qp(&raw, out, len, written) })
}

/// The RST2INIT_QP input rdma-core's `dr_devx_modify_qp_rst2init` sends.
pub fn dr_rst2init(qpn: u32, port: u16) -> Result<Vec<u8>, ShimError> {
    // SAFETY: the shim writes at most `len` bytes to `out`.
    captured(|out, len, written| unsafe { ibgda_prm_dr_rst2init(qpn, port, out, len, written) })
}

/// The INIT2RTR_QP input rdma-core's `dr_devx_modify_qp_init2rtr` sends.
pub fn dr_init2rtr(qpn: u32, args: &DrRtr) -> Result<Vec<u8>, ShimError> {
    let raw = RawDrRtr {
        gid: args.gid,
        mac: args.mac,
        roce_v2: u8::from(args.roce_v2),
        fl: u8::from(args.fl),
        mtu: args.mtu,
        qp_num: args.qp_num,
        port_num: args.port_num,
        min_rnr_timer: args.min_rnr_timer,
        sgid_index: args.sgid_index,
    };
    // SAFETY: `raw` outlives the call; the shim writes at most `len` bytes to `out`.
    captured(|out, len, written| unsafe { ibgda_prm_dr_init2rtr(qpn, &raw, out, len, written) })
}

/// The RTR2RTS_QP input rdma-core's `dr_devx_modify_qp_rtr2rts` sends.
pub fn dr_rtr2rts(
    qpn: u32,
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
) -> Result<Vec<u8>, ShimError> {
    // SAFETY: the shim writes at most `len` bytes to `out`.
    captured(|out, len, written| unsafe {
        ibgda_prm_dr_rtr2rts(qpn, timeout, retry_cnt, rnr_retry, out, len, written)
    })
}

/// rdma-core's `DR_CHUNK_SIZE_MAX` (INIT2RTR sets `log_msg_max` to it minus one).
pub fn dr_chunk_size_max() -> u32 {
    // SAFETY: returns a constant.
    unsafe { ibgda_prm_dr_chunk_size_max() }
}

/// A value for one field of a scapy PRM packet.
#[derive(Debug, Clone)]
pub enum ScapyValue {
    /// An integer field.
    Int(u64),
    /// A list of integers (`FieldListField`).
    List(Vec<u64>),
    /// A MAC address (`MACField`).
    Mac([u8; 6]),
    /// A nested packet (`PacketField`).
    Packet(ScapyPacket),
}

/// One instance of a class of rdma-core's `tests/mlx5_prm_structs.py`.
#[derive(Debug, Clone)]
pub struct ScapyPacket {
    /// The class (`"CreateCqIn"`).
    pub class: &'static str,
    /// Field name and value; fields not given keep the class default (0).
    pub fields: Vec<(&'static str, ScapyValue)>,
}

// Only the scapy oracle serializes packets; without it the method has no caller.
#[cfg(ibgda_scapy)]
impl ScapyPacket {
    fn json(&self, out: &mut String) {
        out.push_str("{\"class\":\"");
        out.push_str(self.class);
        out.push_str("\",\"fields\":{");
        for (i, (name, value)) in self.fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push('"');
            out.push_str(name);
            out.push_str("\":");
            match value {
                ScapyValue::Int(v) => out.push_str(&v.to_string()),
                ScapyValue::List(vs) => {
                    out.push('[');
                    let items: Vec<String> = vs.iter().map(u64::to_string).collect();
                    out.push_str(&items.join(","));
                    out.push(']');
                }
                ScapyValue::Mac(m) => out.push_str(&format!(
                    "\"{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}\"",
                    m[0], m[1], m[2], m[3], m[4], m[5]
                )),
                ScapyValue::Packet(p) => p.json(out),
            }
        }
        out.push_str("}}");
    }
}

/// Where the scapy oracle's pieces are, fixed by `build.rs`.
#[cfg(ibgda_scapy)]
pub const SCAPY_SITE: &str = env!("IBGDA_SCAPY_SITE");
/// rdma-core's `tests/mlx5_prm_structs.py`.
#[cfg(ibgda_scapy)]
pub const PRM_STRUCTS_PY: &str = env!("IBGDA_PRM_STRUCTS_PY");

/// Serializes every packet with rdma-core's scapy classes (one python process for all).
#[cfg(ibgda_scapy)]
pub fn scapy_serialize(packets: &[ScapyPacket]) -> Result<Vec<Vec<u8>>, String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/shim/scapy_prm.py");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let mut child = Command::new(&python)
        .arg(script)
        .arg(PRM_STRUCTS_PY)
        .env("PYTHONPATH", SCAPY_SITE)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    let mut input = String::new();
    for packet in packets {
        packet.json(&mut input);
        input.push('\n');
    }
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut lines = Vec::with_capacity(packets.len());
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| e.to_string())?;
        let bytes = (0..line.len() / 2)
            .map(|i| u8::from_str_radix(&line[2 * i..2 * i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|e| format!("bad hex from python: {e}"))?;
        lines.push(bytes);
    }
    writer
        .join()
        .map_err(|_| "writer panicked")?
        .map_err(|e| e.to_string())?;
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    if !output.status.success() || lines.len() != packets.len() {
        return Err(format!(
            "scapy oracle failed ({}; {} of {} packets): {}",
            output.status,
            lines.len(),
            packets.len(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(lines)
}
