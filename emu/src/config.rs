//! What the emulated devices are: how many, their names, ports, link layer, LID, GIDs,
//! capabilities and identity, and the bring-up faults they reproduce.
//!
//! The configuration is read once per process, from the file `IBGDA_EMU_CONFIG` names or
//! from the text of `IBGDA_EMU_CONFIG_TEXT` (where `;` also ends a line). Without either
//! there is one ConnectX-7, `mlx5_0` ([`DeviceConfig::connectx7`]). A configuration lists
//! its devices in `[device NAME]` sections; one without any section has no device.
//!
//! ```text
//! # two devices: an InfiniBand ConnectX-7 and a RoCE one with an empty GID table
//! [device mlx5_0]
//! lid = 7
//! [device mlx5_1]
//! link_layer = ethernet
//! gids = none
//! cap.cqe_version = 0             # what QUERY_HCA_CAP reports
//! fault.alloc_uar = EPERM         # mlx5dv_devx_alloc_uar fails (an unprivileged container)
//! fault.command = CREATE_QP status=0x03 syndrome=0x1234 nth=1
//! ```
//!
//! Every key, its meaning and its default are in [`KEYS`]; `emu/README.md` says where each
//! default comes from. A key or value this module does not know is a [`ConfigError`]
//! naming the line, never ignored.

use core::fmt;

use ibgda::nic::{AtomicEndianness, DeviceCaps, LinkLayer, Mtu, SOFT_NIC_CAPS};

/// The environment variable naming a configuration file.
pub const CONFIG_ENV: &str = "IBGDA_EMU_CONFIG";
/// The environment variable holding a configuration's text.
pub const CONFIG_TEXT_ENV: &str = "IBGDA_EMU_CONFIG_TEXT";

/// Why a configuration could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The line (1-based; 0 for the file as a whole).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "emulator configuration: {}", self.message)
        } else {
            write!(
                f,
                "emulator configuration, line {}: {}",
                self.line, self.message
            )
        }
    }
}

impl std::error::Error for ConfigError {}

/// The port state a device reports (`ibv_port_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortState {
    /// `IBV_PORT_DOWN` (1).
    Down,
    /// `IBV_PORT_INIT` (2).
    Init,
    /// `IBV_PORT_ARMED` (3).
    Armed,
    /// `IBV_PORT_ACTIVE` (4).
    Active,
}

impl PortState {
    /// The verbs value.
    pub fn code(self) -> u32 {
        match self {
            Self::Down => 1,
            Self::Init => 2,
            Self::Armed => 3,
            Self::Active => 4,
        }
    }
}

/// A failure of a firmware command on demand: the `nth` command with this opcode (every
/// one when `None`) fails with `status` and `syndrome`, as firmware reports a failed
/// check (the DEVX call returns `EREMOTEIO`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommandFault {
    /// The command's opcode.
    pub opcode: u16,
    /// The status byte.
    pub status: u8,
    /// The syndrome.
    pub syndrome: u32,
    /// Which command of that opcode fails (1 for the first), or every one.
    pub nth: Option<u32>,
}

/// The bring-up failures a device reproduces.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// `mlx5dv_open_device` with DEVX fails with this errno (a kernel without DEVX, no
    /// permission for a DEVX user context).
    pub open_devx: Option<i32>,
    /// `mlx5dv_devx_alloc_uar` fails with this errno for every UAR type (an unprivileged
    /// container: the sglang report).
    pub alloc_uar: Option<i32>,
    /// `mlx5dv_devx_umem_reg` (and `_reg_ex` without DMA-BUF) fails with this errno.
    pub umem_reg: Option<i32>,
    /// `mlx5dv_devx_umem_reg_ex` with a DMA-BUF fails with this errno (NVSHMEM issue 67:
    /// EFAULT for the control buffer while data buffers register).
    pub umem_reg_dmabuf: Option<i32>,
    /// `ibv_reg_dmabuf_mr` fails with this errno.
    pub reg_dmabuf_mr: Option<i32>,
    /// Firmware failures of chosen commands.
    pub commands: Vec<CommandFault>,
    /// Every queue pair's first WQE fails with a local QP operation error (syndrome 0x02)
    /// of this vendor syndrome (0x68: the bad-WQE-index failure DEVX-created RC QPs show
    /// on silicon when their context is wrong).
    pub first_wqe_vendor_syndrome: Option<u8>,
    /// Every queue pair's WQE of this number (0 for the first) fails with transport retry
    /// exceeded (syndrome 0x15): a peer that stopped answering after that much traffic.
    pub transport_retry_exceeded_at: Option<u64>,
    /// The CUDA error the GPU mapping of a UAR page fails with (800: not permitted, as the
    /// driver refuses a BAR mapping to non-root users): `ibgda_emu_uar_page` reports it to
    /// the mlx5 backend, which then refuses the mapping with that error.
    pub uar_gpu_mapping: Option<i32>,
}

/// The identity `ibv_query_device` and sysfs report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// `fw_ver`.
    pub fw_ver: String,
    /// `node_guid` (host order; reported big-endian).
    pub node_guid: u64,
    /// `sys_image_guid`.
    pub sys_image_guid: u64,
    /// `vendor_id`.
    pub vendor_id: u32,
    /// `vendor_part_id`.
    pub vendor_part_id: u32,
    /// `hw_ver`.
    pub hw_ver: u32,
    /// The sysfs `board_id`.
    pub board_id: String,
}

/// The verbs limits `ibv_query_device` and `ibv_query_port` report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `max_mr_size`.
    pub max_mr_size: u64,
    /// `page_size_cap`.
    pub page_size_cap: u64,
    /// `max_qp`.
    pub max_qp: i32,
    /// `max_sge` (and `max_sge_rd`).
    pub max_sge: i32,
    /// `max_cq`.
    pub max_cq: i32,
    /// `max_mr`.
    pub max_mr: i32,
    /// `max_pd`.
    pub max_pd: i32,
    /// `max_qp_rd_atom` and `max_qp_init_rd_atom`.
    pub max_qp_rd_atom: i32,
    /// `max_res_rd_atom`.
    pub max_res_rd_atom: i32,
    /// `max_srq`.
    pub max_srq: i32,
    /// `max_srq_wr`.
    pub max_srq_wr: i32,
    /// `max_srq_sge`.
    pub max_srq_sge: i32,
    /// `max_ah`.
    pub max_ah: i32,
    /// `max_pkeys` (and the port's `pkey_tbl_len`).
    pub max_pkeys: u16,
    /// `local_ca_ack_delay`.
    pub local_ca_ack_delay: u8,
    /// `device_cap_flags`.
    pub device_cap_flags: u32,
    /// The port's `max_msg_sz`.
    pub max_msg_sz: u32,
    /// The port's `port_cap_flags`.
    pub port_cap_flags: u32,
}

/// One emulated device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceConfig {
    /// Its name (`mlx5_0`).
    pub name: String,
    /// Whether the mlx5 provider drives it (`mlx5dv_is_supported`); a device that is not
    /// mlx5 has plain verbs only (mlx5dv_open_device and DEVX fail, as for `erdma_0`).
    pub mlx5: bool,
    /// Port 1's link layer.
    pub link_layer: LinkLayer,
    /// Port 1's LID (InfiniBand; RoCE ports report 0).
    pub lid: u16,
    /// Port 1's GID table.
    pub gids: Vec<[u8; 16]>,
    /// Port 1's MTU (maximum and active).
    pub mtu: Mtu,
    /// Port 1's state.
    pub port_state: PortState,
    /// Completion vectors (`num_comp_vectors`); each reports to event queue 0.
    pub num_comp_vectors: u32,
    /// What QUERY_HCA_CAP reports.
    pub caps: DeviceCaps,
    /// Identity fields.
    pub identity: Identity,
    /// Verbs limits.
    pub limits: Limits,
    /// The failures it reproduces.
    pub faults: Faults,
}

/// The vendor part id of a ConnectX-7 (`MT4129`).
pub const CONNECTX7_PART_ID: u32 = 4129;
/// Mellanox's IEEE OUI, the `vendor_id` of every ConnectX.
pub const MELLANOX_VENDOR_ID: u32 = 0x02c9;

impl DeviceConfig {
    /// A ConnectX-7 named `name`, the `index`-th device: InfiniBand, LID `index + 1`, MTU
    /// 4096, one link-local GID (the node GUID as interface id). Sources of each value:
    /// `emu/README.md`.
    pub fn connectx7(name: &str, index: u16) -> Self {
        let node_guid = 0x0c42_a103_00e0_0000 | u64::from(index);
        Self {
            name: name.to_owned(),
            mlx5: true,
            link_layer: LinkLayer::InfiniBand,
            lid: index.saturating_add(1),
            gids: vec![link_local_gid(node_guid)],
            mtu: Mtu::Mtu4096,
            port_state: PortState::Active,
            num_comp_vectors: 1,
            caps: SOFT_NIC_CAPS,
            identity: Identity {
                fw_ver: "28.39.1002".to_owned(),
                node_guid,
                sys_image_guid: node_guid,
                vendor_id: MELLANOX_VENDOR_ID,
                vendor_part_id: CONNECTX7_PART_ID,
                hw_ver: 0,
                board_id: "MT_0000000838".to_owned(),
            },
            limits: Limits {
                max_mr_size: u64::MAX,
                page_size_cap: !0xfff,
                max_qp: 1 << 17,
                max_sge: 30,
                max_cq: 1 << 24,
                max_mr: 1 << 24,
                max_pd: 1 << 24,
                max_qp_rd_atom: 16,
                max_res_rd_atom: 1 << 21,
                max_srq: 1 << 23,
                max_srq_wr: (1 << 15) - 1,
                max_srq_sge: 31,
                max_ah: i32::MAX,
                max_pkeys: 128,
                local_ca_ack_delay: 16,
                device_cap_flags: 0x2136_1c36,
                max_msg_sz: 1 << 30,
                port_cap_flags: 0x2659_e848,
            },
            faults: Faults::default(),
        }
    }

    /// `max_qp_wr`: the largest send queue, as mlx5 computes it from `log_max_qp_sz`.
    pub fn max_qp_wr(&self) -> i32 {
        1 << self.caps.log_max_qp_size.min(30)
    }

    /// `max_cqe`: the largest CQ less one, as mlx5 computes it from `log_max_cq_sz`.
    pub fn max_cqe(&self) -> i32 {
        (1i32 << self.caps.log_max_cq_size.min(30)) - 1
    }

    /// The MAC of an Ethernet (RoCE) port: the one its link-local GID is derived from (the
    /// first link-local GID of `gids`), else the node GUID's (the MAC whose link-local GID
    /// is `fe80::<node_guid>`, as `gids` defaults to). Address handles to a link-local GID
    /// resolve to the MAC it encodes, as rdma-core and the kernel resolve them.
    pub fn ethernet_mac(&self) -> [u8; 6] {
        let gid = self
            .gids
            .iter()
            .copied()
            .find(|g| g[..8] == [0xfe, 0x80, 0, 0, 0, 0, 0, 0])
            .unwrap_or_else(|| link_local_gid(self.identity.node_guid));
        ibgda::nic::roce::link_local_mac(&ibgda::nic::Gid(gid))
            .expect("a link-local GID encodes a MAC")
    }

    /// The LID port 1 reports (0 on Ethernet ports).
    pub fn reported_lid(&self) -> u16 {
        match self.link_layer {
            LinkLayer::InfiniBand => self.lid,
            LinkLayer::Ethernet => 0,
        }
    }
}

/// The IPv6 link-local GID with `guid` as interface id (GID 0 of an InfiniBand port).
pub fn link_local_gid(guid: u64) -> [u8; 16] {
    let mut gid = [0u8; 16];
    gid[0] = 0xfe;
    gid[1] = 0x80;
    gid[8..].copy_from_slice(&guid.to_be_bytes());
    gid
}

/// The emulated devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// In the order `ibv_get_device_list` lists them.
    pub devices: Vec<DeviceConfig>,
}

impl Default for Config {
    /// One ConnectX-7, `mlx5_0`.
    fn default() -> Self {
        Self {
            devices: vec![DeviceConfig::connectx7("mlx5_0", 0)],
        }
    }
}

/// Every configuration key: name, what it sets, its default.
pub const KEYS: &[(&str, &str, &str)] = &[
    ("provider", "mlx5, or any other name for a device mlx5 does not drive", "mlx5"),
    ("link_layer", "infiniband or ethernet (RoCE)", "infiniband"),
    ("lid", "port 1's LID (1..=0xbfff)", "device index + 1"),
    ("gids", "comma-separated GIDs (IPv6 notation or 32 hex digits), or none", "fe80::<node_guid>"),
    ("mtu", "256, 512, 1024, 2048 or 4096", "4096"),
    ("port_state", "down, init, armed or active", "active"),
    ("num_comp_vectors", "completion vectors", "1"),
    ("fw_ver", "firmware version string", "28.39.1002"),
    ("node_guid", "node GUID (hex)", "0x0c42a10300e00000 + index"),
    ("sys_image_guid", "system image GUID (hex)", "node_guid"),
    ("vendor_id", "PCI vendor id", "0x02c9"),
    ("vendor_part_id", "PCI device id", "4129"),
    ("hw_ver", "hardware revision", "0"),
    ("board_id", "sysfs board_id", "MT_0000000838"),
    ("max_qp, max_sge, max_cq, max_mr, max_pd, max_qp_rd_atom, max_res_rd_atom, max_srq, max_srq_wr, max_srq_sge, max_ah, max_pkeys, local_ca_ack_delay, device_cap_flags, max_msg_sz, port_cap_flags", "verbs limits", "see emu/README.md"),
    ("cap.cqe_version, cap.compact_address_vector, cap.log_max_qp_size, cap.log_max_cq_size, cap.max_send_wqe_bytes, cap.atomic, cap.standard_atomics, cap.masked_atomics, cap.atomic_sizes, cap.atomic_sizes_dc, cap.atomic_endianness (big|host), cap.dc, cap.log_bf_reg_size, cap.log_max_msg, cap.log_max_ra_req_qp, cap.log_max_ra_res_qp, cap.log_max_ra_req_dc, cap.log_max_ra_res_dc", "what QUERY_HCA_CAP reports", "ibgda's SOFT_NIC_CAPS"),
    ("fault.open_devx, fault.alloc_uar, fault.umem_reg, fault.umem_reg_dmabuf, fault.reg_dmabuf_mr", "errno (name or number) the call fails with", "none"),
    ("fault.command", "NAME|0xOPCODE status=S syndrome=X [nth=N] (repeatable)", "none"),
    ("fault.first_wqe", "vendor syndrome of a LOCAL_QP_OP error on every QP's first WQE", "none"),
    ("fault.transport_retry_exceeded_at", "WQE number (0-based) of every QP that fails with syndrome 0x15", "none"),
    ("fault.uar_gpu_mapping", "CUDA error of the UAR page's GPU mapping (800: not permitted)", "none"),
];

impl Config {
    /// The configuration of this process: `IBGDA_EMU_CONFIG` (a file) or
    /// `IBGDA_EMU_CONFIG_TEXT`, else [`Config::default`].
    pub fn from_env() -> Result<Self, ConfigError> {
        if let Some(path) = std::env::var_os(CONFIG_ENV).filter(|p| !p.is_empty()) {
            let text = std::fs::read_to_string(&path).map_err(|e| ConfigError {
                line: 0,
                message: format!("{CONFIG_ENV}={}: {e}", path.to_string_lossy()),
            })?;
            return Self::parse(&text);
        }
        match std::env::var(CONFIG_TEXT_ENV) {
            Ok(text) => Self::parse(&text.replace(';', "\n")),
            Err(_) => Ok(Self::default()),
        }
    }

    /// Parses a configuration's text.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let mut devices: Vec<DeviceConfig> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let err = |message: String| ConfigError { line, message };
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            if let Some(section) = content.strip_prefix('[') {
                let name = section
                    .strip_suffix(']')
                    .and_then(|s| s.trim().strip_prefix("device"))
                    .map(str::trim)
                    .filter(|n| valid_name(n))
                    .ok_or_else(|| {
                        err(format!(
                            "expected `[device NAME]` (a name of letters, digits, `_` or `-`, at most 63 bytes), found `{content}`"
                        ))
                    })?;
                if devices.iter().any(|d| d.name == name) {
                    return Err(err(format!("device `{name}` is configured twice")));
                }
                let index =
                    u16::try_from(devices.len()).map_err(|_| err("too many devices".to_owned()))?;
                devices.push(DeviceConfig::connectx7(name, index));
                continue;
            }
            let (key, value) = content
                .split_once('=')
                .map(|(k, v)| (k.trim(), v.trim()))
                .ok_or_else(|| err(format!("expected `key = value`, found `{content}`")))?;
            let device = devices
                .last_mut()
                .ok_or_else(|| err(format!("`{key}` before any `[device NAME]` section")))?;
            set(device, key, value).map_err(err)?;
        }
        Ok(Self { devices })
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// An unsigned number, decimal or `0x` hex.
fn number(key: &str, value: &str) -> Result<u64, String> {
    let parsed = match value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16),
        None => value.replace('_', "").parse(),
    };
    parsed.map_err(|_| format!("`{key}`: `{value}` is not a number"))
}

fn bounded<T: TryFrom<u64>>(key: &str, value: &str) -> Result<T, String> {
    let n = number(key, value)?;
    T::try_from(n).map_err(|_| format!("`{key}`: {n} is out of range"))
}

fn flag(key: &str, value: &str) -> Result<bool, String> {
    match value {
        "1" | "true" | "yes" => Ok(true),
        "0" | "false" | "no" => Ok(false),
        _ => Err(format!("`{key}`: `{value}` is not 0/1 (or true/false)")),
    }
}

/// Errno names the configuration accepts.
const ERRNOS: &[(&str, i32)] = &[
    ("EPERM", libc::EPERM),
    ("ENOENT", libc::ENOENT),
    ("EIO", libc::EIO),
    ("EAGAIN", libc::EAGAIN),
    ("ENOMEM", libc::ENOMEM),
    ("EACCES", libc::EACCES),
    ("EFAULT", libc::EFAULT),
    ("EBUSY", libc::EBUSY),
    ("ENODEV", libc::ENODEV),
    ("EINVAL", libc::EINVAL),
    ("ENOSPC", libc::ENOSPC),
    ("ENOSYS", libc::ENOSYS),
    ("EOPNOTSUPP", libc::EOPNOTSUPP),
    ("EPROTONOSUPPORT", libc::EPROTONOSUPPORT),
    ("EREMOTEIO", libc::EREMOTEIO),
];

/// An errno by name or number.
pub fn errno_value(key: &str, value: &str) -> Result<i32, String> {
    if let Some((_, e)) = ERRNOS.iter().find(|(n, _)| *n == value) {
        return Ok(*e);
    }
    let n: i32 = bounded(key, value)
        .map_err(|_| format!("`{key}`: `{value}` is neither an errno name nor a number"))?;
    if n <= 0 {
        return Err(format!("`{key}`: errno {n} is not positive"));
    }
    Ok(n)
}

/// Opcode names the configuration accepts (the PRM names of `ibgda::nic::prm::opcode`).
const OPCODES: &[(&str, u16)] = {
    use ibgda::nic::prm::opcode::*;
    &[
        ("QUERY_HCA_CAP", QUERY_HCA_CAP),
        ("CREATE_CQ", CREATE_CQ),
        ("DESTROY_CQ", DESTROY_CQ),
        ("CREATE_QP", CREATE_QP),
        ("DESTROY_QP", DESTROY_QP),
        ("RST2INIT_QP", RST2INIT_QP),
        ("INIT2RTR_QP", INIT2RTR_QP),
        ("RTR2RTS_QP", RTR2RTS_QP),
        ("CREATE_DCT", CREATE_DCT),
        ("DESTROY_DCT", DESTROY_DCT),
        ("ALLOC_UAR", ALLOC_UAR),
        ("DEALLOC_UAR", DEALLOC_UAR),
    ]
};

fn command_fault(value: &str) -> Result<CommandFault, String> {
    let mut words = value.split_whitespace();
    let name = words.next().unwrap_or("");
    let opcode = match OPCODES.iter().find(|(n, _)| *n == name) {
        Some((_, op)) => *op,
        None => bounded("fault.command", name).map_err(|_| {
            format!("`fault.command`: `{name}` is neither a command name nor an opcode")
        })?,
    };
    let (mut status, mut syndrome, mut nth) = (None, None, None);
    for word in words {
        match word.split_once('=') {
            Some(("status", v)) => status = Some(bounded::<u8>("fault.command status", v)?),
            Some(("syndrome", v)) => syndrome = Some(bounded::<u32>("fault.command syndrome", v)?),
            Some(("nth", v)) => nth = Some(bounded::<u32>("fault.command nth", v)?),
            _ => return Err(format!("`fault.command`: unexpected `{word}`")),
        }
    }
    let status = status.ok_or("`fault.command`: `status=` is missing")?;
    if status == 0 {
        return Err("`fault.command`: status 0 is success, not a failure".to_owned());
    }
    if nth == Some(0) {
        return Err("`fault.command`: nth counts from 1".to_owned());
    }
    Ok(CommandFault {
        opcode,
        status,
        syndrome: syndrome.unwrap_or(0),
        nth,
    })
}

/// Parses a GID: IPv6 notation or 32 hex digits.
pub fn parse_gid(text: &str) -> Result<[u8; 16], String> {
    if text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        let mut gid = [0u8; 16];
        for (i, byte) in gid.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16)
                .map_err(|_| format!("`{text}` is not a GID"))?;
        }
        return Ok(gid);
    }
    text.parse::<std::net::Ipv6Addr>()
        .map(|a| a.octets())
        .map_err(|_| format!("`{text}` is not a GID (IPv6 notation or 32 hex digits)"))
}

fn set(d: &mut DeviceConfig, key: &str, value: &str) -> Result<(), String> {
    let l = &mut d.limits;
    match key {
        "provider" => d.mlx5 = value == "mlx5",
        "link_layer" => {
            d.link_layer = match value {
                "infiniband" | "ib" => LinkLayer::InfiniBand,
                "ethernet" | "roce" => LinkLayer::Ethernet,
                _ => {
                    return Err(format!(
                        "`link_layer`: `{value}` is not infiniband or ethernet"
                    ))
                }
            }
        }
        "lid" => {
            let lid: u16 = bounded(key, value)?;
            if lid == 0 || lid >= 0xc000 {
                return Err(format!("`lid`: {lid:#x} is not a unicast LID (1..=0xbfff)"));
            }
            d.lid = lid;
        }
        "gids" => {
            d.gids = if value == "none" {
                Vec::new()
            } else {
                value
                    .split(',')
                    .map(|g| parse_gid(g.trim()))
                    .collect::<Result<_, _>>()?
            }
        }
        "mtu" => {
            d.mtu = match value {
                "256" => Mtu::Mtu256,
                "512" => Mtu::Mtu512,
                "1024" => Mtu::Mtu1024,
                "2048" => Mtu::Mtu2048,
                "4096" => Mtu::Mtu4096,
                _ => {
                    return Err(format!(
                        "`mtu`: `{value}` is not 256, 512, 1024, 2048 or 4096"
                    ))
                }
            }
        }
        "port_state" => {
            d.port_state = match value {
                "down" => PortState::Down,
                "init" => PortState::Init,
                "armed" => PortState::Armed,
                "active" => PortState::Active,
                _ => {
                    return Err(format!(
                        "`port_state`: `{value}` is not down, init, armed or active"
                    ))
                }
            }
        }
        "num_comp_vectors" => {
            d.num_comp_vectors = bounded(key, value)?;
            if d.num_comp_vectors == 0 {
                return Err("`num_comp_vectors`: at least 1".to_owned());
            }
        }
        "fw_ver" => d.identity.fw_ver = printable(key, value, 63)?,
        "board_id" => d.identity.board_id = printable(key, value, 63)?,
        "node_guid" => d.identity.node_guid = number(key, value)?,
        "sys_image_guid" => d.identity.sys_image_guid = number(key, value)?,
        "vendor_id" => d.identity.vendor_id = bounded(key, value)?,
        "vendor_part_id" => d.identity.vendor_part_id = bounded(key, value)?,
        "hw_ver" => d.identity.hw_ver = bounded(key, value)?,
        "max_mr_size" => l.max_mr_size = number(key, value)?,
        "page_size_cap" => l.page_size_cap = number(key, value)?,
        "max_qp" => l.max_qp = bounded(key, value)?,
        "max_sge" => l.max_sge = bounded(key, value)?,
        "max_cq" => l.max_cq = bounded(key, value)?,
        "max_mr" => l.max_mr = bounded(key, value)?,
        "max_pd" => l.max_pd = bounded(key, value)?,
        "max_qp_rd_atom" => l.max_qp_rd_atom = bounded(key, value)?,
        "max_res_rd_atom" => l.max_res_rd_atom = bounded(key, value)?,
        "max_srq" => l.max_srq = bounded(key, value)?,
        "max_srq_wr" => l.max_srq_wr = bounded(key, value)?,
        "max_srq_sge" => l.max_srq_sge = bounded(key, value)?,
        "max_ah" => l.max_ah = bounded(key, value)?,
        "max_pkeys" => l.max_pkeys = bounded(key, value)?,
        "local_ca_ack_delay" => l.local_ca_ack_delay = bounded(key, value)?,
        "device_cap_flags" => l.device_cap_flags = bounded(key, value)?,
        "max_msg_sz" => l.max_msg_sz = bounded(key, value)?,
        "port_cap_flags" => l.port_cap_flags = bounded(key, value)?,
        "cap.cqe_version" => d.caps.cqe_version = bounded(key, value)?,
        "cap.compact_address_vector" => d.caps.compact_address_vector = flag(key, value)?,
        "cap.log_max_qp_size" => d.caps.log_max_qp_size = log2(key, value)?,
        "cap.log_max_cq_size" => d.caps.log_max_cq_size = log2(key, value)?,
        "cap.max_send_wqe_bytes" => d.caps.max_send_wqe_bytes = bounded(key, value)?,
        "cap.atomic" => d.caps.atomic = flag(key, value)?,
        "cap.standard_atomics" => d.caps.standard_atomics = flag(key, value)?,
        "cap.masked_atomics" => d.caps.masked_atomics = flag(key, value)?,
        "cap.atomic_sizes" => d.caps.atomic_sizes = bounded(key, value)?,
        "cap.atomic_sizes_dc" => d.caps.atomic_sizes_dc = bounded(key, value)?,
        "cap.atomic_endianness" => {
            d.caps.atomic_endianness = match value {
                "big" => AtomicEndianness::BigEndian,
                "host" => AtomicEndianness::HostEndian,
                _ => return Err(format!("`{key}`: `{value}` is not big or host")),
            }
        }
        "cap.dc" => d.caps.dc = flag(key, value)?,
        "cap.log_bf_reg_size" => d.caps.log_bf_reg_size = log2(key, value)?,
        "cap.log_max_msg" => d.caps.log_max_msg = log2(key, value)?,
        "cap.log_max_ra_req_qp" => d.caps.log_max_ra_req_qp = log2(key, value)?,
        "cap.log_max_ra_res_qp" => d.caps.log_max_ra_res_qp = log2(key, value)?,
        "cap.log_max_ra_req_dc" => d.caps.log_max_ra_req_dc = log2(key, value)?,
        "cap.log_max_ra_res_dc" => d.caps.log_max_ra_res_dc = log2(key, value)?,
        "fault.open_devx" => d.faults.open_devx = Some(errno_value(key, value)?),
        "fault.alloc_uar" => d.faults.alloc_uar = Some(errno_value(key, value)?),
        "fault.umem_reg" => d.faults.umem_reg = Some(errno_value(key, value)?),
        "fault.umem_reg_dmabuf" => d.faults.umem_reg_dmabuf = Some(errno_value(key, value)?),
        "fault.reg_dmabuf_mr" => d.faults.reg_dmabuf_mr = Some(errno_value(key, value)?),
        "fault.command" => d.faults.commands.push(command_fault(value)?),
        "fault.first_wqe" => d.faults.first_wqe_vendor_syndrome = Some(bounded(key, value)?),
        "fault.transport_retry_exceeded_at" => {
            d.faults.transport_retry_exceeded_at = Some(number(key, value)?)
        }
        "fault.uar_gpu_mapping" => d.faults.uar_gpu_mapping = Some(bounded(key, value)?),
        _ => {
            return Err(format!(
                "unknown key `{key}` (the keys are listed in emu/README.md)"
            ))
        }
    }
    Ok(())
}

fn log2(key: &str, value: &str) -> Result<u8, String> {
    let n: u8 = bounded(key, value)?;
    if n > 31 {
        return Err(format!("`{key}`: {n} is not a log2 of a 32-bit size"));
    }
    Ok(n)
}

fn printable(key: &str, value: &str, max: usize) -> Result<String, String> {
    if value.len() > max || !value.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        return Err(format!("`{key}`: at most {max} printable ASCII bytes"));
    }
    Ok(value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_configuration_is_one_connectx7() {
        let config = Config::default();
        assert_eq!(config.devices.len(), 1);
        let d = &config.devices[0];
        assert_eq!(d.name, "mlx5_0");
        assert_eq!(d.identity.vendor_part_id, 4129);
        assert_eq!(d.caps, SOFT_NIC_CAPS);
        assert_eq!(d.max_qp_wr(), 1 << SOFT_NIC_CAPS.log_max_qp_size);
    }

    /// An Ethernet port's MAC is the one its link-local GID encodes (so that an address
    /// handle to that GID, resolved as the kernel resolves it, reaches the device), else the
    /// node GUID's; the default GID table gives one each.
    #[test]
    fn an_ethernet_ports_mac_is_its_link_local_gids() {
        let config = Config::parse(
            "[device a]\nlink_layer = ethernet\n\
             [device b]\nlink_layer = ethernet\ngids = ::ffff:10.0.0.2, fe80::1\n\
             [device c]\nlink_layer = ethernet\ngids = ::ffff:10.0.0.3\n",
        )
        .unwrap();
        let macs: Vec<[u8; 6]> = config.devices.iter().map(|d| d.ethernet_mac()).collect();
        // Node GUID 0c42:a103:00e0:0000 (index 0): the U/L bit of 0c flipped.
        assert_eq!(macs[0], [0x0e, 0x42, 0xa1, 0xe0, 0x00, 0x00]);
        let ll = ibgda::nic::Gid(config.devices[0].gids[0]);
        assert_eq!(ibgda::nic::roce::link_local_mac(&ll), Some(macs[0]));
        assert_eq!(macs[1], [0x02, 0, 0, 0, 0, 0x01]);
        // No link-local GID: the node GUID's (index 2).
        assert_eq!(macs[2], [0x0e, 0x42, 0xa1, 0xe0, 0x00, 0x02]);
    }

    #[test]
    fn sections_keys_and_faults_parse() {
        let config = Config::parse(
            "# comment\n[device mlx5_3]\nlid = 0x12\nmtu = 1024\n[device erdma_0]\nprovider = erdma\n\
             link_layer = ethernet\ngids = ::ffff:10.0.0.1, fe800000000000000000000000000001\n\
             cap.cqe_version = 0\nfault.alloc_uar = EPERM\nfault.command = CREATE_QP status=0x3 syndrome=0x1234 nth=2\n\
             fault.first_wqe = 0x68\n",
        )
        .unwrap();
        assert_eq!(config.devices.len(), 2);
        assert_eq!(config.devices[0].lid, 0x12);
        assert_eq!(config.devices[0].mtu, Mtu::Mtu1024);
        let e = &config.devices[1];
        assert!(!e.mlx5);
        assert_eq!(e.link_layer, LinkLayer::Ethernet);
        assert_eq!(e.reported_lid(), 0);
        assert_eq!(e.gids[0][10..], [0xff, 0xff, 10, 0, 0, 1]);
        assert_eq!(e.gids[1][0], 0xfe);
        assert_eq!(e.gids[1][15], 1);
        assert_eq!(e.caps.cqe_version, 0);
        assert_eq!(e.faults.alloc_uar, Some(libc::EPERM));
        assert_eq!(
            e.faults.commands,
            vec![CommandFault {
                opcode: ibgda::nic::prm::opcode::CREATE_QP,
                status: 3,
                syndrome: 0x1234,
                nth: Some(2)
            }]
        );
        assert_eq!(e.faults.first_wqe_vendor_syndrome, Some(0x68));
    }

    #[test]
    fn an_empty_configuration_has_no_device() {
        assert_eq!(Config::parse("# nothing\n").unwrap().devices, Vec::new());
    }

    #[test]
    fn mistakes_name_their_line() {
        for (text, line, needle) in [
            ("lid = 1", 1, "before any"),
            ("[device a]\nlid = 0", 2, "unicast"),
            ("[device a]\nbogus = 1", 2, "unknown key `bogus`"),
            ("[device a]\n[device a]", 2, "twice"),
            ("[devic a]", 1, "[device NAME]"),
            ("[device a]\nfault.alloc_uar = EWHAT", 2, "errno"),
            (
                "[device a]\nfault.command = CREATE_QP syndrome=1",
                2,
                "status=",
            ),
            ("[device a]\ngids = fe80::1, nope", 2, "not a GID"),
        ] {
            let e = Config::parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text}: {e}");
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
    }
}
