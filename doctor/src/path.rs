//! Which doorbell path ibgda's GPU producers get on this host, and why.
//!
//! - **GPU**: queues in GPU memory (registered as UMEM by DMA-BUF or peer memory) and the
//!   NIC's doorbell page mapped into the GPU: kernels build WQEs and ring the doorbell
//!   themselves (`MappedUar`).
//! - **CPU-assisted**: queues in GPU memory, but the doorbell page cannot be mapped into
//!   the GPU: kernels build WQEs and publish their producer index, a host thread rings the
//!   doorbell (`ibgda::proxy::CpuAssisted`, NVSHMEM's CPU NIC handler).
//! - **proxy**: GPU memory cannot be registered with the NIC: kernels push 16-byte request
//!   descriptors to host rings and CPU workers build the WQEs on host-placed queues
//!   (`ibgda::proxy::Worker`).
//! - **host**: no GPU: CPU threads post to host-placed queues, which is all that is asked.

use serde::Serialize;

use crate::report::{Row, Status};

/// A doorbell path, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum DoorbellPath {
    /// Kernels ring the NIC themselves.
    Gpu,
    /// A host thread rings for kernels that build their WQEs in GPU memory.
    CpuAssisted,
    /// CPU workers build the WQEs from descriptors kernels push.
    Proxy,
    /// No GPU: CPU producers only.
    Host,
}

impl DoorbellPath {
    /// The name the report and `--require` use.
    pub fn name(self) -> &'static str {
        match self {
            Self::Gpu => "gpu",
            Self::CpuAssisted => "cpu-assisted",
            Self::Proxy => "proxy",
            Self::Host => "host",
        }
    }

    /// The path named `name` (for `--require`).
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Gpu, Self::CpuAssisted, Self::Proxy, Self::Host]
            .into_iter()
            .find(|p| p.name() == name)
    }
}

/// What is known of one requirement: found by a check that ran, predicted from the
/// driver's settings, or unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Known {
    /// A check ran and it works (`true`) or not.
    Tested(bool),
    /// No check could run; the host's settings say it would work (`true`) or not.
    Predicted(bool),
    /// Nothing says.
    Unknown,
}

impl Known {
    fn works(self) -> Option<bool> {
        match self {
            Self::Tested(v) | Self::Predicted(v) => Some(v),
            Self::Unknown => None,
        }
    }
    fn predicted(self) -> bool {
        !matches!(self, Self::Tested(_))
    }
}

/// What the path depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathInputs {
    /// An mlx5 device can run ibgda's queues (every needed NIC check passed).
    pub nic_usable: bool,
    /// A GPU can be used.
    pub gpu: bool,
    /// GPU memory can be registered with the NIC (by DMA-BUF or peer memory).
    pub gpu_memory: Known,
    /// The NIC's doorbell page can be mapped into the GPU.
    pub doorbell_mapping: Known,
}

/// The path the inputs give, `None` when no NIC can be used, and whether any input was
/// only predicted.
pub fn decide(i: &PathInputs) -> (Option<DoorbellPath>, DoorbellPath, bool) {
    let path = if !i.gpu {
        DoorbellPath::Host
    } else {
        match (i.gpu_memory.works(), i.doorbell_mapping.works()) {
            (Some(true), Some(true)) => DoorbellPath::Gpu,
            (Some(true), _) => DoorbellPath::CpuAssisted,
            _ => DoorbellPath::Proxy,
        }
    };
    let predicted = i.gpu
        && (i.gpu_memory.predicted()
            || (path != DoorbellPath::Proxy && i.doorbell_mapping.predicted()));
    (i.nic_usable.then_some(path), path, predicted)
}

/// The doorbell-path row; with `required`, the row is needed and fails when the path is
/// worse than it (or cannot be established).
pub fn row(i: &PathInputs, required: Option<DoorbellPath>) -> (Row, Option<DoorbellPath>) {
    let (actual, path, predicted) = decide(i);
    let mut row = Row::new("doorbell_path", "doorbell path", Status::Ok).how(
        "from the rows above: GPU memory registration (DMA-BUF or peer memory) and the \
         doorbell page mapped into the GPU",
    );
    if required.is_some() {
        row = row.needed();
    }
    let why = match path {
        DoorbellPath::Gpu => "GPU queue memory registers with the NIC and the doorbell page maps into the GPU: kernels build WQEs and ring the doorbell themselves",
        DoorbellPath::CpuAssisted => "GPU queue memory registers with the NIC but the doorbell page does not map into the GPU: kernels build WQEs in GPU memory and publish their index, a host thread rings the doorbell (ibgda::proxy::CpuAssisted)",
        DoorbellPath::Proxy => "GPU memory cannot be registered with the NIC: kernels push 16-byte descriptors to host rings and CPU workers post on host-placed queues (ibgda::proxy::Worker)",
        DoorbellPath::Host => "no GPU: CPU threads post to host-placed queues, which needs nothing more",
    };
    let remedy = match path {
        DoorbellPath::CpuAssisted => "for the GPU path, let the driver map the doorbell page (see the doorbell mapping row)",
        DoorbellPath::Proxy => "for the GPU or CPU-assisted path, make GPU memory registrable (see the DMA-BUF and peer-memory rows)",
        DoorbellPath::Gpu | DoorbellPath::Host => "",
    };
    row = match actual {
        Some(p) if !predicted => row
            .status(if matches!(p, DoorbellPath::Gpu | DoorbellPath::Host) {
                Status::Ok
            } else {
                Status::Warn
            })
            .result(format!("{}: {why}", p.name()))
            .remedy(remedy),
        Some(p) => row
            .status(Status::Warn)
            .result(format!(
                "{} (partly predicted from the driver's settings: a check could not run): {why}",
                p.name()
            ))
            .remedy(remedy),
        None => row.status(Status::Skip).result(format!(
            "none: no usable mlx5 device; with one, this host would give {}{}: {why}",
            path.name(),
            if predicted { " (predicted)" } else { "" }
        )),
    };
    if let Some(required) = required {
        let meets = actual.is_some_and(|p| {
            !predicted
                && p <= required
                && (p != DoorbellPath::Host || required == DoorbellPath::Host)
        });
        if !meets {
            row = row.status(Status::Fail);
            let note = format!("--require {} is not met", required.name());
            row.remedy = if row.remedy.is_empty() {
                note
            } else {
                format!("{note}; {}", row.remedy)
            };
        }
    }
    (row, actual)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(gpu: bool, memory: Known, mapping: Known) -> PathInputs {
        PathInputs {
            nic_usable: true,
            gpu,
            gpu_memory: memory,
            doorbell_mapping: mapping,
        }
    }

    #[test]
    fn each_path_follows_from_what_works() {
        use Known::*;
        let cases = [
            (
                inputs(true, Tested(true), Tested(true)),
                DoorbellPath::Gpu,
                Status::Ok,
            ),
            (
                inputs(true, Tested(true), Tested(false)),
                DoorbellPath::CpuAssisted,
                Status::Warn,
            ),
            (
                inputs(true, Tested(false), Tested(true)),
                DoorbellPath::Proxy,
                Status::Warn,
            ),
            (
                inputs(true, Tested(false), Unknown),
                DoorbellPath::Proxy,
                Status::Warn,
            ),
            (
                inputs(false, Unknown, Unknown),
                DoorbellPath::Host,
                Status::Ok,
            ),
        ];
        for (i, path, status) in cases {
            let (row, actual) = row(&i, None);
            assert_eq!(actual, Some(path), "{i:?}");
            assert_eq!(row.status, status, "{i:?}");
            assert!(row.result.starts_with(path.name()), "{}", row.result);
            assert!(!row.needed);
        }
    }

    #[test]
    fn without_a_nic_the_path_is_only_a_prediction() {
        let i = PathInputs {
            nic_usable: false,
            ..inputs(true, Known::Predicted(true), Known::Predicted(false))
        };
        let (row, actual) = row(&i, None);
        assert_eq!(actual, None);
        assert_eq!(row.status, Status::Skip);
        assert!(
            row.result.starts_with("none: no usable mlx5 device; with one, this host would give cpu-assisted (predicted)"),
            "{}",
            row.result
        );
        // A prediction never meets a requirement.
        let (row, _) = row_required(&i, DoorbellPath::Proxy);
        assert_eq!(row.status, Status::Fail);
        assert!(row.needed);
    }

    fn row_required(i: &PathInputs, r: DoorbellPath) -> (Row, Option<DoorbellPath>) {
        row(i, Some(r))
    }

    #[test]
    fn a_requirement_fails_a_worse_path_only() {
        use Known::*;
        let assisted = inputs(true, Tested(true), Tested(false));
        assert_eq!(
            row_required(&assisted, DoorbellPath::Gpu).0.status,
            Status::Fail
        );
        assert!(row_required(&assisted, DoorbellPath::Gpu)
            .0
            .remedy
            .starts_with("--require gpu is not met"));
        assert_eq!(
            row_required(&assisted, DoorbellPath::CpuAssisted).0.status,
            Status::Warn
        );
        assert_eq!(
            row_required(&assisted, DoorbellPath::Proxy).0.status,
            Status::Warn
        );
        // No GPU meets only `host`.
        let host = inputs(false, Unknown, Unknown);
        assert_eq!(
            row_required(&host, DoorbellPath::Proxy).0.status,
            Status::Fail
        );
        assert_eq!(row_required(&host, DoorbellPath::Host).0.status, Status::Ok);
        // A mapping predicted while memory was tested is still a prediction for the GPU path.
        let half = inputs(true, Tested(true), Predicted(true));
        assert_eq!(
            row_required(&half, DoorbellPath::Gpu).0.status,
            Status::Fail
        );
        assert_eq!(
            DoorbellPath::from_name("cpu-assisted"),
            Some(DoorbellPath::CpuAssisted)
        );
        assert_eq!(DoorbellPath::from_name("fast"), None);
    }
}
