//! The PCIe distance between a GPU and a NIC, from where sysfs puts each device.
//!
//! Every PCI function is a directory under `/sys/devices`, nested under the bridges above
//! it: `/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:02.0/0000:19:00.0` is the
//! function 0000:19:00.0 below the root port 0000:15:01.0 of host bridge `pci0000:15`
//! (domain 0000, bus 15), through a switch's upstream port 0000:16:00.0 and downstream port
//! 0000:17:02.0. `/sys/class/infiniband/<nic>/device` and `/sys/bus/pci/devices/<bdf>` are
//! links to those directories; `/sys/bus/pci/devices/<bdf>/numa_node` is the NUMA node of
//! the host bridge (-1 when the platform does not say).
//!
//! Distances use the classes `nvidia-smi topo -m` prints, nearest first:
//! PIX (at most one PCIe bridge between them), PXB (several bridges, not through the host
//! bridge), PHB (through a host bridge: the CPU's root complex), NODE (between host bridges
//! of one NUMA node), SYS (across the interconnect between NUMA nodes, i.e. CPU sockets).

use core::fmt;

/// Where a PCI function sits: its host bridge and the bridges between it and the function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciLocation {
    /// The host bridge (`pci0000:15`).
    pub host_bridge: String,
    /// The bridges from the root port down, then the function itself, last.
    pub chain: Vec<String>,
}

fn is_bdf(name: &str) -> bool {
    // dddd:bb:dd.f
    let b = name.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && name
            .chars()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_hexdigit())
}

impl PciLocation {
    /// The location of the function a resolved sysfs path names (`None` if the path is not
    /// a PCI function under a host bridge, as for a virtual device).
    pub fn parse(resolved: &str) -> Option<Self> {
        let (_, below) = resolved.split_once("/devices/")?;
        let mut parts = below.split('/');
        let host_bridge = parts.next().filter(|p| p.starts_with("pci"))?.to_owned();
        let chain: Vec<String> = parts
            .take_while(|p| is_bdf(p))
            .map(|p| p.to_ascii_lowercase())
            .collect();
        if chain.is_empty() {
            return None;
        }
        Some(Self { host_bridge, chain })
    }

    fn bridges(&self) -> &[String] {
        &self.chain[..self.chain.len() - 1]
    }
}

/// How far apart two functions are (nearest first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// At most one PCIe bridge between them (both below one switch port).
    Pix,
    /// Several PCIe bridges, not through the host bridge (one PCIe switch).
    Pxb,
    /// Through a host bridge (the CPU's root complex: different root ports).
    Phb,
    /// Between host bridges of one NUMA node.
    Node,
    /// Across the interconnect between NUMA nodes (CPU sockets).
    Sys,
}

impl Class {
    /// The class as `nvidia-smi topo -m` names it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Pix => "PIX",
            Self::Pxb => "PXB",
            Self::Phb => "PHB",
            Self::Node => "NODE",
            Self::Sys => "SYS",
        }
    }

    /// What it means, in words.
    pub fn meaning(self) -> &'static str {
        match self {
            Self::Pix => "below the same PCIe switch port",
            Self::Pxb => "below the same PCIe switch",
            Self::Phb => "through the CPU's root complex (different root ports)",
            Self::Node => "between host bridges of one CPU socket",
            Self::Sys => "across the CPU socket interconnect",
        }
    }

    /// Whether GPU-initiated traffic between the two stays off the CPU.
    pub fn off_the_cpu(self) -> bool {
        matches!(self, Self::Pix | Self::Pxb)
    }
}

/// The distance of two functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Distance {
    /// Its class.
    pub class: Class,
    /// How many PCIe bridges the path between them crosses (0 when it leaves the host
    /// bridge: then the class says more).
    pub bridges: usize,
    /// How many bridges both sit below (1: only the root port; more: a switch too).
    pub shared: usize,
}

impl fmt::Display for Distance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let meaning = match self.class {
            Class::Pxb if self.shared == 1 => "below the same root port",
            class => class.meaning(),
        };
        write!(f, "{}: {meaning}", self.class.label())?;
        if self.class.off_the_cpu() {
            write!(
                f,
                ", {} bridge{}",
                self.bridges,
                if self.bridges == 1 { "" } else { "s" }
            )?;
        }
        Ok(())
    }
}

/// The distance between functions at `a` and `b`, with the NUMA nodes of their host
/// bridges (`None`: unknown, as `-1` in sysfs).
pub fn distance(
    a: &PciLocation,
    b: &PciLocation,
    numa_a: Option<u32>,
    numa_b: Option<u32>,
) -> Distance {
    if a.host_bridge != b.host_bridge {
        let class = match (numa_a, numa_b) {
            (Some(x), Some(y)) if x != y => Class::Sys,
            // Same node, or unknown nodes: at least different host bridges.
            _ => Class::Node,
        };
        return Distance {
            class,
            bridges: 0,
            shared: 0,
        };
    }
    let common = a
        .bridges()
        .iter()
        .zip(b.bridges())
        .take_while(|(x, y)| x == y)
        .count();
    if common == 0 {
        return Distance {
            class: Class::Phb,
            bridges: 0,
            shared: 0,
        };
    }
    // The bridges below the lowest common one on each side, and that one.
    let bridges = (a.bridges().len() - common) + (b.bridges().len() - common) + 1;
    Distance {
        class: if bridges <= 1 { Class::Pix } else { Class::Pxb },
        bridges,
        shared: common,
    }
}

/// A device placed in the PCI hierarchy (a GPU or a NIC), for pairing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    /// Its name (`GPU 0`, `mlx5_0`).
    pub name: String,
    /// Where it is, if sysfs says.
    pub location: Option<PciLocation>,
    /// The NUMA node of its host bridge.
    pub numa: Option<u32>,
}

/// The nearest NIC of one GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pairing {
    /// The GPU's name.
    pub gpu: String,
    /// The nearest NIC and how far it is; `None` when no NIC has a location.
    pub nearest: Option<(String, Distance)>,
    /// The other NICs, nearest first.
    pub others: Vec<(String, Distance)>,
}

/// For each GPU with a location, the NICs by distance (ties broken by fewer bridges, then
/// by name).
pub fn pairings(gpus: &[Placed], nics: &[Placed]) -> Vec<Pairing> {
    gpus.iter()
        .filter_map(|gpu| {
            let at = gpu.location.as_ref()?;
            let mut by_distance: Vec<(String, Distance)> = nics
                .iter()
                .filter_map(|nic| {
                    let loc = nic.location.as_ref()?;
                    Some((nic.name.clone(), distance(at, loc, gpu.numa, nic.numa)))
                })
                .collect();
            by_distance.sort_by(|(na, da), (nb, db)| {
                (da.class, da.bridges, na).cmp(&(db.class, db.bridges, nb))
            });
            let mut rest = by_distance.into_iter();
            Some(Pairing {
                gpu: gpu.name.clone(),
                nearest: rest.next(),
                others: rest.collect(),
            })
        })
        .collect()
}

/// The NUMA node of a `numa_node` file's text (`-1`: none).
pub fn numa_node(text: &str) -> Option<u32> {
    text.trim()
        .parse::<i64>()
        .ok()
        .and_then(|n| u32::try_from(n).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    // A two-socket host in the shape of an 8-GPU server with PCIe switches: on socket 0,
    // host bridge pci0000:15 with root port 15:01.0 leading to a switch (upstream port
    // 16:00.0, downstream ports 17:00.0, 17:01.0 and 17:02.0); GPU 0 at 19:00.0 below
    // 17:02.0, NIC mlx5_0 at 18:00.0 below 17:01.0, NIC mlx5_1 at 1a:00.0 below a second
    // level switch (1b:00.0 -> 1c:00.0) of 17:00.0. Host bridge pci0000:37 (socket 0) holds
    // mlx5_2 at 38:00.0 directly below root port 37:01.0, and root port 15:03.0 of the first
    // host bridge holds mlx5_3 at 1d:00.0. Socket 1's host bridge pci0000:9a holds mlx5_4 at
    // 9c:00.0 and GPU 4 at 9d:00.0 below the same downstream port 9b:00.0.
    const GPU0: &str =
        "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:02.0/0000:19:00.0";
    const MLX5_0: &str =
        "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:18:00.0";
    const MLX5_1: &str = "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/\
                          0000:1b:00.0/0000:1c:00.0/0000:1a:00.0";
    const MLX5_2: &str = "/sys/devices/pci0000:37/0000:37:01.0/0000:38:00.0";
    const MLX5_3: &str = "/sys/devices/pci0000:15/0000:15:03.0/0000:1d:00.0";
    const MLX5_4: &str = "/sys/devices/pci0000:9a/0000:9a:01.0/0000:9b:00.0/0000:9c:00.0";
    const GPU4: &str = "/sys/devices/pci0000:9a/0000:9a:01.0/0000:9b:00.0/0000:9d:00.0";
    // A virtual machine's flat bus (every device on the root bus).
    const VM_GPU: &str = "/sys/devices/pci0000:00/0000:00:05.0";
    const VM_NIC: &str = "/sys/devices/pci0000:00/0000:00:06.0";

    fn at(path: &str) -> PciLocation {
        PciLocation::parse(path).unwrap_or_else(|| panic!("{path}"))
    }

    #[test]
    fn sysfs_paths_give_the_host_bridge_and_the_bridges() {
        let gpu = at(GPU0);
        assert_eq!(gpu.host_bridge, "pci0000:15");
        assert_eq!(gpu.chain.last().unwrap(), "0000:19:00.0");
        assert_eq!(
            gpu.bridges(),
            ["0000:15:01.0", "0000:16:00.0", "0000:17:02.0"]
        );
        // The infiniband class path continues below the function: only the functions count.
        let nic = at("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:18:00.0/infiniband/mlx5_0");
        assert_eq!(nic.chain.last().unwrap(), "0000:18:00.0");
        assert_eq!(
            PciLocation::parse("/sys/devices/virtual/infiniband/rxe0"),
            None
        );
        assert_eq!(PciLocation::parse("/sys/devices/platform/foo"), None);
        assert_eq!(PciLocation::parse("/sys/devices/pci0000:00"), None);
    }

    #[test]
    fn each_class_is_told_apart() {
        let d = |a, b, na, nb| distance(&at(a), &at(b), na, nb);
        // Two downstream ports of one switch: DSP, USP, DSP.
        assert_eq!(
            d(GPU0, MLX5_0, Some(0), Some(0)),
            Distance {
                class: Class::Pxb,
                bridges: 3,
                shared: 2
            }
        );
        // Below a second-level switch of the same switch.
        assert_eq!(d(GPU0, MLX5_1, Some(0), Some(0)).bridges, 5);
        assert_eq!(d(GPU0, MLX5_1, Some(0), Some(0)).class, Class::Pxb);
        // Both below one downstream port.
        assert_eq!(
            d(GPU4, MLX5_4, Some(1), Some(1)),
            Distance {
                class: Class::Pix,
                bridges: 1,
                shared: 2
            }
        );
        // Below one root port, in different switches: through the root port only.
        let other_switch =
            "/sys/devices/pci0000:15/0000:15:01.0/0000:20:00.0/0000:21:00.0/0000:22:00.0";
        let d = d(GPU0, other_switch, Some(0), Some(0));
        assert_eq!((d.class, d.bridges, d.shared), (Class::Pxb, 5, 1));
        assert_eq!(d.to_string(), "PXB: below the same root port, 5 bridges");
        let d = |a, b, na, nb| distance(&at(a), &at(b), na, nb);
        // Another root port of the same host bridge.
        assert_eq!(d(GPU0, MLX5_3, Some(0), Some(0)).class, Class::Phb);
        // Another host bridge, same socket; unknown nodes count as that too.
        assert_eq!(d(GPU0, MLX5_2, Some(0), Some(0)).class, Class::Node);
        assert_eq!(d(GPU0, MLX5_2, None, None).class, Class::Node);
        // Another socket.
        assert_eq!(d(GPU0, MLX5_4, Some(0), Some(1)).class, Class::Sys);
        // A VM's flat bus: through the (virtual) host bridge.
        assert_eq!(d(VM_GPU, VM_NIC, None, None).class, Class::Phb);
        // Symmetric.
        assert_eq!(
            d(MLX5_0, GPU0, Some(0), Some(0)),
            d(GPU0, MLX5_0, Some(0), Some(0))
        );
    }

    #[test]
    fn each_gpu_is_paired_with_its_nearest_nic() {
        let placed = |name: &str, path: Option<&str>, numa| Placed {
            name: name.into(),
            location: path.map(at),
            numa,
        };
        let gpus = [
            placed("GPU 0", Some(GPU0), Some(0)),
            placed("GPU 4", Some(GPU4), Some(1)),
            placed("GPU 9", None, None),
        ];
        let nics = [
            placed("mlx5_4", Some(MLX5_4), Some(1)),
            placed("mlx5_2", Some(MLX5_2), Some(0)),
            placed("mlx5_1", Some(MLX5_1), Some(0)),
            placed("mlx5_0", Some(MLX5_0), Some(0)),
            placed("mlx5_3", Some(MLX5_3), Some(0)),
            placed("rxe0", None, None),
        ];
        let p = pairings(&gpus, &nics);
        assert_eq!(p.len(), 2, "a GPU without a location is not paired");
        assert_eq!(p[0].gpu, "GPU 0");
        let (nic, dist) = p[0].nearest.clone().unwrap();
        assert_eq!(
            (nic.as_str(), dist.class, dist.bridges),
            ("mlx5_0", Class::Pxb, 3)
        );
        let order: Vec<&str> = p[0].others.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(order, ["mlx5_1", "mlx5_3", "mlx5_2", "mlx5_4"]);
        assert_eq!(p[1].nearest.as_ref().unwrap().0, "mlx5_4");
        assert_eq!(p[1].nearest.as_ref().unwrap().1.class, Class::Pix);
        assert!(pairings(&gpus[..1], &nics[5..])[0].nearest.is_none());
        assert_eq!(
            dist.to_string(),
            "PXB: below the same PCIe switch, 3 bridges"
        );
    }

    #[test]
    fn numa_nodes_parse() {
        assert_eq!(numa_node("0\n"), Some(0));
        assert_eq!(numa_node("1"), Some(1));
        assert_eq!(numa_node("-1\n"), None);
        assert_eq!(numa_node(""), None);
    }
}
