//! What the kernel and the NVIDIA driver say about this host, read from `/proc` and `/sys`
//! (under a root directory, `/` unless `--root` says otherwise), and the pure parsers of
//! those files. Formats, as the kernel and the driver write them:
//!
//! - `/proc/driver/nvidia/params`: one `Name: value` line per driver parameter (`%u`), then
//!   the string parameters quoted: `RegistryDwords: "PeerMappingOverride=1;"`,
//!   `RegistryDwordsPerDevice: "pci=0000:19:00.0;Key=1"` (the NVIDIA kernel module's
//!   `nv_procfs_read_params`). Registry entries are `Key=Value` separated by `;`, values
//!   decimal or `0x` hexadecimal; in the per-device string a `pci=` entry starts the keys of
//!   that device.
//! - `/proc/driver/nvidia/version`: `NVRM version: NVIDIA UNIX Open Kernel Module for x86_64
//!   580.95.05  Release Build ...` (the open kernel modules) or `NVRM version: NVIDIA UNIX
//!   x86_64 Kernel Module  550.135  ...` (the proprietary ones).
//! - `/proc/driver/nvidia/gpus/<domain:bus:device.function>/`: one directory per GPU the
//!   driver drives.
//! - `/proc/modules`: `name size refcount deps state address` per loaded module;
//!   `/sys/module/<name>` exists for loaded and built-in modules alike.
//! - `/proc/cmdline`: the kernel command line (`intel_iommu=on iommu=pt ...`).
//! - `/sys/class/iommu/`: one entry per IOMMU unit (`dmar0` on Intel, `ivhd0` on AMD);
//!   `/sys/bus/pci/devices/<bdf>/iommu_group/type`: the DMA domain of the device's group
//!   (`identity` = passthrough, `DMA` or `DMA-FQ` = translated, `blocked`, `unmanaged`:
//!   owned by a user-space driver such as VFIO).
//! - `/proc/sys/kernel/osrelease`: the kernel release (`6.1.0-18-amd64`).

use std::path::{Path, PathBuf};

/// Where `/proc` and `/sys` are read from.
#[derive(Clone, Debug)]
pub struct Root(PathBuf);

impl Root {
    /// Files under `dir` (`/` for this host).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self(dir.into())
    }

    /// The path of `absolute` (`/proc/modules`) under the root.
    pub fn path(&self, absolute: &str) -> PathBuf {
        self.0.join(absolute.trim_start_matches('/'))
    }

    /// The text of a file, if it can be read.
    pub fn read(&self, absolute: &str) -> Option<String> {
        std::fs::read_to_string(self.path(absolute)).ok()
    }

    /// Whether the path exists.
    pub fn exists(&self, absolute: &str) -> bool {
        self.path(absolute).exists()
    }

    /// The names in a directory, sorted (empty if it cannot be read).
    pub fn list(&self, absolute: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path(absolute))
            .map(|dir| {
                dir.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// The path a symbolic link (or a path through links) resolves to, with the root
    /// taken off again, as text (`/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0`).
    pub fn resolve(&self, absolute: &str) -> Option<String> {
        let real = std::fs::canonicalize(self.path(absolute)).ok()?;
        let root = std::fs::canonicalize(&self.0).unwrap_or_else(|_| self.0.clone());
        let inside = real.strip_prefix(&root).unwrap_or(&real);
        Some(format!("/{}", inside.display()))
    }

    /// The last component of the path a link points to (a driver's name from
    /// `.../device/driver`).
    pub fn link_name(&self, absolute: &str) -> Option<String> {
        let target = std::fs::read_link(self.path(absolute)).ok()?;
        Path::new(&target)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
    }
}

/// The facts of this host that the checks read (all optional: a file that cannot be read is
/// `None`, and the check says so).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostFacts {
    /// `/proc/driver/nvidia/params`.
    pub nvidia_params: Option<String>,
    /// `/proc/driver/nvidia/version`.
    pub nvidia_version: Option<String>,
    /// The GPUs the NVIDIA driver drives (`/proc/driver/nvidia/gpus/*`), by PCI address.
    pub nvidia_gpus: Vec<String>,
    /// `/proc/modules`.
    pub modules: Option<String>,
    /// Modules of interest present under `/sys/module` (loaded or built in).
    pub sys_modules: Vec<String>,
    /// `/proc/cmdline`.
    pub cmdline: Option<String>,
    /// `/sys/class/iommu/*`.
    pub iommu_units: Vec<String>,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel_release: Option<String>,
    /// The effective user id of this process.
    pub euid: u32,
    /// `/dev/infiniband/*` (the verbs character devices a process needs).
    pub infiniband_devices: Vec<String>,
}

/// The modules whose presence the checks report.
pub const MODULES: [&str; 6] = [
    "nvidia",
    "nvidia_peermem",
    "nv_peer_mem",
    "ib_uverbs",
    "mlx5_ib",
    "mlx5_core",
];

impl HostFacts {
    /// Reads the facts under `root`.
    pub fn gather(root: &Root) -> Self {
        Self {
            nvidia_params: root.read("/proc/driver/nvidia/params"),
            nvidia_version: root.read("/proc/driver/nvidia/version"),
            nvidia_gpus: root.list("/proc/driver/nvidia/gpus"),
            modules: root.read("/proc/modules"),
            sys_modules: MODULES
                .iter()
                .filter(|m| root.exists(&format!("/sys/module/{m}")))
                .map(|m| (*m).to_owned())
                .collect(),
            cmdline: root.read("/proc/cmdline"),
            iommu_units: root.list("/sys/class/iommu"),
            kernel_release: root
                .read("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_owned()),
            // SAFETY: `geteuid` has no preconditions and cannot fail.
            euid: unsafe { libc::geteuid() },
            infiniband_devices: root.list("/dev/infiniband"),
        }
    }

    /// Whether module `name` is loaded (or built in): listed in `/proc/modules` or present
    /// under `/sys/module`.
    pub fn module_loaded(&self, name: &str) -> bool {
        self.sys_modules.iter().any(|m| m == name)
            || self
                .modules
                .as_deref()
                .is_some_and(|text| loaded_modules(text).any(|m| m == name))
    }
}

/// The module names of `/proc/modules`.
pub fn loaded_modules(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .filter_map(|line| line.split_whitespace().next())
}

/// The `Name: value` entries of `/proc/driver/nvidia/params`, string values unquoted.
pub fn driver_params(text: &str) -> Vec<(&str, &str)> {
    text.lines()
        .filter_map(|line| {
            let (key, value) = line.split_once(':')?;
            let value = value.trim();
            let value = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(value);
            Some((key.trim(), value))
        })
        .collect()
}

/// A driver registry setting found in the parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistrySetting {
    /// Its value.
    pub value: u64,
    /// Where it was set: `RegistryDwords`, or `RegistryDwordsPerDevice` for the device
    /// named.
    pub source: String,
}

fn parse_number(text: &str) -> Option<u64> {
    let text = text.trim();
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// Registry key `key` (compared without regard to case, as the driver's registry does) in
/// the driver parameters: the global `RegistryDwords` first, then each device's entry of
/// `RegistryDwordsPerDevice`.
pub fn registry_setting(params: &str, key: &str) -> Vec<RegistrySetting> {
    let mut found = Vec::new();
    for (name, value) in driver_params(params) {
        let per_device = match name {
            "RegistryDwords" => false,
            "RegistryDwordsPerDevice" => true,
            _ => continue,
        };
        let mut device: Option<&str> = None;
        for entry in value.split(';') {
            let Some((k, v)) = entry.split_once('=') else {
                continue;
            };
            let k = k.trim();
            if per_device && k.eq_ignore_ascii_case("pci") {
                device = Some(v.trim());
                continue;
            }
            if !k.eq_ignore_ascii_case(key) {
                continue;
            }
            if let Some(value) = parse_number(v) {
                let source = match (per_device, device) {
                    (false, _) => "RegistryDwords".to_owned(),
                    (true, Some(d)) => format!("RegistryDwordsPerDevice (pci={d})"),
                    (true, None) => "RegistryDwordsPerDevice".to_owned(),
                };
                found.push(RegistrySetting { value, source });
            }
        }
    }
    found
}

/// Which NVIDIA kernel module is loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverVersion {
    /// The open kernel modules (`Open Kernel Module` in the version line); they export
    /// DMA-BUF, the proprietary ones do not.
    pub open: bool,
    /// The version number (`580.95.05`).
    pub version: String,
}

/// The driver of `/proc/driver/nvidia/version`'s first line.
pub fn driver_version(text: &str) -> Option<DriverVersion> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    let open = line.contains("Open Kernel Module");
    let after = line.split_once("Kernel Module")?.1;
    let version = after
        .split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))?
        .to_owned();
    Some(DriverVersion { open, version })
}

/// `(major, minor)` of a kernel release (`6.1.0-18-amd64` -> `(6, 1)`).
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// How the kernel command line sets the IOMMU up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IommuCmdline {
    /// The IOMMU-related words, as given (`intel_iommu=on`, `iommu=pt`).
    pub words: Vec<String>,
    /// Whether DMA bypasses translation by default (`iommu=pt` or `iommu.passthrough=1`);
    /// `None` when the command line does not say.
    pub passthrough: Option<bool>,
    /// Whether the IOMMU is switched off (`intel_iommu=off`, `amd_iommu=off`,
    /// `iommu=off`).
    pub off: bool,
}

/// The IOMMU words of a kernel command line.
pub fn iommu_cmdline(cmdline: &str) -> IommuCmdline {
    let mut words = Vec::new();
    let mut passthrough = None;
    let mut off = false;
    for word in cmdline.split_whitespace() {
        let Some((key, value)) = word.split_once('=') else {
            continue;
        };
        match key {
            "intel_iommu" | "amd_iommu" => {
                if value.split(',').any(|v| v == "off") {
                    off = true;
                }
            }
            "iommu" => match value {
                "pt" => passthrough = Some(true),
                "nopt" => passthrough = Some(false),
                "off" => off = true,
                _ => {}
            },
            "iommu.passthrough" => passthrough = Some(value == "1" || value == "y"),
            "iommu.strict" => {}
            _ => continue,
        }
        words.push(word.to_owned());
    }
    IommuCmdline {
        words,
        passthrough,
        off,
    }
}

/// An IOMMU group's DMA domain type (`/sys/bus/pci/devices/<bdf>/iommu_group/type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DomainKind {
    /// `identity`: DMA bypasses translation (passthrough).
    Passthrough,
    /// `DMA`, `DMA-FQ`: DMA is translated.
    Translated,
    /// `unmanaged`: the device belongs to a user-space driver (VFIO).
    UserSpace,
    /// `blocked`, or a value this tool does not know.
    Other,
}

/// The kind of a group type file's text.
pub fn domain_kind(text: &str) -> DomainKind {
    match text.trim() {
        "identity" => DomainKind::Passthrough,
        "DMA" | "DMA-FQ" => DomainKind::Translated,
        "unmanaged" => DomainKind::UserSpace,
        _ => DomainKind::Other,
    }
}

/// Formats a PCI address as sysfs names it (`0000:19:00.0`) from CUDA's attributes.
pub fn pci_address(domain: u32, bus: u32, device: u32) -> String {
    format!("{domain:04x}:{bus:02x}:{device:02x}.0")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout `nv_procfs_read_params` prints: numeric parameters, then the strings.
    const PARAMS_WITH_OVERRIDE: &str = "ResmanDebugLevel: 4294967295\n\
        EnableStreamMemOPs: 0\n\
        NvLinkDisable: 0\n\
        RegistryDwords: \"RMForceGpuReset=0;PeerMappingOverride=1;\"\n\
        RegistryDwordsPerDevice: \"\"\n\
        RmMsg: \"\"\n\
        GpuBlacklist: \"\"\n";
    const PARAMS_PER_DEVICE: &str = "EnableStreamMemOPs: 1\n\
        RegistryDwords: \"\"\n\
        RegistryDwordsPerDevice: \"pci=0000:19:00.0;peermappingoverride=0x1;pci=0000:3b:00.0;Other=2\"\n";
    const PARAMS_WITHOUT: &str = "EnableStreamMemOPs: 1\nRegistryDwords: \"\"\nRmMsg: \"\"\n";

    #[test]
    fn params_are_read_as_the_driver_prints_them() {
        let params = driver_params(PARAMS_WITH_OVERRIDE);
        assert!(params.contains(&("ResmanDebugLevel", "4294967295")));
        assert!(params.contains(&("EnableStreamMemOPs", "0")));
        assert!(params.contains(&("RegistryDwords", "RMForceGpuReset=0;PeerMappingOverride=1;")));
        assert!(params.contains(&("RmMsg", "")));
    }

    #[test]
    fn the_peer_mapping_override_is_found_globally_or_per_device() {
        assert_eq!(
            registry_setting(PARAMS_WITH_OVERRIDE, "PeerMappingOverride"),
            [RegistrySetting {
                value: 1,
                source: "RegistryDwords".into()
            }]
        );
        assert_eq!(
            registry_setting(PARAMS_PER_DEVICE, "PeerMappingOverride"),
            [RegistrySetting {
                value: 1,
                source: "RegistryDwordsPerDevice (pci=0000:19:00.0)".into()
            }]
        );
        assert!(registry_setting(PARAMS_WITHOUT, "PeerMappingOverride").is_empty());
        assert!(registry_setting("", "PeerMappingOverride").is_empty());
        let zero = "RegistryDwords: \"PeerMappingOverride=0\"\n";
        assert_eq!(registry_setting(zero, "PeerMappingOverride")[0].value, 0);
    }

    #[test]
    fn the_driver_flavour_and_version_come_from_the_version_line() {
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  \
                    Release Build  (dvs-builder@U22-I3-B17-02-5)  Tue Sep 23 09:55:41 UTC 2025\n\
                    GCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04.2)\n";
        assert_eq!(
            driver_version(open),
            Some(DriverVersion {
                open: true,
                version: "580.95.05".into()
            })
        );
        let proprietary =
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.135  Fri Jan 10 20:00:00 UTC 2025\n";
        assert_eq!(
            driver_version(proprietary),
            Some(DriverVersion {
                open: false,
                version: "550.135".into()
            })
        );
        assert_eq!(driver_version("GCC version: 12\n"), None);
    }

    #[test]
    fn modules_are_found_in_proc_modules_or_sys_module() {
        let text = "nvidia_peermem 16384 0 - Live 0xffffffffc0a1e000 (OE)\n\
                    nvidia 54337536 1106 nvidia_uvm,nvidia_peermem, Live 0xffffffffc1000000 (POE)\n\
                    mlx5_ib 454656 0 - Live 0xffffffffc0b00000\n";
        assert_eq!(
            loaded_modules(text).collect::<Vec<_>>(),
            ["nvidia_peermem", "nvidia", "mlx5_ib"]
        );
        let facts = HostFacts {
            modules: Some(text.into()),
            sys_modules: vec!["ib_uverbs".into()],
            ..HostFacts::default()
        };
        assert!(facts.module_loaded("nvidia_peermem"));
        assert!(facts.module_loaded("ib_uverbs"));
        assert!(!facts.module_loaded("nv_peer_mem"));
        // A module whose name another one starts with is not that one.
        assert!(!facts.module_loaded("nvidia_peer"));
    }

    #[test]
    fn the_command_line_says_whether_dma_is_translated() {
        let c =
            iommu_cmdline("BOOT_IMAGE=/vmlinuz-6.1 root=UUID=x ro intel_iommu=on iommu=pt quiet");
        assert_eq!(c.words, ["intel_iommu=on", "iommu=pt"]);
        assert_eq!(c.passthrough, Some(true));
        assert!(!c.off);
        let c = iommu_cmdline("ro amd_iommu=on iommu.passthrough=0");
        assert_eq!(c.passthrough, Some(false));
        let c = iommu_cmdline("ro intel_iommu=off");
        assert!(c.off);
        assert_eq!(c.passthrough, None);
        let c = iommu_cmdline("console=ttyS0 reboot=k panic=1 pci=off");
        assert!(c.words.is_empty());
    }

    #[test]
    fn group_types_and_kernel_releases_parse() {
        assert_eq!(domain_kind("identity\n"), DomainKind::Passthrough);
        assert_eq!(domain_kind("DMA-FQ\n"), DomainKind::Translated);
        assert_eq!(domain_kind("DMA"), DomainKind::Translated);
        assert_eq!(domain_kind("unmanaged"), DomainKind::UserSpace);
        assert_eq!(domain_kind("blocked"), DomainKind::Other);
        assert_eq!(kernel_version("6.1.0-18-amd64\n"), Some((6, 1)));
        assert_eq!(kernel_version("5.15.0-91-generic"), Some((5, 15)));
        assert_eq!(kernel_version("4.18.0-553.el8_10.x86_64"), Some((4, 18)));
        assert_eq!(kernel_version("x"), None);
        assert_eq!(pci_address(0, 0x19, 0), "0000:19:00.0");
        assert_eq!(pci_address(1, 0xab, 0x1f), "0001:ab:1f.0");
    }

    #[test]
    fn a_root_reads_files_and_links_beneath_it() {
        let dir = std::env::temp_dir().join(format!("ibgda-doctor-root-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("proc/driver/nvidia/gpus/0000:19:00.0")).unwrap();
        std::fs::create_dir_all(dir.join("sys/module/nvidia_peermem")).unwrap();
        std::fs::create_dir_all(dir.join("sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0"))
            .unwrap();
        std::fs::create_dir_all(dir.join("sys/bus/pci/devices")).unwrap();
        std::fs::create_dir_all(dir.join("sys/bus/pci/drivers/mlx5_core")).unwrap();
        std::os::unix::fs::symlink(
            "../../../devices/pci0000:15/0000:15:01.0/0000:16:00.0",
            dir.join("sys/bus/pci/devices/0000:16:00.0"),
        )
        .unwrap();
        std::os::unix::fs::symlink(
            "../../../bus/pci/drivers/mlx5_core",
            dir.join("sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/driver"),
        )
        .unwrap();
        std::fs::write(dir.join("proc/modules"), "mlx5_ib 1 0 - Live 0x0\n").unwrap();
        let root = Root::new(&dir);
        let facts = HostFacts::gather(&root);
        assert_eq!(facts.nvidia_gpus, ["0000:19:00.0"]);
        assert!(facts.module_loaded("nvidia_peermem"));
        assert!(facts.module_loaded("mlx5_ib"));
        assert!(!facts.module_loaded("nvidia"));
        assert_eq!(facts.nvidia_params, None);
        assert_eq!(
            root.resolve("/sys/bus/pci/devices/0000:16:00.0").as_deref(),
            Some("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0")
        );
        assert_eq!(
            root.link_name("/sys/bus/pci/devices/0000:16:00.0/driver")
                .as_deref(),
            Some("mlx5_core")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
