//! The platform between the GPU and the NIC: the IOMMU, and the PCIe distance of each GPU
//! to each NIC with the pairing it recommends.

use crate::host::{domain_kind, iommu_cmdline, DomainKind, HostFacts, Root};
use crate::nic::SysfsNic;
use crate::pci::{numa_node, pairings, PciLocation, Placed};
use crate::report::{Row, Status};

/// What sysfs says of one GPU.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SysfsGpu {
    /// Its name in the report (`GPU 0`, or its address when CUDA did not number it).
    pub name: String,
    /// Its PCI address (`0000:19:00.0`).
    pub address: String,
    /// The resolved path of its PCI function.
    pub pci_path: Option<String>,
    /// The NUMA node of its host bridge.
    pub numa: Option<u32>,
    /// Its IOMMU group's DMA domain type.
    pub iommu_type: Option<String>,
}

/// Reads `/sys/bus/pci/devices/<address>` for each `(name, address)`.
pub fn sysfs_gpus(root: &Root, gpus: &[(String, String)]) -> Vec<SysfsGpu> {
    gpus.iter()
        .map(|(name, address)| {
            let dev = format!("/sys/bus/pci/devices/{address}");
            SysfsGpu {
                name: name.clone(),
                address: address.clone(),
                pci_path: root.resolve(&dev),
                numa: root
                    .read(&format!("{dev}/numa_node"))
                    .and_then(|t| numa_node(&t)),
                iommu_type: root
                    .read(&format!("{dev}/iommu_group/type"))
                    .map(|t| t.trim().to_owned()),
            }
        })
        .collect()
}

/// A GPU as the rows name it: its name and address (once, when they are the same).
fn who(g: &SysfsGpu) -> String {
    if g.name == g.address {
        g.name.clone()
    } else {
        format!("{} ({})", g.name, g.address)
    }
}

/// The IOMMU row: whether DMA between the GPU and the NIC is translated.
pub fn iommu_row(host: &HostFacts, gpus: &[SysfsGpu], nics: &[SysfsNic]) -> Row {
    let row = Row::new("iommu", "IOMMU", Status::Ok).how(
        "/sys/class/iommu (units), /sys/bus/pci/devices/<address>/iommu_group/type of the GPUs \
         and NICs, the iommu words of /proc/cmdline",
    );
    let cmdline = host.cmdline.as_deref().map(iommu_cmdline);
    let words = cmdline
        .as_ref()
        .filter(|c| !c.words.is_empty())
        .map(|c| format!("; command line: {}", c.words.join(" ")))
        .unwrap_or_default();
    let groups: Vec<(String, DomainKind, &str)> = gpus
        .iter()
        .filter_map(|g| g.iommu_type.as_deref().map(|t| (who(g), domain_kind(t), t)))
        .chain(nics.iter().filter_map(|n| {
            n.iommu_type
                .as_deref()
                .map(|t| (n.name.clone(), domain_kind(t), t))
        }))
        .collect();
    let translated: Vec<String> = groups
        .iter()
        .filter(|(_, kind, _)| *kind == DomainKind::Translated)
        .map(|(who, _, t)| format!("{who}: {t}"))
        .collect();
    const REMEDY: &str = "boot with the IOMMU in passthrough (`iommu=pt`, beside `intel_iommu=on` \
        or `amd_iommu=on`), as NVIDIA's documentation recommends for peer-to-peer traffic: \
        translated DMA between the NIC and the GPU goes through the root complex, or fails \
        where PCIe access control services redirect it";
    if !translated.is_empty() {
        return row
            .status(Status::Warn)
            .result(format!(
                "DMA is translated by the IOMMU for {}{words}",
                translated.join(", ")
            ))
            .remedy(REMEDY);
    }
    if !groups.is_empty() {
        let listed: Vec<String> = groups
            .iter()
            .map(|(who, _, t)| format!("{who}: {t}"))
            .collect();
        return row.result(format!("no translation: {}{words}", listed.join(", ")));
    }
    if host.iommu_units.is_empty() {
        return row.result(format!(
            "no IOMMU translates DMA (/sys/class/iommu is empty){words}"
        ));
    }
    let units = host.iommu_units.join(", ");
    match cmdline.as_ref().and_then(|c| c.passthrough) {
        Some(true) => row.result(format!("IOMMU units {units}, in passthrough{words}")),
        _ => row
            .status(Status::Warn)
            .result(format!(
                "IOMMU units {units}; no GPU or NIC group type to read, and the command line \
                 does not ask for passthrough{words}: DMA is translated unless the kernel \
                 defaults to passthrough"
            ))
            .remedy(REMEDY),
    }
}

/// The PCIe distance row: for each GPU its nearest NIC, and whether `checked` (the NIC the
/// other rows used) is the one for GPU `tested`.
pub fn pcie_row(
    gpus: &[SysfsGpu],
    nics: &[SysfsNic],
    checked: Option<&str>,
    tested: Option<&str>,
) -> Row {
    let row = Row::new("pcie_distance", "GPU-NIC PCIe distance", Status::Ok).how(
        "the resolved paths of /sys/class/infiniband/*/device and of /sys/bus/pci/devices/<GPU \
         address> (addresses from CUDA, else /proc/driver/nvidia/gpus), their NUMA nodes; \
         classes as `nvidia-smi topo -m` names them",
    );
    if gpus.is_empty() {
        return row
            .status(Status::Skip)
            .result("cannot run: no GPU; needed only to place GPU producers near their NIC");
    }
    let placed = |name: &str, path: &Option<String>, numa| Placed {
        name: name.to_owned(),
        location: path.as_deref().and_then(PciLocation::parse),
        numa,
    };
    let placed_nics: Vec<Placed> = nics
        .iter()
        .map(|n| placed(&n.name, &n.pci_path, n.numa))
        .collect();
    if placed_nics.iter().all(|n| n.location.is_none()) {
        let why = if nics.is_empty() {
            match checked {
                Some(name) => format!(
                    "{name} has no PCI function in sysfs (/sys/class/infiniband is empty: a \
                     virtual or emulated device)"
                ),
                None => "no RDMA device (/sys/class/infiniband is empty)".into(),
            }
        } else {
            let names: Vec<&str> = nics.iter().map(|n| n.name.as_str()).collect();
            format!(
                "{} ha{} no PCI function (virtual devices)",
                names.join(", "),
                if names.len() == 1 { "s" } else { "ve" }
            )
        };
        return row
            .status(Status::Skip)
            .result(format!("cannot run: {why}"));
    }
    let placed_gpus: Vec<Placed> = gpus
        .iter()
        .map(|g| placed(&g.name, &g.pci_path, g.numa))
        .collect();
    let pairs = pairings(&placed_gpus, &placed_nics);
    if pairs.is_empty() {
        let names: Vec<&str> = gpus.iter().map(|g| g.address.as_str()).collect();
        return row.status(Status::Skip).result(format!(
            "cannot run: {} not found under /sys/bus/pci/devices",
            names.join(", ")
        ));
    }
    let mut far = Vec::new();
    let mut lines = Vec::new();
    for p in &pairs {
        let Some((nic, d)) = &p.nearest else { continue };
        lines.push(format!("{} -> {nic} ({d})", p.gpu));
        if !d.class.off_the_cpu() {
            far.push(p.gpu.clone());
        }
    }
    let mut status = Status::Ok;
    let mut remedy = String::new();
    if !far.is_empty() {
        status = Status::Warn;
        remedy = format!(
            "no NIC shares a PCIe switch with {}: their RDMA traffic crosses the CPU, with less \
             bandwidth and more latency; put the GPU and a NIC below one switch where the \
             platform allows",
            far.join(", ")
        );
    }
    if let (Some(checked), Some(tested)) = (checked, tested) {
        if let Some(p) = pairs.iter().find(|p| p.gpu == tested) {
            if let Some((nearest, d)) = &p.nearest {
                let checked_d = p.others.iter().find(|(n, _)| n == checked).map(|(_, d)| *d);
                if nearest != checked && checked_d.is_none_or(|c| c.class > d.class) {
                    status = Status::Warn;
                    if !remedy.is_empty() {
                        remedy.push_str("; ");
                    }
                    remedy.push_str(&format!(
                        "{tested} is nearest to {nearest}, not to {checked}: use IBGDA_NIC={nearest} \
                         for the queues of {tested}"
                    ));
                }
            }
        }
    }
    row.status(status)
        .result(format!("recommended pairing: {}", lines.join("; ")))
        .remedy(remedy)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(name: &str, path: &str, numa: Option<u32>, iommu: Option<&str>) -> SysfsGpu {
        SysfsGpu {
            name: name.into(),
            address: path.rsplit('/').next().unwrap().into(),
            pci_path: Some(path.into()),
            numa,
            iommu_type: iommu.map(Into::into),
        }
    }

    fn nic(name: &str, path: Option<&str>, numa: Option<u32>, iommu: Option<&str>) -> SysfsNic {
        SysfsNic {
            name: name.into(),
            pci_path: path.map(Into::into),
            numa,
            iommu_type: iommu.map(Into::into),
            ..SysfsNic::default()
        }
    }

    const GPU0: &str =
        "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:02.0/0000:19:00.0";
    const NEAR: &str =
        "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:18:00.0";
    const FAR: &str = "/sys/devices/pci0000:9a/0000:9a:01.0/0000:9b:00.0/0000:9c:00.0";

    #[test]
    fn the_pairing_names_the_nearest_nic_and_flags_a_far_choice() {
        let gpus = [gpu("GPU 0", GPU0, Some(0), None)];
        let nics = [
            nic("mlx5_1", Some(FAR), Some(1), None),
            nic("mlx5_0", Some(NEAR), Some(0), None),
        ];
        let row = pcie_row(&gpus, &nics, Some("mlx5_0"), Some("GPU 0"));
        assert_eq!(row.status, Status::Ok, "{row:?}");
        assert_eq!(
            row.result,
            "recommended pairing: GPU 0 -> mlx5_0 (PXB: below the same PCIe switch, 3 bridges)"
        );
        let row = pcie_row(&gpus, &nics, Some("mlx5_1"), Some("GPU 0"));
        assert_eq!(row.status, Status::Warn);
        assert!(row
            .remedy
            .contains("GPU 0 is nearest to mlx5_0, not to mlx5_1: use IBGDA_NIC=mlx5_0"));
        let row = pcie_row(&gpus, &nics[..1], Some("mlx5_1"), Some("GPU 0"));
        assert_eq!(row.status, Status::Warn);
        assert!(row
            .result
            .contains("GPU 0 -> mlx5_1 (SYS: across the CPU socket interconnect)"));
        assert!(row
            .remedy
            .starts_with("no NIC shares a PCIe switch with GPU 0"));
    }

    #[test]
    fn without_a_gpu_or_a_placed_nic_the_distance_is_not_measured() {
        let row = pcie_row(&[], &[], None, None);
        assert_eq!(row.status, Status::Skip);
        assert!(row.result.starts_with("cannot run: no GPU"));
        let gpus = [gpu("GPU 0", GPU0, Some(0), None)];
        let row = pcie_row(&gpus, &[], Some("mlx5_0"), Some("GPU 0"));
        assert_eq!(row.status, Status::Skip);
        assert!(
            row.result.contains("mlx5_0 has no PCI function in sysfs"),
            "{}",
            row.result
        );
        let row = pcie_row(&gpus, &[nic("rxe0", None, None, None)], None, None);
        assert!(
            row.result.contains("rxe0 has no PCI function"),
            "{}",
            row.result
        );
        let row = pcie_row(&gpus, &[], None, None);
        assert!(row
            .result
            .contains("no RDMA device (/sys/class/infiniband is empty)"));
    }

    #[test]
    fn translated_dma_is_flagged_and_passthrough_is_not() {
        let host = HostFacts {
            cmdline: Some("ro intel_iommu=on quiet".into()),
            iommu_units: vec!["dmar0".into(), "dmar1".into()],
            ..HostFacts::default()
        };
        let gpus = [gpu("GPU 0", GPU0, Some(0), Some("DMA-FQ"))];
        let nics = [nic("mlx5_0", Some(NEAR), Some(0), Some("DMA-FQ"))];
        let row = iommu_row(&host, &gpus, &nics);
        assert_eq!(row.status, Status::Warn);
        assert_eq!(
            row.result,
            "DMA is translated by the IOMMU for GPU 0 (0000:19:00.0): DMA-FQ, mlx5_0: DMA-FQ; \
             command line: intel_iommu=on"
        );
        assert!(row.remedy.contains("`iommu=pt`"));
        let gpus = [gpu("GPU 0", GPU0, Some(0), Some("identity"))];
        let nics = [nic("mlx5_0", Some(NEAR), Some(0), Some("identity"))];
        let row = iommu_row(&host, &gpus, &nics);
        assert_eq!(row.status, Status::Ok);
        assert!(row
            .result
            .starts_with("no translation: GPU 0 (0000:19:00.0): identity"));
        // No IOMMU at all.
        let row = iommu_row(&HostFacts::default(), &[], &[]);
        assert_eq!(row.status, Status::Ok);
        assert_eq!(
            row.result,
            "no IOMMU translates DMA (/sys/class/iommu is empty)"
        );
        // Units but no device to read: the command line decides.
        let row = iommu_row(&host, &[], &[]);
        assert_eq!(row.status, Status::Warn);
        let pt = HostFacts {
            cmdline: Some("intel_iommu=on iommu=pt".into()),
            ..host
        };
        let row = iommu_row(&pt, &[], &[]);
        assert_eq!(row.status, Status::Ok);
        assert!(row.result.contains("in passthrough"));
    }
}
